// Memory: what Jarvis remembers about the user (orchestrator/memory). Entities on the left (by kind), their facts
// on the right with where each came from; search every fact; add, edit and forget. Facts drawn from outside content
// are marked: the user approved storing them, they were never the user's words.
import { api } from "../api.js";
import { clear, h, problem, when } from "../dom.js";

let listEl;
let detailEl;
let proposalsEl;
let kindEl;
let searchEl;
let kinds = [];

export function mount(el) {
  kindEl = h("select", { id: "memory-kind", "aria-label": "Kind" }, h("option", { value: "" }, "every kind"));
  kindEl.addEventListener("change", () => loadEntities());
  searchEl = h("input", { type: "search", id: "memory-search", placeholder: "Search facts", "aria-label": "Search facts" });
  const form = h("form", { class: "inline", onsubmit: (ev) => { ev.preventDefault(); search(); } }, searchEl,
    h("button", { type: "submit" }, "Search"));
  listEl = h("div", { class: "memory-list" });
  proposalsEl = h("div", { class: "memory-proposals-box" });
  detailEl = h("div", { class: "memory-detail" });
  el.append(h("div", { class: "view-head" }, h("h1", {}, "Memory"), kindEl, form,
    h("button", { type: "button", onclick: () => show() }, "Refresh")),
  proposalsEl, h("div", { class: "split" }, listEl, detailEl));
}

export async function show() {
  await loadProposals();
  await loadEntities();
  await showFacts("Latest facts", "/api/memory/facts?limit=50");
}

// Facts proposed from finished conversations: nothing is remembered until the user says yes.
async function loadProposals() {
  let rows;
  try {
    rows = await api("/api/memory/proposals");
  } catch (err) {
    clear(proposalsEl).append(problem(err.message));
    return;
  }
  clear(proposalsEl);
  if (!rows.length) return;
  proposalsEl.append(h("h2", { text: "Remember these?" }), h("ul", { class: "memory-proposals" }, rows.map((p) => {
    const err = h("div");
    const act = async (what) => {
      try {
        await api(`/api/memory/proposals/${p.id}/${what}`, { method: "POST" });
        await show();
      } catch (ex) { clear(err).append(problem(ex.message)); }
    };
    return h("li", { "data-proposal": p.id }, h("span", { text: p.about ? `${p.about}: ${p.fact}` : p.fact }),
      h("button", { type: "button", onclick: () => act("accept") }, "Remember"),
      h("button", { type: "button", class: "danger", onclick: () => act("reject") }, "Drop"), err);
  })));
}

async function loadEntities() {
  let data;
  try {
    data = await api(`/api/memory${kindEl.value ? `?kind=${encodeURIComponent(kindEl.value)}` : ""}`);
  } catch (err) {
    clear(listEl).append(problem(err.message));
    return;
  }
  if (!kinds.length) {
    kinds = data.kinds;
    for (const k of kinds) kindEl.append(h("option", { value: k }, k));
  }
  clear(listEl);
  const { entities, facts, relations } = data.stats;
  if (!data.entities.length) {
    // Facts not about a named person or thing have no entity: "nothing remembered" would contradict the list.
    listEl.append(h("p", { class: "empty", text: facts
      ? `${count(facts, "fact")} remembered, none about a named person or thing yet: they are listed with the latest facts.`
      : "Nothing remembered yet. Tell Jarvis \"remember that ...\" in a chat, or add a fact on the right." }));
    return;
  }
  listEl.append(h("p", { class: "muted small",
    text: `${count(entities, "entity", "entities")}, ${count(facts, "fact")}, ${count(relations, "relation")}` }));
  listEl.append(h("ul", { class: "memory-entities" }, data.entities.map((e) => h("li", { "data-entity": e.id },
    h("button", { type: "button", class: "link", onclick: () => openEntity(e.id) }, e.name),
    h("span", { class: "muted small", text: ` ${e.kind} · ${e.facts} fact(s)` })))));
}

function count(n, one, many = `${one}s`) {
  return `${n} ${n === 1 ? one : many}`;
}

async function search() {
  const q = searchEl.value.trim();
  await showFacts(q ? `Facts matching "${q}"` : "Latest facts", q ? `/api/memory/facts?q=${encodeURIComponent(q)}` : "/api/memory/facts?limit=50");
}

