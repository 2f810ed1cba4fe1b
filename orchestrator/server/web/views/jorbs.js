// Jorbs and missions: the list with status; a jorb's plan, what it waits for, its conversation and script results
// (a mission's rounds with jobs, commentary and btw); reply as the counterpart or as yourself, approve / reject,
// confirmations (the same dialog as the chat), a human-policy step, swap the policy, cancel; create a jorb or a
// mission. Everything that runs the jorb happens in the background: the view polls while it works.
import { api } from "../api.js";
import { answeredList, askAll, sentTo } from "../confirm.js";
import { clear, h, json, problem, when, visibleCode } from "../dom.js";

let ui;
let listEl;
let detailEl;
let showAll;
let current = null; // jorb id shown, or "new"
let timer = null;
let form = null; // GET /api/jorbs/form, loaded once
let reviewing = false;
let shownSig = ""; // what the detail shows, to re-render only when the jorb changed

const OPEN = ["planning", "running", "awaiting_reply", "paused"];
// The list and the detail are loaded from several places (show, the poll, the 5 s look); an answer that arrives
// after a newer one was asked for is stale and must not draw over it.
let listLoads = 0;
let jorbLoads = 0;

export function mount(el, shell) {
  ui = shell;
  showAll = h("input", { type: "checkbox", id: "jorbs-all" });
  showAll.addEventListener("change", () => loadList());
  // a labelled region: an aria-label on a plain div is not allowed (axe found it while the list was still empty)
  listEl = h("div", { class: "jorb-list", role: "region", "aria-label": "Jorbs" });
  detailEl = h("div", { class: "jorb-detail" });
  el.append(
    h("div", { class: "view-head" }, h("h1", {}, "Jorbs and missions"),
      h("button", { type: "button", class: "primary", onclick: () => ui.navigate("jorbs", "new") }, "New jorb or mission"),
      h("label", { for: "jorbs-all", class: "inline" }, showAll, " show finished"),
      h("button", { type: "button", onclick: () => show(current && current !== "new" ? current : undefined) }, "Refresh")),
    h("div", { class: "split" }, listEl, detailEl));
  // Replies arrive from the world while the view is open: look again every few seconds while it is visible.
  setInterval(() => {
    if (el.hidden || reviewing || document.querySelector("dialog[open]")) return;
    loadList();
    if (current && current !== "new" && timer === null) loadJorb(current, false, true);
  }, 5000);
}

let shows = 0; // the latest show(): an older one that finishes its awaits later must not redraw over it

export async function show(arg) {
  const [id, extra] = (arg || "").split("/");
  const mine = ++shows;
  current = id || null;
  await loadList();
  if (mine !== shows) return;
  if (current === "new") await showForm();
  else if (current) await loadJorb(current, extra === "review");
  else clear(detailEl).append(h("p", { class: "empty", text: "Pick a jorb, or start a new one. A jorb is a long-running task: it messages people, waits for their replies for as long as it takes, and pauses for you where its plan says so." }));
}

function badge(status) {
  const label = { awaiting_reply: "waiting for a reply", paused: "needs you" }[status] || status;
  return h("span", { class: `badge jorb-status status-${status}`, text: label });
}

// -- the list -------------------------------------------------------------------------------------------
async function loadList() {
  const mine = ++listLoads;
  let rows;
  try {
    rows = await api(`/api/jorbs${showAll.checked ? "?all=1" : ""}`);
  } catch (err) {
    if (mine === listLoads) clear(listEl).append(problem(err.message));
    return;
  }
  if (mine !== listLoads) return;
  clear(listEl);
  if (!rows.length) {
    listEl.append(h("p", { class: "empty", text: showAll.checked ? "No jorbs yet." : "No open jorbs (tick “show finished” for the others)." }));
    return;
  }
  const ul = h("ul", { class: "jorbs" });
  for (const r of rows) {
    const what = r.status === "paused" ? r.pause_reason : r.status === "awaiting_reply" && r.waiting_party ? `waiting for ${r.waiting_party}` : "";
    ul.append(h("li", { class: r.id === current ? "current" : "", "data-jorb": r.id },
      h("a", { href: `#jorbs/${r.id}` }, r.name),
      r.mode === "mission" ? h("span", { class: "badge mode", text: "mission" }) : null,
      badge(r.status), r.working ? h("span", { class: "badge working", text: "working" }) : null,
      what ? h("div", { class: "muted small", text: what }) : null));
  }
  listEl.append(ul);
}

