// Settings: the mail, calendar and contacts accounts (the same as `jarvis accounts`, server/api/accounts.py).
// Each account with its servers and its last test (Test logs in again, Remove takes it out); the form adds one
// from an address and an app password (the provider's preset fills the servers; a company server's are given
// under "Other servers"). Jarvis logs in before keeping anything: a refused login shows the server's words and
// nothing is saved. The password goes to the keyring, never into a file, and is never sent back. The Google
// sign-in (kind google: mail and calendar) is listed while connected, with Test but no Remove (it is connected
// and forgotten with `jarvis auth google`); while it is not, a line says how to connect it.
import { api } from "./api.js";
import { clear, h, problem } from "./dom.js";

let el;
let loads = 0;

export function accountsSection() {
  el = h("section", { class: "accounts", "aria-label": "Accounts" });
  return el;
}

function lastTest(t) {
  if (!t) return h("span", { class: "badge neutral", text: "not tested" });
  const at = new Date(t.at * 1000).toLocaleString();
  return h("span", { class: "last-test" }, h("span", { class: `badge ${t.ok ? "ok" : "down"}`, text: t.ok ? "works" : "failed" }),
    h("span", { class: "muted", text: ` ${at}: ${t.message}` }));
}

function row(a, status) {
  const test = h("button", { type: "button" }, "Test");
  const remove = h("button", { type: "button" }, "Remove");
  test.addEventListener("click", async () => {
    test.disabled = true;
    clear(status).append(h("p", { class: "muted", text: `logging in to ${a.name}…` }));
    try {
      const done = await api(`/api/accounts/${encodeURIComponent(a.name)}/test`, { method: "POST" });
      clear(status).append(done.ok ? h("p", { class: "ok", text: done.message }) : problem(done.message));
      loadAccounts(status);
    } catch (err) {
      clear(status).append(problem(err.message));
      test.disabled = false;
    }
  });
  remove.addEventListener("click", async () => {
    remove.disabled = true;
    try {
      const done = await api(`/api/accounts/${encodeURIComponent(a.name)}`, { method: "DELETE" });
      clear(status).append(h("p", { class: "ok", text: done.message }));
      loadAccounts(status);
    } catch (err) {
      clear(status).append(problem(err.message));
      remove.disabled = false;
    }
  });
  const google = a.kind === "google";
  const kind = google ? `google (${a.provides.join(", ")})` : { imap: "mail", caldav: "calendar", carddav: "contacts" }[a.kind] || a.kind;
  const servers = google ? `${a.servers}; disconnect with \`jarvis auth google --logout\``
    : `${a.servers}; TLS trusted by ${a.trust}${a.in_tracked_file ? "; written in the config file" : ""}`;
  return h("div", { class: "account", "data-account": a.name },
    h("div", {}, h("strong", { text: a.name }), ` ${kind}: ${a.who}${google ? "" : ` (${a.preset || "custom"})`} `, test,
      ...(google ? [] : [" ", remove])),
    h("div", { class: "muted servers", text: servers }),
    lastTest(a.last_test));
}

function field(label, attrs = {}) {
  return h("label", { class: "field" }, h("span", { text: label }), h("input", { type: "text", "aria-label": label, ...attrs }));
}

function choice(label, options) {
  return h("label", { class: "field" }, h("span", { text: label }),
    h("select", { "aria-label": label }, options.map(([value, text]) => h("option", { value, text }))));
}

function addForm(status) {
  const kind = choice("Account kind", [["mail", "Mail (IMAP and SMTP)"], ["calendar", "Calendar (CalDAV)"], ["contacts", "Contacts (CardDAV)"]]);
  const name = field("Account name", { required: true, pattern: "[A-Za-z0-9_\\-]{1,40}", placeholder: "home" });
  const address = field("Address", { required: true, placeholder: "you@icloud.com", autocomplete: "off" });
  const password = field("App password", { type: "password", required: true, autocomplete: "new-password" });
  const tls = [["", "(preset)"], ["tls", "TLS"], ["starttls", "STARTTLS"]];
  const other = {
    imap_host: field("IMAP server"), imap_port: field("IMAP port", { inputmode: "numeric" }), imap_tls: choice("IMAP TLS", tls),
    smtp_host: field("SMTP server"), smtp_port: field("SMTP port", { inputmode: "numeric" }), smtp_tls: choice("SMTP TLS", tls),
    url: field("Calendar or contacts URL", { placeholder: "https://cloud.example.org" }), calendar: field("Calendar name"),
    tls_ca_file: field("CA certificate file"),
  };
  const add = h("button", { type: "submit" }, "Add the account");
  const form = h("form", { class: "add-account" }, kind, name, address, password,
    h("details", {}, h("summary", {}, "Other servers (a company server; iCloud, Fastmail and Outlook.com need none)"),
      h("div", { class: "fields" }, ...Object.values(other))), add);
  const value = (wrapped) => wrapped.querySelector("input, select").value.trim();
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    add.disabled = true;
    clear(status).append(h("p", { class: "muted", text: "logging in…" }));
    const body = { kind: value(kind), name: value(name), address: value(address), password: password.querySelector("input").value };
    for (const [key, wrapped] of Object.entries(other)) {
      const v = value(wrapped);
      if (v) body[key] = key.endsWith("_port") ? Number(v) : v;
    }
    try {
      const done = await api("/api/accounts", { method: "POST", body });
      password.querySelector("input").value = "";
      clear(status).append(h("p", { class: "ok", text: done.message }));
      loadAccounts(status);
    } catch (err) {
      clear(status).append(problem(err.message));
      add.disabled = false;
    }
  });
  return form;
}

// Loads overlap (the view's first load, then an add, then a remove): only the latest one draws.
export async function loadAccounts(status) {
  const load = ++loads;
  status = status || h("div", { class: "account-status", role: "status" });
  let found;
  try {
    found = await api("/api/accounts");
  } catch (err) {
    if (load === loads) clear(el).append(h("h2", {}, "Accounts"), problem(err.message));
    return;
  }
  if (load !== loads) return;
  clear(el).append(h("h2", {}, "Accounts"),
    h("p", { class: "muted", text: "Mail, calendar and contacts accounts (iCloud, Fastmail, Outlook.com, a company server…). The app password goes to the keyring, the account to your config.local.yml. A self-signed server (Proton Bridge) is pinned with `jarvis accounts add --pin`." }));
  if (!found.accounts.length) el.append(h("p", { class: "muted", text: "No accounts yet." }));
  for (const a of found.accounts) el.append(row(a, status));
  if (found.google_hint) el.append(h("p", { class: "muted google-hint", text: found.google_hint }));
  el.append(addForm(status), status);
}
