// Runs: each run of the graph with its node timeline, model calls and tool calls (orchestrator/telemetry.py).
import { api } from "../api.js";
import { clear, h, json, ms, problem, when } from "../dom.js";

let ui;
let listEl;
let detailEl;

export function mount(el, shell) {
  ui = shell;
  listEl = h("div", { class: "run-list" });
  detailEl = h("div", { class: "run-detail" });
  el.append(h("div", { class: "view-head" }, h("h1", {}, "Runs"), h("button", { type: "button", onclick: () => show() }, "Refresh")),
    h("div", { class: "runs-split" }, listEl, detailEl));
}

export async function show(runId) {
  await loadList(runId);
  if (runId) await loadRun(runId);
}

async function loadList(selected) {
  let runs;
  try {
    runs = await api("/api/runs?limit=100");
  } catch (err) {
    clear(listEl).append(problem(err.message));
    return;
  }
  clear(listEl);
  if (!runs.length) {
    listEl.append(h("p", { class: "empty", text: "No runs yet: every chat turn and every resume is recorded here." }));
    return;
  }
  const table = h("table", { class: "runs" },
    h("thead", {}, h("tr", {}, ["started", "status", "duration", "tokens in/out", "tools", "thread"].map((c) => h("th", { text: c })))));
  const tbody = h("tbody");
  for (const r of runs) {
    tbody.append(h("tr", { class: `${r.status}${r.id === selected ? " selected" : ""}` },
      h("td", {}, h("a", { href: `#runs/${r.id}`, text: when(r.started_at) })),
      h("td", {}, h("span", { class: `badge ${badge(r)}`, text: r.outcome })),
      h("td", { text: ms(r.duration_ms) }),
      h("td", { text: tokens(r) }),
      h("td", { text: r.tool_errors ? `${r.tool_calls} (${r.tool_errors} failed)` : String(r.tool_calls) }),
      h("td", {}, threadCell(r))));
  }
  table.append(tbody);
  listEl.append(table);
}

// A run that finished with failed tool calls is not shown as "ok" (the server words it: telemetry.outcome_text).
function badge(r) {
  return r.status === "ok" && r.tool_errors ? "status-partial" : `status-${r.status}`;
}

// A jorb's run links to the jorb: its thread is not a conversation (the chat API refuses it).
function threadCell(r) {
  const text = r.thread_title || r.thread_id || "";
  if (r.jorb_id) return ui.has("jorbs") ? h("a", { href: `#jorbs/${encodeURIComponent(r.jorb_id)}`, title: r.thread_id, text }) : text;
  return r.thread_id && ui.has("chat") ? h("a", { href: `#chat/${encodeURIComponent(r.thread_id)}`, title: r.thread_id, text }) : text;
}

// in/out; a server that reports no usage (llama-cpp-python's, some others) makes the figures a floor, or unknown.
function tokens(run) {
  const unreported = run.unreported_calls || 0;
  if (unreported && unreported >= run.model_calls) return "unknown (not reported by the model server)";
  const shown = `${run.prompt_tokens}/${run.completion_tokens}`;
  return unreported ? `${shown} + ${unreported} call(s) not counted` : shown;
}

async function loadRun(runId) {
  let run;
  try {
    run = await api(`/api/runs/${encodeURIComponent(runId)}`);
  } catch (err) {
    clear(detailEl).append(problem(err.message));
    return;
  }
  clear(detailEl);
  const total = Math.max(run.duration_ms, 1);
  detailEl.append(
    h("h2", { text: `Run ${run.id.slice(0, 8)}` }),
    h("p", {}, `${run.outcome}, ${ms(run.duration_ms)}, ${run.model_calls} model call(s) (${ms(run.model_ms)}), tokens ${tokens(run)}`),
    run.error ? problem(run.error) : "",
    // Recorded as each step ends; shown in the order they started.
    h("ol", { class: "timeline" }, [...run.events].sort((x, y) => x.offset_ms - y.offset_ms).map((e) => h("li", { class: `event ${e.kind} ${e.ok ? "ok" : "failed"}` },
      h("span", { class: "ev-kind", text: e.kind }),
      h("span", { class: "ev-name", text: e.name }),
      h("span", { class: "bar-wrap" }, bar(e.offset_ms / total, e.duration_ms / total)),
      h("span", { class: "ev-time", text: `+${ms(e.offset_ms)} · ${ms(e.duration_ms)}` }),
      e.detail !== null && e.detail !== undefined ? h("span", { class: "ev-detail", text: typeof e.detail === "string" ? e.detail : json(e.detail, 0) }) : null))),
  );
}

// Set through the CSSOM: the page's CSP allows no inline style attributes.
function bar(start, length) {
  const el = h("span", { class: "bar" });
  el.style.marginLeft = `${(100 * start).toFixed(2)}%`;
  el.style.width = `${Math.max(0.5, 100 * length).toFixed(2)}%`;
  return el;
}