// -- one jorb -------------------------------------------------------------------------------------------
function schedule(j) {
  clearTimeout(timer);
  timer = null;
  if (j && (j.working || j.status === "planning" || j.status === "running")) {
    timer = setTimeout(async () => {
      // Stop while the user looks elsewhere (another tab or jorb, or the dialog); show() loads it again.
      if (current !== j.id || reviewing || detailEl.closest(".view").hidden) return;
      await loadJorb(j.id, false, true);
      loadList();
    }, 700);
  }
}

async function loadJorb(id, review = false, quiet = false) {
  const mine = ++jorbLoads;
  let j;
  try {
    j = await api(`/api/jorbs/${encodeURIComponent(id)}`);
  } catch (err) {
    if (mine === jorbLoads) clear(detailEl).append(problem(err.status === 404 ? `There is no jorb ${id}.` : err.message));
    return;
  }
  if (current !== id || mine !== jorbLoads) return;
  // Keep what the user is typing while the view refreshes itself.
  const typing = quiet ? [...detailEl.querySelectorAll("textarea, input[type=text]")].some((x) => x.value && x === document.activeElement) : false;
  if (!typing && !(quiet && signature(j) === shownSig)) render(j);
  schedule(j);
  const confirmations = j.pending.filter((p) => p.type === "confirmation");
  if (review && confirmations.length && !j.working) await review_(j, confirmations);
}

function signature(j) {
  return JSON.stringify([j.status, j.updated_at, j.working, j.pending.map((p) => p.interrupt_id), j.queued.length]);
}

function render(j) {
  shownSig = signature(j);
  clear(detailEl);
  const mission = j.mode === "mission";
  detailEl.append(
    h("header", { class: "jorb-head" },
      h("h2", { text: j.name }), mission ? h("span", { class: "badge mode", text: "mission" }) : null, badge(j.status),
      j.working ? h("span", { class: "badge working", text: "working…" }) : null),
    h("p", { class: "muted small" }, `${j.id} · policy ${j.policy} · ${j.steps} step(s) · ${j.tokens} tokens · updated ${when(j.updated_at)}`),
  );
  if (j.error) detailEl.append(problem(`This jorb failed: ${j.error}`));
  if (j.status === "done" && j.result !== null && j.result !== undefined) {
    detailEl.append(h("div", { class: "result" }, h("strong", { text: "Result: " }), typeof j.result === "string" ? j.result : h("pre", { text: json(j.result) })));
  }
  for (const p of j.pending) detailEl.append(pendingBlock(j, p));
  const answers = answeredList(j.answered);
  if (answers) detailEl.append(answers);
  if (j.can.reply) detailEl.append(replyForm(j));
  if (j.queued.length) {
    detailEl.append(h("div", { class: "queued" }, h("h3", {}, "Not read yet"),
      h("p", { class: "muted small", text: "The jorb reads these when it next waits for a reply." }),
      h("ul", {}, j.queued.map((m) => h("li", {}, h("strong", { text: m.is_user ? "you" : m.party }), `: ${m.text}`)))));
  }
  detailEl.append(
    h("details", { class: "plan", open: true }, h("summary", {}, mission ? "Goal" : "Plan"), h("p", { class: "pre", text: j.plan }),
      h("dl", { class: "meta" },
        j.contacts.length ? [h("dt", { text: "contacts" }), h("dd", { text: j.contacts.join(", ") })] : null,
        Object.keys(j.autonomy || {}).length ? [h("dt", { text: "autonomy overrides" }), h("dd", { text: Object.entries(j.autonomy).map(([k, v]) => `${k}=${v}`).join(", ") })] : null,
        j.context ? [h("dt", { text: "allowed capabilities" }), h("dd", { text: j.context.join(", ") })] : null,
        j.options && j.options.workspace ? [h("dt", { text: "workspace" }), h("dd", { text: j.options.workspace })] : null)));
  if (mission) detailEl.append(rounds(j));
  else detailEl.append(conversation(j), scriptResults(j));
  detailEl.append(controls(j));
}

