// The shell: tabs for the views the server has (GET /api/views), hash routing (#view/arg), lazy view modules.
// A view module exports `mount(el, ui)` and may export `show(arg)` (called on every visit) — see views/runs.js.
import { api } from "./api.js";
import { h, clear } from "./dom.js";
import { watchStart } from "./starting.js";

const tabs = document.getElementById("tabs");
const main = document.getElementById("views");
const banner = document.getElementById("banner");
const views = new Map(); // name -> {info, tab, el, module}

const ui = {
  api,
  navigate(name, arg) {
    const hash = `#${name}${arg ? "/" + encodeURIComponent(arg) : ""}`;
    if (location.hash === hash) route();
    else location.hash = hash;
  },
  has(name) {
    return views.has(name);
  },
  modelChanged() { // Settings switched the model: the header says so now, not at the next minute's check
    checkModels();
  },
  banner(message, actions = []) {
    clear(banner);
    if (!message) {
      banner.hidden = true;
      return;
    }
    banner.append(h("span", { text: message }), ...actions);
    banner.hidden = false;
  },
};

async function show(name, arg) {
  const view = views.get(name);
  if (!view) return;
  for (const v of views.values()) {
    const active = v === view;
    v.el.hidden = !active;
    v.tab.setAttribute("aria-current", active ? "page" : "false");
  }
  if (!view.module) {
    view.module = await import(view.info.module);
    await view.module.mount(view.el, ui);
  }
  if (view.module.show) await view.module.show(arg);
}

function route() {
  const [name, ...rest] = location.hash.replace(/^#/, "").split("/");
  const arg = rest.length ? decodeURIComponent(rest.join("/")) : undefined;
  show(views.has(name) ? name : views.keys().next().value, arg).catch((err) => {
    ui.banner(`This view failed to load: ${err.message}`);
  });
}

// The active model and its state in the header (checked at start and every minute), and a banner while it is down.
const modelState = document.getElementById("model-state");
let modelBannerDismissed = false;
async function checkModels() {
  if (!views.has("settings")) return;
  try {
    const health = await api("/api/settings/health?sections=false");
    const primary = health.models.find((m) => m.role === "primary") || health.models[0];
    if (primary) {
      const ignoresTools = primary.tools && primary.tools.ok === false;  // known once Settings probed it
      const state = !primary.ok ? "down" : primary.builtin ? "built-in demo model" : ignoresTools ? "answering, ignores tools" : "answering";
      modelState.textContent = `${primary.label || primary.model} · ${state}`;
      modelState.className = `model-state ${primary.ok && !ignoresTools ? "ok" : "down"}`;
      modelState.hidden = false;
    }
    const down = health.models.filter((m) => !m.ok);
    modelState.title = primary ? [primary.model, primary.notice].filter(Boolean).join(" — ") : "";
    if (primary && primary.ok && primary.notice) {
      // The model's own notice (the built-in demo model: "tiny, for trying Jarvis out"), until dismissed.
      if (!modelBannerDismissed && (banner.hidden || banner.dataset.model)) {
        banner.dataset.model = "1";
        ui.banner(primary.notice, [
          h("button", { type: "button", onclick: () => ui.navigate("settings") }, "Settings"),
          h("button", { type: "button", onclick: () => { modelBannerDismissed = true; delete banner.dataset.model; ui.banner(null); } }, "Dismiss"),
        ]);
      }
      return;
    }
    if (down.length) {
      // One short line (Settings has the whole message and what to do); dismissed, it stays away until the
      // model has answered again and gone down anew.
      if (modelBannerDismissed) return;
      banner.dataset.model = "1";
      const where = down[0].builtin ? "the built-in model" : down[0].base_url;
      ui.banner(`The model ${down[0].label || down[0].model} is not answering (${where}).`, [
        h("button", { type: "button", onclick: () => ui.navigate("settings") }, "Settings"),
        h("button", { type: "button", onclick: () => { modelBannerDismissed = true; delete banner.dataset.model; ui.banner(null); } }, "Dismiss"),
      ]);
    } else {
      modelBannerDismissed = false;  // it answers again: a new outage gets a new banner
      if (banner.dataset.model) {
        delete banner.dataset.model;
        ui.banner(null);
      }
    }
  } catch (_) { /* shown by the views themselves */ }
}
setInterval(checkModels, 60_000);

// Confirmations a jorb's script waits for (chat threads show theirs in the conversation). The banner leads to the
// jorb, where the same dialog opens; it is checked at start and on every change of view.
async function checkJorbConfirmations() {
  if (!views.has("jorbs") || (!banner.hidden && !banner.dataset.jorbs)) return;
  let pending;
  try {
    pending = await api("/api/pending");
  } catch (_) {
    return;
  }
  const jorbs = pending.filter((p) => (p.thread_id || "").startsWith("jorb:"));
  const here = location.hash.startsWith("#jorbs/");
  if (!jorbs.length || here) {
    if (banner.dataset.jorbs) {
      delete banner.dataset.jorbs;
      ui.banner(null);
    }
    return;
  }
  const first = jorbs[0];
  const id = first.thread_id.slice(5);
  banner.dataset.jorbs = "1";
  ui.banner(`${jorbs.length === 1 ? "A jorb waits" : `${jorbs.length} jorb calls wait`} for your confirmation: ${first.jorb_name || id}: ${first.summary}`, [
    h("button", { type: "button", onclick: () => ui.navigate("jorbs", `${id}/review`) }, "Review"),
  ]);
}

async function start() {
  watchStart();  // while Jarvis is still starting, what it is doing (the calls below wait for it)
  let list;
  try {
    list = await api("/api/views");
  } catch (err) {
    main.append(h("p", { class: "problem", text: err.message }));
    return;
  }
  for (const info of list) {
    const el = h("section", { class: `view view-${info.name}`, "aria-label": info.title, hidden: true });
    const tab = h("a", { href: `#${info.name}`, class: "tab" }, info.title);
    tabs.append(tab);
    main.append(el);
    views.set(info.name, { info, tab, el, module: null });
  }
  window.addEventListener("hashchange", () => {
    route();
    checkJorbConfirmations();
  });
  route();
  await checkModels();
  checkJorbConfirmations();
}

start();
