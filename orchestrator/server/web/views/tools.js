// Tools: every tool the planner can call now (static, MCP, generated), with whatever metadata it carries, and a
// switch to disable or enable each.
import { api } from "../api.js";
import { clear, h, json, problem } from "../dom.js";

let body;
let filter;
let data = { tools: [], provider_errors: {} };
// A list fetched before a switch was flipped, or while a flip is still on its way to the server, is stale: it
// would show the tool as it was (and a second click on that would ask for what is already done). Count the flips
// started and those in flight: a load that saw either is dropped and made again once no flip is in flight. Count
// the loads so only the newest one renders.
let flips = 0;
let inFlight = 0;
let loadAfterFlips = false;
let loads = 0;

export function mount(el) {
  filter = h("input", { type: "search", placeholder: "Filter by name, source or side effect", "aria-label": "Filter tools" });
  filter.addEventListener("input", render);
  body = h("div", { class: "tool-list" });
  el.append(h("div", { class: "view-head" }, h("h1", {}, "Tools"), filter,
    h("button", { type: "button", onclick: load }, "Refresh")), body);
}

export async function show() {
  await load();
}

async function load() {
  const mine = ++loads;
  const flipsBefore = flips;
  let fresh;
  try {
    fresh = await api("/api/tools");
  } catch (err) {
    if (mine === loads) clear(body).append(problem(err.message));
    return;
  }
  if (mine !== loads) return;
  if (inFlight) {
    loadAfterFlips = true;
    return;
  }
  if (flips !== flipsBefore) return load();
  data = fresh;
  render();
}

const SPECIAL = ["version", "trust", "trusted", "test_report", "tests_passed", "calls", "server", "path", "sha256"];

function metaBlock(meta) {
  const items = [];
  for (const key of ["version", "trust", "trusted", "server"]) {
    if (meta[key] !== undefined && meta[key] !== null) items.push(h("span", { class: `badge meta-${key}`, text: `${key}: ${typeof meta[key] === "object" ? json(meta[key], 0) : meta[key]}` }));
  }
  const rest = Object.entries(meta).filter(([k]) => !["version", "trust", "trusted", "server", "test_report"].includes(k));
  return [
    items.length ? h("div", { class: "meta-badges" }, items) : null,
    meta.test_report !== undefined && meta.test_report !== null
      ? h("details", { class: "test-report" }, h("summary", {}, "test report"),
        h("pre", { text: typeof meta.test_report === "string" ? meta.test_report : json(meta.test_report) }))
      : null,
    rest.length ? h("dl", { class: "meta" }, rest.flatMap(([k, v]) => [h("dt", { text: k }), h("dd", { text: typeof v === "string" ? v : json(v, 0) })])) : null,
  ];
}

// The switch: a disabled tool is not given to the planner or to jorb scripts; a call to it is refused.
function toggle(t) {
  const id = `tool-enabled-${t.name}`;
  const box = h("input", { type: "checkbox", id, checked: t.enabled, "aria-label": `${t.name} enabled` });
  const err = h("span");
  const hint = h("span", { class: "muted small", hidden: t.enabled, text: " off: Jarvis and its jorbs no longer get this tool" });
  box.addEventListener("change", async () => {
    box.disabled = true;
    flips += 1;
    inFlight += 1;
    try {
      await api(`/api/tools/${encodeURIComponent(t.name)}/${box.checked ? "enable" : "disable"}`, { method: "POST" });
      // A load rendered the list again while the switch was on its way: this switch is gone, show the new state.
      if (!box.isConnected) return load();
      t.enabled = box.checked;
      clear(err);
      box.closest("article").classList.toggle("disabled", !t.enabled);
      hint.hidden = t.enabled;
    } catch (e) {
      box.checked = !box.checked;
      if (box.isConnected) clear(err).append(problem(e.message));
      else body.prepend(problem(`${t.name}: ${e.message}`));
    } finally {
      box.disabled = false;
      inFlight -= 1;
      if (!inFlight && loadAfterFlips) {
        loadAfterFlips = false;
        load();
      }
    }
  });
  return h("div", { class: "switch" }, box, h("label", { for: id }, "Enabled"), hint, err);
}