function pendingBlock(j, p) {
  const box = h("section", { class: `pending pending-${p.type}`, "data-interrupt": p.interrupt_id });
  const err = h("div");
  const fail = (e) => clear(err).append(problem(e.message));
  if (p.type === "await_reply") {
    box.append(h("p", {}, h("strong", { text: "Waiting for a reply" }),
      p.party ? ` from ${p.party}${p.channel ? ` on ${p.channel}` : ""}.` : ".",
      " Answer below as the counterpart, or let the real reply arrive."));
  } else if (p.type === "jorb_pause") {
    const ask = p.kind === "ask";
    const noteId = `note-${p.interrupt_id}`;
    const note = h("textarea", { id: noteId, rows: 2, placeholder: ask ? "your answer" : "optional: a note the jorb is told" });
    const decide = (action) => act(j.id, "decide", { interrupt_id: p.interrupt_id, ref: p.ref, action, note: note.value.trim() || null }, err);
    box.append(
      h("p", {}, h("strong", { text: ask ? "The mission asks: " : "Paused: " }), p.reason || ""),
      h("label", { for: noteId }, ask ? "Your answer" : "Note"), note,
      h("div", { class: "actions" },
        h("button", { type: "button", class: "primary", disabled: j.working, onclick: () => decide("approve") }, ask ? "Answer" : "Approve"),
        h("button", { type: "button", class: "danger", disabled: j.working, onclick: () => decide("reject") }, "Reject")),
      err);
  } else if (p.type === "confirmation") {
    const all = j.pending.filter((x) => x.type === "confirmation");
    if (all[0] !== p) return h("span"); // one block for all of them: they are answered together
    box.append(
      h("p", {}, h("strong", { text: all.length > 1 ? `${all.length} calls wait for your confirmation: ` : "A call waits for your confirmation: " }),
        all.map((x) => x.summary).join(" · ")),
      h("div", { class: "actions" }, h("button", { type: "button", class: "primary", disabled: j.working, onclick: () => review_(j, all, err) }, "Review")),
      sentTo(all),
      err);
  } else if (p.type === "human_step") {
    const stepId = `step-${p.interrupt_id}`;
    const area = h("textarea", { id: stepId, rows: 6, class: "code", spellcheck: "false",
      placeholder: '{"reasoning": "…", "script": "jarvis.time.now()", "await_reply": false, "done": false}' });
    box.append(
      h("p", {}, h("strong", { text: "Your turn: " }), `this jorb's policy is human, so you decide its next step (${p.format || "the step JSON"}).`),
      h("details", {}, h("summary", {}, "what the jorb sees"), h("pre", { text: p.prompt || "" })),
      h("label", { for: stepId }, "Step JSON"), area,
      h("div", { class: "actions" }, h("button", { type: "button", class: "primary", disabled: j.working, onclick: () => {
        let step = area.value.trim();
        try { step = JSON.parse(step); } catch (_) { /* sent as text: the server says what is wrong */ }
        act(j.id, "step", { interrupt_id: p.interrupt_id, step }, err);
      } }, "Submit step")),
      err);
  } else {
    box.append(h("pre", { text: json(p) }));
  }
  return box;
}

async function review_(j, confirmations, errEl) {
  reviewing = true;
  let answers;
  try {
    answers = await askAll(confirmations);
  } finally {
    reviewing = false;
  }
  if (answers === null) return schedule(j);
  await act(j.id, "resume", { answers }, errEl || detailEl);
}

