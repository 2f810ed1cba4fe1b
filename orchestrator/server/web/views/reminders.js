// Reminders: the list by due time with status, target, attempts and last error; create one (a time, an optional
// RFC 5545 rule, a target: a chat thread, an agent process, a webhook or a jorb); cancel; fire a missed one now.
import { api } from "../api.js";
import { clear, h, problem } from "../dom.js";

let listEl;
let formEl;
let statusEl;
let filter;

const TARGET_HELP = {
  chat: ["Chat thread", "pick a conversation (empty: the reminders thread)"],
  agent: ["Agent command", "path of an executable agent script"],
  webhook: ["Webhook URL", "http://localhost:8070/agent/7"],
  jorb: ["Jorb", "pick the jorb to wake"],
};

export function mount(el) {
  filter = h("select", { id: "reminders-filter", "aria-label": "Status" },
    ["", "pending", "sent", "failed", "missed", "cancelled", "skipped"].map((s) => h("option", { value: s }, s || "every status")));
  filter.addEventListener("change", () => load());
  statusEl = h("div", { class: "scheduler-state" });
  listEl = h("div", { class: "reminder-list" });
  formEl = h("div", { class: "reminder-form" });
  el.append(h("div", { class: "view-head" }, h("h1", {}, "Reminders"), filter, h("button", { type: "button", onclick: () => load() }, "Refresh")),
    statusEl, h("div", { class: "split wide-first" }, listEl, formEl));
  renderForm();
}

export async function show() {
  await load();
}

async function load() {
  let data;
  try {
    data = await api(`/api/reminders${filter.value ? `?status=${filter.value}` : ""}`);
  } catch (err) {
    clear(listEl).append(problem(err.message));
    return;
  }
  clear(statusEl);
  const s = data.scheduler;
  if (s.state !== "running") {
    statusEl.append(problem(`The scheduler is ${s.state}: ${s.detail || "reminders do not fire"}.`));
  } else {
    statusEl.append(h("p", { class: "muted small", text: `Times are in ${data.zone}; the scheduler is running.` }));
  }
  clear(listEl);
  if (!data.reminders.length) {
    listEl.append(h("p", { class: "empty", text: filter.value ? `No ${filter.value} reminders.` : "No reminders yet: create one on the right." }));
    return;
  }
  const tbody = h("tbody");
  for (const r of data.reminders) {
    const err = h("div");
    const actions = [];
    if (r.status === "pending" || r.status === "missed") {
      actions.push(h("button", { type: "button", class: "danger", onclick: () => act(r.id, "cancel", err) }, "Cancel"));
    }
    if (r.status === "missed" || r.status === "failed") {
      actions.push(h("button", { type: "button", onclick: () => act(r.id, "fire", err) }, "Fire now"));
    }
    tbody.append(h("tr", { class: `reminder status-${r.status}`, "data-reminder": r.id },
      h("td", {}, h("strong", { text: r.title }), r.description ? h("div", { class: "muted small", text: r.description }) : null,
        r.rrule ? h("div", { class: "muted small", text: `repeats ${r.rrule}` }) : null),
      h("td", { text: r.due_text }),
      h("td", {}, h("span", { class: `badge status-${r.status}`, text: r.status }),
        r.last_error && r.status !== "sent" ? h("div", { class: "muted small", text: r.last_error }) : null),
      h("td", { text: `${r.target_kind}: ${r.target}` }),
      h("td", { text: r.priority }),
      h("td", {}, actions, err)));
  }
  listEl.append(h("table", { class: "reminders" },
    h("thead", {}, h("tr", {}, ["title", "due", "status", "target", "priority", ""].map((c) => h("th", { text: c })))), tbody));
}

async function act(id, what, errEl) {
  try {
    await api(`/api/reminders/${encodeURIComponent(id)}/${what}`, { method: "POST" });
    await load();
  } catch (err) {
    clear(errEl).append(problem(err.message));
  }
}

function renderForm() {
  const err = h("div");
  const title = h("input", { type: "text", id: "rem-title", placeholder: "e.g. Water the plants" });
  const whenInput = h("input", { type: "datetime-local", id: "rem-when", step: 60 });
  const rrule = h("input", { type: "text", id: "rem-rrule", placeholder: "optional: FREQ=DAILY;BYHOUR=18" });
  const kind = h("select", { id: "rem-kind" }, Object.entries(TARGET_HELP).map(([k, [label]]) => h("option", { value: k }, label.split(" ")[0])));
  const targetLabel = h("label", { for: "rem-target" });
  // Conversations and jorbs by name, so nobody has to copy an id (the value sent is still the id).
  const choices = h("datalist", { id: "rem-target-choices" });
  const target = h("input", { type: "text", id: "rem-target", list: "rem-target-choices" });
  const fillChoices = async () => {
    clear(choices);
    try {
      if (kind.value === "chat") {
        for (const t of await api("/api/threads")) choices.append(h("option", { value: t.thread_id, label: t.title || t.thread_id }));
      } else if (kind.value === "jorb") {
        const jorbs = await api("/api/jorbs");
        for (const j of (jorbs.jorbs || jorbs)) choices.append(h("option", { value: j.id, label: j.name || j.id }));
      }
    } catch (_) { /* the field still takes a typed id */ }
  };
  const description = h("textarea", { id: "rem-description", rows: 2 });
  const priority = h("select", { id: "rem-priority" }, ["low", "medium", "high"].map((p) => h("option", { value: p, selected: p === "medium" }, p)));
  const onKind = () => {
    const [label, hint] = TARGET_HELP[kind.value];
    targetLabel.textContent = label;
    target.placeholder = hint;
    fillChoices();
  };
  kind.addEventListener("change", onKind);
  onKind();
  const submit = async (ev) => {
    ev.preventDefault();
    try {
      await api("/api/reminders", { method: "POST", body: {
        title: title.value, when: whenInput.value, rrule: rrule.value.trim() || null, target_kind: kind.value,
        target: target.value.trim() || null, description: description.value.trim() || null, priority: priority.value } });
      title.value = "";
      rrule.value = "";
      description.value = "";
      clear(err).append(h("p", { class: "muted", role: "status", text: "Created." }));
      await load();
    } catch (e) {
      clear(err).append(problem(e.message));
    }
  };
  formEl.append(h("form", { class: "new-reminder", onsubmit: submit },
    h("h2", {}, "New reminder"),
    h("label", { for: "rem-title" }, "Title"), title,
    h("label", { for: "rem-when" }, "When (your local time)"), whenInput,
    h("label", { for: "rem-rrule" }, "Repeat rule (RFC 5545)"), rrule,
    h("label", { for: "rem-kind" }, "Target"), kind,
    targetLabel, target, choices,
    h("label", { for: "rem-description" }, "Description"), description,
    h("label", { for: "rem-priority" }, "Priority"), priority,
    err,
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Create reminder"))));
}
