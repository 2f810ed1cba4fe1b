// While `jarvis run` is still starting (server/starting.py), one line says what it is doing: /healthz answers
// "starting" and the stage, polled until the full app answers it (the page's own calls are held until then). A
// Jarvis that cannot start answers 503 with the reason, shown in its place. /healthz needs no token: none is sent.

const line = document.getElementById("starting");
const POLL_MS = 700;

function say(text, failed = false) {
  line.textContent = text;
  line.classList.toggle("failed", failed);
  line.hidden = false;
}

export async function watchStart() {
  for (;;) {
    let resp, body;
    try {
      resp = await fetch("/healthz", { credentials: "omit", cache: "no-store" });
      body = await resp.json();
    } catch (_) {
      // Gone while starting: the page's held calls say why when the server told them; otherwise nothing to add.
      if (!line.hidden) say("Jarvis stopped before it had finished starting.", true);
      return;
    }
    if (body.status === "starting") {
      say(`Jarvis is starting${body.starting && body.starting !== "starting" ? `: ${body.starting}` : ""}…`);
    } else if (resp.status === 503 && typeof body.detail === "string") {
      say(body.detail, true);  // "Jarvis could not start: ..."
      return;
    } else {  // the full app answers ("up", or "down" with its database): started
      line.hidden = true;
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}