function replyForm(j) {
  const err = h("div");
  const text = h("textarea", { id: "jorb-reply", rows: 3, placeholder: "what they (or you) say" });
  const party = h("input", { type: "text", id: "jorb-reply-party", value: (j.waiting_party !== "user" && j.waiting_party) || j.contacts[0] || "", placeholder: "who speaks" });
  const channel = h("input", { type: "text", id: "jorb-reply-channel", value: j.waiting_channel && j.waiting_channel !== "user" ? j.waiting_channel : "local" });
  const asUser = h("input", { type: "checkbox", id: "jorb-reply-as-user" });
  asUser.addEventListener("change", () => { party.disabled = asUser.checked; });
  const send = async () => {
    if (!text.value.trim()) return;
    if (await act(j.id, "reply", { text: text.value, as_user: asUser.checked, party: party.value.trim() || null, channel: channel.value.trim() || "local" }, err)) text.value = "";
  };
  return h("section", { class: "reply" },
    h("label", { for: "jorb-reply", class: "heading" }, "Reply"), text,
    h("div", { class: "row" },
      h("label", { for: "jorb-reply-party" }, "from "), party,
      h("label", { for: "jorb-reply-channel" }, " on "), channel,
      h("label", { for: "jorb-reply-as-user", class: "inline" }, asUser, " as me (an intervention, not the counterpart)")),
    h("div", { class: "actions" }, h("button", { type: "button", class: "primary", onclick: send }, "Send reply")),
    err);
}

function conversation(j) {
  const box = h("section", { class: "conversation-log" }, h("h3", {}, "Conversation"));
  if (!j.history || !j.history.length) {
    box.append(h("p", { class: "empty", text: "No messages yet." }));
    return box;
  }
  for (const m of j.history) {
    const who = m.role === "jarvis" ? `Jarvis → ${m.party}` : m.role === "user" ? "you (intervention)" : `${m.party} →`;
    box.append(h("div", { class: `hmsg ${m.role}` }, h("span", { class: "who", text: `${who} [${m.channel}]` }),
      h("span", { class: "at muted", text: when(m.at) }), h("div", { class: "text", text: m.text })));
  }
  return box;
}

function scriptResults(j) {
  const box = h("section", { class: "scripts" }, h("h3", {}, "Script results"));
  if (!j.script_results || !j.script_results.length) {
    box.append(h("p", { class: "empty", text: "No script has run yet." }));
    return box;
  }
  for (const r of [...j.script_results].reverse()) {
    box.append(h("details", { class: `script ${r.error ? "failed" : "ok"}`, open: r === j.script_results[j.script_results.length - 1] },
      h("summary", {}, `step ${r.step} · ${r.error ? "error" : "ok"} · ${when(r.timestamp)}`),
      h("pre", { class: "script-code", text: visibleCode(r.script) }),
      r.error ? h("pre", { class: "script-error", text: r.error }) : h("pre", { class: "script-result", text: json(r.result) }),
      r.output ? h("pre", { class: "script-output", text: r.output }) : null));
  }
  return box;
}

function rounds(j) {
  const box = h("section", { class: "rounds" }, h("h3", {}, `Rounds (${j.rounds.length})`));
  if (!j.rounds.length) box.append(h("p", { class: "empty", text: "No round yet." }));
  for (const r of [...j.rounds].reverse()) {
    box.append(h("div", { class: "round", "data-round": r.iteration },
      h("h4", { text: `Round ${r.iteration}` }),
      r.notes.map((n) => h("p", { class: `note note-${n.kind}` }, h("strong", { text: `${n.kind}: ` }), n.text)),
      r.jobs.length ? h("table", { class: "jobs" },
        h("thead", {}, h("tr", {}, ["job", "kind", "params", "outcome"].map((c) => h("th", { text: c })))),
        h("tbody", {}, r.jobs.map((job) => h("tr", { class: job.ok ? "ok" : "failed" },
          h("td", { text: job.job }), h("td", { text: job.kind }), h("td", {}, h("code", { text: json(job.params, 0) })),
          h("td", {}, h("pre", { text: job.ok ? (typeof job.result === "string" ? job.result : json(job.result)) : `error: ${job.error}` }))))))
        : h("p", { class: "muted small", text: r.iteration === j.rounds.length && j.status === "done" ? "no jobs: the mission completed" : "no jobs this round" })));
  }
  return box;
}