function render() {
  clear(body);
  for (const gone of data.disabled_absent || []) {
    body.append(h("div", { class: "problem" }, h("p", { text: `${gone.name} is disabled, and no provider offers it right now.` }),
      h("button", { type: "button", onclick: async (ev) => {
        try {
          await api(`/api/tools/${encodeURIComponent(gone.name)}/enable`, { method: "POST" });
          load();
        } catch (e) {
          ev.target.closest(".problem").append(problem(e.message));
        }
      } }, `Enable ${gone.name} again`)));
  }
  // An MCP tool that says something else than when it was first seen is withheld until the user has read both.
  for (const c of data.mcp_changed || []) {
    const err = h("span");
    body.append(h("section", { class: "problem mcp-changed", "data-tool": c.tool },
      h("p", {}, h("strong", { text: c.added ? `${c.tool} (MCP server ${c.server}) is new since the server's first listing. `
        : `${c.tool} (MCP server ${c.server}) changed what it says. ` }),
        "Jarvis does not offer it until you accept the new text: a tool's description is what the model reads as instructions."),
      h("p", { class: "small" }, h("strong", { text: "First seen: " }), c.before),
      h("p", { class: "small" }, h("strong", { text: "Now: " }), c.now),
      (c.also_changed || []).length
        ? h("p", { class: "small", text: `Its ${c.also_changed.join(", ")} changed too (jarvis mcp review shows both).` })
        : null,
      h("button", { type: "button", onclick: async () => {
        try {
          await api(`/api/mcp/${encodeURIComponent(c.server)}/accept`, { method: "POST", body: { tools: { [c.tool]: c.digest } } });
          load();
        } catch (e) {
          clear(err).append(problem(e.message));
        }
      } }, `Accept ${c.tool} as it is now`), err));
  }
  for (const [provider, error] of Object.entries(data.provider_errors || {})) {
    body.append(problem(`Tool provider ${provider} failed: ${error}. Its tools are missing until it works again (see Settings).`));
  }
  const q = filter.value.trim().toLowerCase();
  const tools = data.tools.filter((t) => !q || [t.name, t.source, t.provider, ...t.side_effects.map((e) => e.name)].join(" ").toLowerCase().includes(q));
  if (!tools.length) body.append(h("p", { class: "empty", text: q ? "No tool matches." : "No tools." }));
  for (const t of tools) {
    const props = (t.args_schema && t.args_schema.properties) || {};
    const required = new Set((t.args_schema && t.args_schema.required) || []);
    body.append(h("article", { class: `tool source-${t.source}${t.enabled === false ? " disabled" : ""}`, "data-tool": t.name, "data-source": t.source },
      h("header", {},
        h("h2", { text: t.name }),
        h("span", { class: `badge source ${t.source}`, text: t.source }),
        t.untrusted_output ? h("span", { class: "badge untrusted", title: "its results come from outside the conversation: later side effects in the turn ask first", text: "reads outside content" }) : null,
        t.side_effects.length
          ? t.side_effects.map((e) => h("span", { class: `badge effect mode-${e.mode}`, title: e.description, text: `${e.name}: ${e.mode}` }))
          : h("span", { class: "badge readonly", text: "read-only" }),
        t.unavailable ? h("span", { class: "badge down", text: "not connected" }) : null),
      h("p", { class: "description", text: t.description }),
      t.unavailable ? h("p", { class: "unavailable", text: `${t.unavailable}. Not offered to the model until then.` }) : null,
      t.can_disable ? toggle(t) : null,
      ...metaBlock(t.metadata || {}),
      Object.keys(props).length
        ? h("details", {}, h("summary", {}, `arguments (${Object.keys(props).length})`),
          h("ul", { class: "args" }, Object.entries(props).map(([name, p]) => h("li", {},
            h("code", { text: name }), required.has(name) ? " (required)" : "", p.type ? ` ${p.type}` : "",
            p.description ? ` — ${p.description}` : ""))))
        : null));
  }
}
