// Talking to the Jarvis API: JSON calls, SSE streams over fetch (POST bodies), uploads.
// The access token is held by this tab (sessionStorage, kept apart by origin, port included) and sent as
// `Authorization: Bearer` on every call: a cookie went to every server on this host, whatever its port
// (server/security.py). The URL `jarvis run` or `jarvis open` prints (`/?token=...`) hands it over once and is
// dropped from the address bar; a reload keeps it; a tab without it says to run `jarvis open`.

const TOKEN_KEY = "jarvis_token";
const NO_TOKEN = "This tab has no access token: run `jarvis open` in a terminal to open Jarvis with it.";
const OLD_TOKEN = "This tab's access token is no longer valid: run `jarvis open` in a terminal to get the current one.";

// Done when this module is first imported, before any call: the token leaves the URL (and the history entry).
(function adoptUrlToken() {
  const params = new URLSearchParams(location.search);
  const token = params.get("token");
  if (token === null) return;
  sessionStorage.setItem(TOKEN_KEY, token);
  params.delete("token");
  const rest = params.toString();
  history.replaceState(history.state, "", `${location.pathname}${rest ? `?${rest}` : ""}${location.hash}`);
})();

// Headers with the tab's token added (none when the tab has none: the server says 401, failure() says why).
export function authorized(headers = {}) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { ...headers, Authorization: `Bearer ${token}` } : headers;
}

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export async function failure(resp) {
  let message = `${resp.status} ${resp.statusText}`;
  try {
    const body = await resp.json();
    if (typeof body.detail === "string") message = body.detail;
    else if (Array.isArray(body.detail)) message = body.detail.map((d) => `${(d.loc || []).join(".")}: ${d.msg}`).join("; ");
  } catch (_) { /* not JSON */ }
  if (resp.status === 401) message = sessionStorage.getItem(TOKEN_KEY) ? OLD_TOKEN : NO_TOKEN;
  return new ApiError(resp.status, message);
}

// One request: JSON body if given, the access token, and a clear error when Jarvis does not answer or refuses.
async function send(path, { method, body, accept }) {
  const init = { method, headers: authorized(accept ? { Accept: accept } : {}), credentials: "omit" };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(path, init);
  } catch (err) {
    throw new ApiError(0, "Jarvis is not answering: is `jarvis run` still running?");
  }
  if (!resp.ok) throw await failure(resp);
  return resp;
}

export async function api(path, { method = "GET", body } = {}) {
  const resp = await send(path, { method, body });
  return resp.status === 204 ? null : resp.json();
}

// POST (or GET) and read the answer as server-sent events; onEvent(event) for each one.
export async function stream(path, { method = "POST", body } = {}, onEvent) {
  const resp = await send(path, { method, body, accept: "text/event-stream" });
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const data = frame.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
      if (data) onEvent(JSON.parse(data));
    }
  }
}

export async function upload(file) {
  let resp;
  try {
    resp = await fetch(`/api/uploads?filename=${encodeURIComponent(file.name)}`, {
      method: "POST", body: file, credentials: "omit",
      headers: authorized({ "Content-Type": file.type || "application/octet-stream" }),
    });
  } catch (err) {
    throw new ApiError(0, `${file.name} could not be sent: is \`jarvis run\` still running?`);
  }
  if (!resp.ok) throw await failure(resp);
  return resp.json();
}
