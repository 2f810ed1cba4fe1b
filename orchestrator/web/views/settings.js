// Settings: model endpoint health, MCP server health (and other HEALTH_CHECKS sections), background services, tool providers, the active configuration file.
import { api } from "../api.js";
import { clear, h, json, problem } from "../dom.js";

let healthEl;
let infoEl;

export function mount(el) {
  healthEl = h("div", { class: "health" });
  infoEl = h("div", { class: "settings-info" });
  el.append(h("div", { class: "view-head" }, h("h1", {}, "Settings"),
    h("button", { type: "button", onclick: () => show() }, "Check again")), healthEl, infoEl);
}

export async function show() {
  await Promise.all([loadHealth(), loadInfo()]);
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
    healthEl.append(h("div", { class: `endpoint ${m.ok ? "ok" : "down"}`, "data-role": m.role },
      h("span", { class: `badge ${m.ok ? "ok" : "down"}`, text: m.ok ? "answers" : "down" }),
      h("strong", { text: ` ${m.role}` }), m.builtin ? ` ${m.model}, run by Jarvis itself (built-in)` : ` ${m.model} at ${m.base_url}`,
      m.notice ? h("p", { class: "notice", text: m.notice }) : null,
      m.ok ? null : problem(`${m.message} ${m.fix || ""}`)));
  }
  for (const section of health.sections || []) {
    const sectionEl = h("section", { class: "health-section", "aria-label": section.title }, h("h2", { text: section.title }));
    healthEl.append(sectionEl);
    if (section.note) sectionEl.append(h("p", { class: "muted", text: section.note }));
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
  infoEl.append(h("h2", {}, "Secrets"),
    kr.name ? h("p", { class: "keyring" }, "Kept by the keyring backend ", h("code", { text: kr.name }), ".") : null,
    kr.problem ? problem(kr.problem) : null);
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
    h("p", { class: "muted", text: "Edit the file and restart `jarvis run` to change settings; secrets are shown masked." }),
    s.config_text !== null ? h("pre", { class: "config", text: s.config_text }) : "",
    h("details", {}, h("summary", {}, "effective settings (after defaults and profile)"), h("pre", { class: "config", text: json(s.effective) })),
  );
}
