// Tiny DOM helpers. Text always goes in as text; only HTML rendered and sanitized by the server is set as HTML.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "text") el.textContent = value;
    else if (key === "trustedHtml") el.innerHTML = value; // server-sanitized (orchestrator/markdown.py)
    else if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (value === true) el.setAttribute(key, "");
    else el.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

export function json(value, indent = 2) {
  try {
    return JSON.stringify(value, null, indent);
  } catch (_) {
    return String(value);
  }
}

export function ms(value) {
  if (value === undefined || value === null) return "";
  return value >= 1000 ? `${(value / 1000).toFixed(1)} s` : `${Math.round(value)} ms`;
}

export function when(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}

// An error the user can act on, shown where it happened.
export function problem(message, ...actions) {
  return h("div", { class: "problem", role: "alert" }, h("p", { text: message }), actions.length ? h("div", { class: "actions" }, actions) : null);
}
