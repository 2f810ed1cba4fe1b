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

// Characters that would reorder or hide what is shown (bidirectional controls, zero-width and tag characters) and
// the C1 controls: JSON.stringify leaves them as they are, so a file named "invoice\u202efdp.exe" would show as
// "invoiceexe.pdf" in a confirmation. The same set as orchestrator/core/visible.py (tag characters are surrogate
// pairs here: each half is escaped, which JSON reads back as the one character).
const ACTING = /[\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u200b\u2060-\u2064\ufeff\u2028\u2029]|\udb40[\udc00-\udc7f]/g;
const escapeUnit = (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0");

// Code a model wrote, as a person reads it: a bidirectional isolate in a comment would move the code shown
// ("Trojan Source"), so those characters are written out (see ACTING).
export function visibleCode(text) {
  return String(text ?? "").replace(ACTING, (m) => m.split("").map(escapeUnit).join(""));
}

// JSON as a person reads it: every character shown (see ACTING), and it parses back to the same value.
export function json(value, indent = 2) {
  try {
    return visibleCode(JSON.stringify(value, null, indent)); // JSON reads \uXXXX back as the character
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
