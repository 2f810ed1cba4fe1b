// Talking to the Jarvis API: JSON calls, SSE streams over fetch (POST bodies), uploads.
// The access cookie (HttpOnly, SameSite=Strict) rides along on every same-origin request.

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
  if (resp.status === 401) message += " — reopen the URL printed by `jarvis run`.";
  return new ApiError(resp.status, message);
}

// One request: JSON body if given, the access cookie, and a clear error when Jarvis does not answer or refuses.
async function send(path, { method, body, accept }) {
  const init = { method, headers: accept ? { Accept: accept } : {}, credentials: "same-origin" };
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
      method: "POST", body: file, credentials: "same-origin",
      headers: { "Content-Type": file.type || "application/octet-stream" },
    });
  } catch (err) {
    throw new ApiError(0, `${file.name} could not be sent: is \`jarvis run\` still running?`);
  }
  if (!resp.ok) throw await failure(resp);
  return resp.json();
}
