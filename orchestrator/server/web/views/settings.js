// Settings: model endpoint health, the model picker (a local server found, another one, or the built-in model), MCP server health (and other HEALTH_CHECKS sections, each with its action button if it has one: Backups, Back up now), the mail, calendar and contacts accounts (web/accounts.js), the clients of Jarvis's own MCP server, background services, tool providers, the active configuration file.
import { api } from "../api.js";
import { clear, h, json, problem } from "../dom.js";
import { accountsSection, loadAccounts } from "../accounts.js";

let healthEl;
let pickEl;
let infoEl;
let clientsEl;
let shell;

export function mount(el, ui) {
  shell = ui;
  healthEl = h("div", { class: "health" });
  pickEl = h("section", { class: "model-pick", "aria-label": "Choose the model" });
  infoEl = h("div", { class: "settings-info" });
  clientsEl = h("section", { class: "mcp-clients", "aria-label": "MCP clients" });
  el.append(h("div", { class: "view-head" }, h("h1", {}, "Settings"),
    h("button", { type: "button", onclick: () => show() }, "Check again")), healthEl, pickEl, accountsSection(), clientsEl, infoEl);
}

export async function show() {
  await Promise.all([loadHealth(), loadPicker(), loadAccounts(), loadClients(), loadInfo()]);
}

// The agents that may call Jarvis as an MCP server, each with its own token: a new one's token is shown once, in
// the lines to paste into its mcpServers file; Revoke stops it at its next request.
// Loads overlap (the view's first load, then an add, then a revoke): only the latest one draws, so an answer that
// was asked for before a revoke never brings the revoked client back.
let clientsLoads = 0;

async function loadClients(shown) {
  const load = ++clientsLoads;
  let found;
  try {
    found = await api("/api/mcp/clients");
  } catch (err) {
    if (load === clientsLoads) clear(clientsEl).append(h("h2", {}, "MCP clients"), problem(err.message));
    return;
  }
  if (load !== clientsLoads) return;
  clear(clientsEl).append(h("h2", {}, "MCP clients"),
    h("p", { class: "muted", text: found.enabled ? `Other agents reach Jarvis at ${found.path} with their own token; every call follows your rules here.`
      : "Jarvis's MCP server is off: set mcp_server.enabled: true in the config to serve these clients." }));
  if (shown) {
    clientsEl.append(h("p", { text: `Paste this into ${shown.name}'s MCP settings; its token is not shown again:` }),
      h("pre", { class: "config", text: json(shown.config) }));
  }
  for (const c of found.clients) {
    const revoke = h("button", { type: "button" }, "Revoke");
    revoke.addEventListener("click", async () => {
      revoke.disabled = true;
      try {
        await api(`/api/mcp/clients/${encodeURIComponent(c.name)}`, { method: "DELETE" });
        loadClients();
      } catch (err) {
        clientsEl.append(problem(err.message));
        revoke.disabled = false;
      }
    });
    const last = c.last_call ? new Date(c.last_call * 1000).toLocaleString() : "never";
    clientsEl.append(h("div", { class: "mcp-client", "data-client": c.name }, h("strong", { text: c.name }),
      ` ${c.calls} calls, last ${last} `, revoke));
  }
  const name = h("input", { type: "text", required: true, pattern: "[a-z0-9][a-z0-9_\\-]{0,31}", placeholder: "claude", "aria-label": "Client name" });
  const add = h("button", { type: "submit" }, "Add a client");
  const form = h("form", { class: "add-client" }, name, add);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    add.disabled = true;
    try {
      loadClients(await api("/api/mcp/clients", { method: "POST", body: { name: name.value.trim() } }));
    } catch (err) {
      clientsEl.append(problem(err.message));
      add.disabled = false;
    }
  });
  clientsEl.append(form);
}