function controls(j) {
  const err = h("div");
  const box = h("section", { class: "controls" });
  if (j.can.retry) { // a failed step runs again from its checkpoint; side effects it made are not repeated
    box.append(h("button", { type: "button", class: "primary", onclick: () => act(j.id, "retry", undefined, err) }, "Retry the step"));
  }
  if (j.can.policy) {
    const select = h("select", { id: "jorb-policy" }, (form ? form.policies : ["llm", "human"]).map((p) => h("option", { value: p, selected: p === j.policy }, p)));
    box.append(h("label", { for: "jorb-policy" }, "Policy "), select,
      h("button", { type: "button", onclick: () => act(j.id, "policy", { policy: select.value }, err) }, "Swap policy"));
  }
  if (j.can.cancel) {
    const really = h("button", { type: "button", class: "danger", hidden: true, onclick: () => act(j.id, "cancel", undefined, err) }, "Yes, cancel it");
    box.append(h("button", { type: "button", class: "danger", onclick: (e) => { e.target.hidden = true; really.hidden = false; } }, "Cancel jorb"), really);
  }
  box.append(err);
  return box;
}

// POST an action; the answer is the jorb, shown at once and polled while it works. True when accepted.
async function act(id, what, body, errEl) {
  try {
    const j = await api(`/api/jorbs/${encodeURIComponent(id)}/${what}`, { method: "POST", body });
    if (current === id) {
      jorbLoads += 1; // a load asked for before this answer is older than it
      render(j);
      schedule({ ...j, working: true }); // the run was just handed to the background: look again shortly
    }
    loadList();
    return true;
  } catch (err) {
    const target = errEl || detailEl;
    if (target === detailEl) detailEl.prepend(problem(err.message));
    else clear(target).append(problem(err.message));
    return false;
  }
}

