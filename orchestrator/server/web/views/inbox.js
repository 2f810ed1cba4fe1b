// Inbox: messages no jorb claimed (unmatched, ambiguous, low confidence, spam) with the switchboard's reasoning:
// assign one to a jorb, or start a new jorb from it. Below, what jorbs sent on the `local` channel: answer as the
// counterpart (POST /api/inbound, routed like any message from the world).
import { api } from "../api.js";
import { clear, h, problem, when } from "../dom.js";

let ui;
let inboxEl;
let localEl;
let data = { messages: [], local: [], jorbs: [] };

const LABEL = { unmatched: "no jorb", ambiguous: "ambiguous", low_confidence: "low confidence", spam: "spam" };

export function mount(el, shell) {
  ui = shell;
  inboxEl = h("div", { class: "inbox-list" });
  localEl = h("div", { class: "local-list" });
  el.append(
    h("div", { class: "view-head" }, h("h1", {}, "Inbox"), h("button", { type: "button", onclick: () => show() }, "Refresh")),
    h("section", { "aria-label": "Unclaimed messages" }, h("h2", {}, "Messages no jorb claimed"), inboxEl),
    h("section", { "aria-label": "Local channel" }, h("h2", {}, "Sent on the local channel"),
      h("p", { class: "muted small", text: "Messages jorbs sent on the local channel stay on this machine: answer them here as the person they were sent to." }),
      localEl));
}

export async function show() {
  try {
    data = await api("/api/inbox");
  } catch (err) {
    clear(inboxEl).append(problem(err.message));
    clear(localEl);
    return;
  }
  renderInbox();
  renderLocal();
}

function renderInbox() {
  clear(inboxEl);
  if (!data.messages.length) {
    inboxEl.append(h("p", { class: "empty", text: "Nothing waiting: every message found its jorb." }));
    return;
  }
  for (const m of data.messages) inboxEl.append(messageCard(m));
}

function messageCard(m) {
  const err = h("div");
  const card = h("article", { class: `inbox-msg status-${m.status}`, "data-message": m.id },
    h("header", {}, h("strong", { text: m.is_user ? `you (${m.party})` : m.party }), h("span", { class: "muted", text: ` on ${m.channel} · ${when(m.created_at)}` }),
      h("span", { class: `badge inbox-${m.status}`, text: LABEL[m.status] || m.status })),
    h("p", { class: "text", text: m.text }),
    m.reasoning ? h("p", { class: "reasoning muted small" }, h("strong", { text: "Why: " }), m.reasoning) : null);
  const selectId = `assign-${m.id}`;
  if (data.jorbs.length) {
    const select = h("select", { id: selectId }, data.jorbs.map((j) => h("option", { value: j.id }, `${j.name} (${j.status})`)));
    const suggested = (m.reasoning || "").match(/maybe jorb ([0-9a-f]+)/);
    if (suggested) select.value = suggested[1];
    card.append(h("div", { class: "row" }, h("label", { for: selectId }, "Assign to "), select,
      h("button", { type: "button", class: "primary", onclick: async () => {
        try {
          await api(`/api/inbox/${m.id}/assign`, { method: "POST", body: { jorb_id: select.value } });
          card.replaceWith(h("p", { class: "done-note", text: `Message #${m.id} given to ${select.selectedOptions[0].textContent}.` },
            " ", h("a", { href: `#jorbs/${select.value}` }, "Open the jorb")));
        } catch (e) {
          clear(err).append(problem(e.message));
        }
      } }, "Assign")));
  }
  const nameId = `newjorb-${m.id}`;
  const name = h("input", { type: "text", id: nameId, placeholder: `e.g. Answer ${m.party}` });
  card.append(h("div", { class: "row" }, h("label", { for: nameId }, "or start a new jorb named "), name,
    h("button", { type: "button", onclick: async () => {
      if (!name.value.trim()) {
        clear(err).append(problem("Give the new jorb a name."));
        return;
      }
      try {
        const j = await api(`/api/inbox/${m.id}/new-jorb`, { method: "POST", body: { name: name.value.trim() } });
        ui.navigate("jorbs", j.id);
      } catch (e) {
        clear(err).append(problem(e.message));
      }
    } }, "Start jorb")), err);
  return card;
}

function renderLocal() {
  clear(localEl);
  if (!data.local.length) {
    localEl.append(h("p", { class: "empty", text: "No jorb has sent anything on the local channel." }));
    return;
  }
  for (const m of data.local) {
    const err = h("div");
    const areaId = `answer-${m.id}`;
    const area = h("textarea", { id: areaId, rows: 2, placeholder: `what ${m.party} answers` });
    const card = h("article", { class: `local-msg${m.awaited ? " awaited" : ""}`, "data-message": m.id },
      h("header", {}, h("strong", { text: `to ${m.party}` }),
        m.jorb_id ? h("span", { class: "muted" }, " from ", h("a", { href: `#jorbs/${m.jorb_id}`, text: m.jorb_name || m.jorb_id }), m.jorb_status ? ` (${m.jorb_status})` : "") : null,
        h("span", { class: "muted", text: ` · ${when(m.created_at)}` }),
        m.awaited ? h("span", { class: "badge waiting", text: "awaits an answer" }) : null),
      h("p", { class: "text", text: m.text }),
      h("label", { for: areaId }, `Answer as ${m.party}`), area,
      h("div", { class: "actions" }, h("button", { type: "button", class: "primary", onclick: async () => {
        if (!area.value.trim()) return;
        try {
          const route = await api("/api/inbound", { method: "POST", body: { channel: "local", sender: m.party, text: area.value } });
          area.value = "";
          clear(err).append(h("p", { class: route.jorb_id ? "routed" : "muted", role: "status" },
            route.jorb_id ? "Delivered to " : "No jorb took it: ",
            route.jorb_id ? h("a", { href: `#jorbs/${route.jorb_id}`, text: `jorb ${route.jorb_id}` }) : "it is in the inbox above",
            ` (${route.reasoning}).`));
          if (!route.jorb_id) show();
        } catch (e) {
          clear(err).append(problem(e.message));
        }
      } }, "Send answer")), err);
    localEl.append(card);
  }
}