// The model picker: each local server found answering with its models, another server by URL, the built-in model.
// Jarvis checks the choice, writes it into the user's config.local.yml and switches its chat model at once.
async function loadPicker() {
  clear(pickEl).append(h("h2", {}, "Choose the model"), h("p", { class: "muted", text: "looking for local model servers…" }));
  let found;
  try {
    found = await api("/api/settings/models");
  } catch (err) {
    clear(pickEl).append(h("h2", {}, "Choose the model"), problem(err.message));
    return;
  }
  const status = h("div", { class: "pick-status", role: "status" });
  const now = h("p", { class: "muted now-model" });
  const showNow = (c) => { now.textContent = `Now: ${c.builtin ? `the built-in model ${c.model}` : `${c.model} at ${c.base_url}`}.`; };
  const use = async (body, button) => {
    button.disabled = true;
    clear(status).append(h("p", { class: "muted", text: "checking…" }));
    try {
      const done = await api("/api/settings/models/primary", { method: "POST", body });
      clear(status).append(h("p", { class: "ok", text: done.message }));
      showNow({ model: done.model, base_url: done.base_url, builtin: !done.base_url });
      loadHealth();
      if (shell) shell.modelChanged();
    } catch (err) {
      clear(status).append(problem(err.message));
    } finally {
      button.disabled = false;
    }
  };
  showNow(found.current);
  clear(pickEl).append(h("h2", {}, "Choose the model"), now);
  for (const srv of found.servers) {
    const select = h("select", { "aria-label": `${srv.name} model` }, srv.models.map((m) => h("option", { value: m, text: m })));
    const button = h("button", { type: "button" }, `Use ${srv.name}`);
    button.addEventListener("click", () => use({ base_url: srv.base_url, model: select.value || null }, button));
    pickEl.append(h("div", { class: "found-server", "data-server": srv.name },
      h("strong", { text: srv.name }), ` at ${srv.base_url} `, srv.models.length ? select : "(no model listed) ", button));
  }
  if (!found.servers.length) {
    pickEl.append(h("p", { class: "muted no-servers", text: "No model server answers on the usual local ports (Jan 1337, Ollama 11434, LM Studio 1234, llama.cpp 8080, vLLM 8000)." }));
  }
  const url = h("input", { type: "url", required: true, placeholder: "http://localhost:11434/v1", "aria-label": "Server URL" });
  const model = h("input", { type: "text", placeholder: "model (empty: its only one)", "aria-label": "Model name" });
  const check = h("button", { type: "submit" }, "Check and use");
  const form = h("form", { class: "other-server" }, h("span", { text: "Another server: " }), url, model, check);
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    use({ base_url: url.value, model: model.value.trim() || null }, check);
  });
  pickEl.append(form);
  if (found.builtin) {
    const builtin = h("button", { type: "button" }, "Use the built-in demo model");
    builtin.addEventListener("click", () => use({ builtin: true }, builtin));
    pickEl.append(h("p", {}, builtin, h("span", { class: "muted", text: ` ${found.builtin_model} run by Jarvis itself, for trying Jarvis out.` })));
  }
  pickEl.append(status);
}

async function loadHealth() {
  clear(healthEl).append(h("h2", {}, "Model endpoints"), h("p", { class: "muted", text: "checking…" }));
  let health;
  try {
    health = await api("/api/settings/health");
  } catch (err) {
    clear(healthEl).append(problem(err.message));
    return;
  }
  clear(healthEl).append(h("h2", {}, "Model endpoints"));
  for (const m of health.models) {
    const tools = h("div", { class: "tool-calling", role: "status" });
    if (m.tools) showTools(tools, m.tools);
    const probe = m.ok && !m.builtin ? h("button", { type: "button", onclick: () => checkTools(m.role, tools, probe) },
      "Check tool calling") : null;
    healthEl.append(h("div", { class: `endpoint ${m.ok ? "ok" : "down"}`, "data-role": m.role },
      h("span", { class: `badge ${m.ok ? "ok" : "down"}`, text: m.ok ? "answers" : "down" }),
      h("strong", { text: ` ${m.role}` }), m.builtin ? ` ${m.model}, run by Jarvis itself (built-in)` : ` ${m.model} at ${m.base_url} `,
      probe, m.notice ? h("p", { class: "notice", text: m.notice }) : null, tools,
      m.ok ? null : problem(`${m.message} ${m.fix || ""}`)));
  }
  for (const section of health.sections || []) {
    const sectionEl = h("section", { class: "health-section", "aria-label": section.title }, h("h2", { text: section.title }));
    healthEl.append(sectionEl);
    if (section.note) sectionEl.append(h("p", { class: "muted", text: section.note }));
    if (section.action) sectionEl.append(actionButton(section.action));
    for (const item of section.items || []) {
      // ok: true healthy, false unhealthy (with what to do), null neither (switched off, not started yet)
      const cls = item.ok === true ? "ok" : item.ok === false ? "down" : "neutral";
      const label = item.state || (item.ok ? "healthy" : "unhealthy");
      sectionEl.append(h("div", { class: `endpoint ${cls}`, "data-item": item.name },
        h("span", { class: `badge ${cls}`, text: label }),
        h("strong", { text: ` ${item.name}` }), item.ok !== false && item.message ? ` ${item.message}` : "",
        item.ok === false ? problem(`${item.message || ""} ${item.fix || ""}`) : null));
    }
  }
}