// -- creating ---------------------------------------------------------------------------------------------
async function showForm() {
  clearTimeout(timer);
  // Already shown (the route fired twice): rebuilding it would throw away what the user has typed.
  if (detailEl.querySelector(".new-jorb")) return;
  if (!form) {
    try {
      form = await api("/api/jorbs/form");
    } catch (err) {
      clear(detailEl).append(problem(err.message));
      return;
    }
  }
  const err = h("div");
  const modeJorb = h("input", { type: "radio", name: "jorb-mode", id: "mode-jorb", value: "script", checked: true });
  const modeMission = h("input", { type: "radio", name: "jorb-mode", id: "mode-mission", value: "mission" });
  const name = h("input", { type: "text", id: "new-name", placeholder: "e.g. Book Paris hotel via Magic" });
  const plan = h("textarea", { id: "new-plan", rows: 5, placeholder: "who to contact, what to find out, when to stop, what needs your approval" });
  const contacts = h("input", { type: "text", id: "new-contacts", placeholder: "@magicapp, alice@example.com, +1 415 555 0100" });
  const workspace = h("input", { type: "text", id: "new-workspace", placeholder: "/home/you/project" });
  const policy = h("select", { id: "new-policy" }, form.policies.map((p) => h("option", { value: p }, p)));
  const allow = h("input", { type: "text", id: "new-allow", placeholder: "optional: e.g. messages_send, time_now (empty: every capability)" });
  const overrides = h("div", { class: "overrides" });
  const approveBox = h("input", { type: "checkbox", id: "new-approve" });
  approveBox.addEventListener("change", () => clear(err));
  const grant = h("p", { class: "grant" });
  const approveRow = h("div", { class: "approve-overrides", hidden: true }, grant,
    h("label", { for: "new-approve", class: "inline" }, approveBox, " I approve these autonomy overrides"));
  const jorbOnly = h("div", {}, h("label", { for: "new-contacts" }, "Contacts (comma separated)"), contacts);
  const missionOnly = h("div", { hidden: true }, h("label", { for: "new-workspace" }, "Workspace folder (for its file jobs)"), workspace);

  const collect = () => {
    const out = {};
    for (const row of overrides.querySelectorAll(".override")) {
      const [effect, mode] = row.querySelectorAll("select");
      out[effect.value] = mode.value;
    }
    return out;
  };
  const refreshGrant = () => {
    const granted = Object.entries(collect());
    approveRow.hidden = !granted.length;
    approveBox.checked = false;
    grant.textContent = granted.length ? `This ${modeMission.checked ? "mission" : "jorb"} may act without asking for: ${granted.map(([k, v]) => `${k}=${v}`).join(", ")} (its own calls only). Approve this explicitly.` : "";
  };
  const addOverride = () => {
    const effect = h("select", { "aria-label": "Side effect" }, form.effects.map((e) => h("option", { value: e.name, title: e.description }, `${e.name} (now ${e.mode})`)));
    const mode = h("select", { "aria-label": "Mode" }, ["auto", "confirm", "deny"].map((m) => h("option", { value: m }, m)));
    const row = h("div", { class: "override" }, effect, mode,
      h("button", { type: "button", "aria-label": "Remove override", onclick: () => { row.remove(); refreshGrant(); } }, "×"));
    effect.addEventListener("change", refreshGrant);
    mode.addEventListener("change", refreshGrant);
    overrides.append(row);
    refreshGrant();
  };
  const switchMode = () => {
    jorbOnly.hidden = modeMission.checked;
    missionOnly.hidden = !modeMission.checked;
    plan.placeholder = modeMission.checked ? "the goal, e.g. document every module of the project in docs/" : "who to contact, what to find out, when to stop, what needs your approval";
    refreshGrant();
  };
  modeJorb.addEventListener("change", switchMode);
  modeMission.addEventListener("change", switchMode);

  const submit = async (ev) => {
    ev.preventDefault();
    const autonomy = collect();
    if (Object.keys(autonomy).length && !approveBox.checked) {
      clear(err).append(problem("Tick “I approve these autonomy overrides”, or remove them: they let this task act without asking you."));
      return;
    }
    const body = {
      mode: modeMission.checked ? "mission" : "script", name: name.value.trim(), plan: plan.value.trim(), policy: policy.value,
      contacts: modeMission.checked ? [] : contacts.value.split(",").map((c) => c.trim()).filter(Boolean),
      workspace: modeMission.checked ? workspace.value.trim() || null : null,
      allow: allow.value.trim() ? allow.value.split(",").map((c) => c.trim()).filter(Boolean) : null,
      autonomy, approve_autonomy: approveBox.checked,
    };
    try {
      const j = await api("/api/jorbs", { method: "POST", body });
      ui.navigate("jorbs", j.id);
    } catch (e) {
      clear(err).append(problem(e.message));
    }
  };
  clear(detailEl).append(h("form", { class: "new-jorb", onsubmit: submit },
    h("h2", {}, "New jorb or mission"),
    h("fieldset", { class: "modes" }, h("legend", {}, "Kind"),
      h("label", { for: "mode-jorb", class: "inline" }, modeJorb, " Jorb (talks to people, waits for replies)"),
      h("label", { for: "mode-mission", class: "inline" }, modeMission, " Mission (rounds of up to 5 jobs toward a goal)")),
    h("label", { for: "new-name" }, "Name"), name,
    h("label", { for: "new-plan" }, "Plan or goal"), plan,
    jorbOnly, missionOnly,
    h("label", { for: "new-policy" }, "Policy (who decides each step)"), policy,
    h("details", {}, h("summary", {}, "Restrict its capabilities"), h("label", { for: "new-allow" }, "Allowed capabilities"), allow),
    h("h3", {}, "Autonomy overrides"),
    h("p", { class: "muted small", text: "By default this task asks you like the chat does (autonomy.effects in the config). An override applies to its own calls only." }),
    overrides, h("button", { type: "button", onclick: addOverride }, "Add override"),
    approveRow, err,
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Create"))));
  name.focus();
}