async function showFacts(title, path) {
  let facts;
  try {
    facts = await api(path);
  } catch (err) {
    clear(detailEl).append(problem(err.message));
    return;
  }
  clear(detailEl).append(h("h2", { text: title }), factTable(facts), addForm());
}

async function openEntity(id) {
  let e;
  try {
    e = await api(`/api/memory/entities/${id}`);
  } catch (err) {
    clear(detailEl).append(problem(err.message));
    return;
  }
  const err = h("div");
  const forgetAll = async () => {
    if (!window.confirm(`Forget ${e.name} and every fact about them?`)) return;
    try {
      await api(`/api/memory/entities/${id}`, { method: "DELETE" });
      await show();
    } catch (ex) { clear(err).append(problem(ex.message)); }
  };
  // through h(): it leaves out the parts that are null (append itself would write "null")
  clear(detailEl).append(h("div", {}, h("h2", { text: `${e.name} (${e.kind})` }),
    e.link ? h("p", { class: "muted small", text: `linked to ${e.link}` }) : null,
    factTable(e.facts, () => openEntity(id)),
    e.relations.length ? h("ul", { class: "memory-relations" }, e.relations.map((r) =>
      h("li", { text: `${r.subject} ${r.predicate} ${r.object}${r.trusted ? "" : " (from outside content)"}` }))) : null,
    h("button", { type: "button", class: "danger", onclick: forgetAll }, `Forget ${e.name}`), err,
    addForm(e.name, e.kind)));
}

function factTable(facts, reload = search) {
  if (!facts.length) return h("p", { class: "empty", text: "No facts." });
  const tbody = h("tbody");
  for (const f of facts) {
    const err = h("div");
    const text = h("span", { text: f.text });
    const edit = async () => {
      const changed = window.prompt("Correct the fact:", f.text);
      if (changed === null || changed.trim() === f.text) return;
      try {
        await api(`/api/memory/facts/${f.id}`, { method: "PATCH", body: { fact: changed } });
        await reload();
      } catch (ex) { clear(err).append(problem(ex.message)); }
    };
    const forget = async () => {
      try {
        await api(`/api/memory/facts/${f.id}`, { method: "DELETE" });
        await reload();
        await loadEntities();
      } catch (ex) { clear(err).append(problem(ex.message)); }
    };
    tbody.append(h("tr", { class: f.trusted ? "fact" : "fact untrusted", "data-fact": f.id },
      h("td", {}, text, f.entity ? h("div", { class: "muted small", text: `${f.entity} (${f.entity_kind})` }) : null),
      h("td", {}, h("div", { class: "small", text: f.source }),
        f.trusted ? null : h("span", { class: "badge status-failed", text: "from outside content" }),
        !f.trusted && f.source_detail ? h("div", { class: "muted small fact-read", text: f.source_detail }) : null,
        f.expires_at ? h("div", { class: "muted small", text: `expires ${when(f.expires_at)}` }) : null),
      h("td", {}, h("button", { type: "button", onclick: edit }, "Edit"),
        h("button", { type: "button", class: "danger", onclick: forget }, "Forget"), err)));
  }
  return h("table", { class: "memory-facts" },
    h("thead", {}, h("tr", {}, ["fact", "where it came from", ""].map((c) => h("th", { text: c })))), tbody);
}

function addForm(about = "", kind = "person") {
  const err = h("div");
  const fact = h("input", { type: "text", id: "memory-new-fact", placeholder: "e.g. My dentist is Dr Lee" });
  const aboutEl = h("input", { type: "text", id: "memory-new-about", value: about, placeholder: "about (optional)" });
  const kindSel = h("select", { id: "memory-new-kind", "aria-label": "Kind" },
    kinds.map((k) => h("option", { value: k, selected: k === kind }, k)));
  const submit = async (ev) => {
    ev.preventDefault();
    try {
      await api("/api/memory/facts", { method: "POST", body: { fact: fact.value, about: aboutEl.value || null, kind: aboutEl.value ? kindSel.value : null } });
      fact.value = "";
      await show();
    } catch (ex) { clear(err).append(problem(ex.message)); }
  };
  return h("form", { class: "memory-add", onsubmit: submit }, h("h3", { text: "Remember" }),
    h("label", { for: "memory-new-fact", text: "Fact" }), fact,
    h("label", { for: "memory-new-about", text: "About" }), aboutEl, kindSel,
    h("button", { type: "submit" }, "Remember"), err);
}