// A section's one action (e.g. Backups: "Back up now"): POSTed, the button busy until it answers, then the
// health shown again with its outcome.
function actionButton(action) {
  const button = h("button", { type: "button", class: "section-action" }, action.label);
  button.onclick = async () => {
    button.disabled = true;
    button.textContent = `${action.label}…`;
    try {
      await api(action.post, { method: "POST" });
    } catch (err) {
      button.replaceWith(problem(err.message));
      return;
    }
    await loadHealth();
  };
  return button;
}

// One probe with one tool (llm/tool_probe.py): a real call, a call written as text (repaired), or tools ignored.
async function checkTools(role, el, button) {
  button.disabled = true;
  clear(el).append(h("p", { class: "muted", text: "asking the model to call a tool…" }));
  try {
    showTools(el, await api(`/api/settings/models/${role}/tools`, { method: "POST" }));
    if (shell) shell.modelChanged();
  } catch (err) {
    clear(el).append(problem(err.message));
  } finally {
    button.disabled = false;
  }
}

function showTools(el, tools) {
  const text = `Tool calling: ${tools.message}.`;
  clear(el).append(tools.ok === false ? problem(`${text} ${tools.fix || ""}`)
    : h("p", { class: tools.ok ? "ok" : "muted", text: tools.fix ? `${text} ${tools.fix}` : text }));
}

async function loadInfo() {
  let s;
  try {
    s = await api("/api/settings");
  } catch (err) {
    clear(infoEl).append(problem(err.message));
    return;
  }
  clear(infoEl);
  infoEl.append(h("h2", {}, "Background services"));
  if (!s.services.length) infoEl.append(h("p", { class: "muted", text: "None running." }));
  for (const svc of s.services) {
    infoEl.append(h("div", { class: `service ${svc.state}` }, h("span", { class: `badge state-${svc.state}`, text: svc.state }),
      ` ${svc.name}`, svc.detail ? h("span", { class: "muted", text: ` — ${svc.detail}` }) : null));
  }
  const kr = s.keyring || {};
  // through h(): append itself would write the parts that are null as "null"
  infoEl.append(h("div", { class: "secrets" }, h("h2", {}, "Secrets"),
    kr.name ? h("p", { class: "keyring" }, "Kept by the keyring backend ", h("code", { text: kr.name }), ".") : null,
    kr.missing ? h("p", { class: "muted keyring-missing", text: `No keyring on this machine (optional): to keep secrets here, ${kr.fix}.` })
      : kr.problem ? problem(kr.problem) : null));
  const errors = Object.entries(s.provider_errors || {});
  if (errors.length) {
    infoEl.append(h("h2", {}, "Tool providers"));
    for (const [name, error] of errors) infoEl.append(problem(`${name}: ${error}`));
  }
  infoEl.append(
    h("h2", {}, "Configuration"),
    h("p", {}, "Active file: ", h("code", { text: s.config_file || "(built-in defaults)" }), s.profile ? ` (profile ${s.profile})` : "",
      ". Data folder: ", h("code", { text: s.data_dir }),
      `. Server on ${s.server.host}:${s.server.port}; uploads up to ${s.server.max_upload_mb} MB.`),
    h("p", { class: "muted", text: "The model switches above at once. For other settings edit the file and restart `jarvis run`; secrets are shown masked." }),
    s.config_text !== null ? h("pre", { class: "config", text: s.config_text }) : "",
    s.local_text ? h("p", {}, "Your choices, merged over it: ", h("code", { text: s.local_file })) : "",
    s.local_text ? h("pre", { class: "config local", text: s.local_text }) : "",
    h("details", {}, h("summary", {}, "effective settings (after defaults and profile)"), h("pre", { class: "config", text: json(s.effective) })),
  );
}
