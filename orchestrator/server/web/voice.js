// Voice in the chat. The microphone button records with MediaRecorder (click to start, click again to stop; it stops
// by itself at voice.max_audio_s), sends the recording to POST /api/transcribe, and puts what was heard in the
// message box to check, or sends it when voice.send_transcript is on. The speaker toggle reads answers aloud,
// sentence by sentence as they stream in (POST /api/speak for each); Stop or a new message silences it.
// Playback goes through Web Audio (decodeAudioData), not an <audio> element: the CSP allows no blob: media.
// A transcript is only text in the box: confirmations still need a click or a typed "approve".
import { api, ApiError, authorized, failure } from "./api.js";
import { h } from "./dom.js";

let settings = null; // GET /api/voice

async function voiceSettings() {
  if (!settings) {
    try {
      settings = await api("/api/voice");
    } catch (err) {
      settings = { available: false, problems: [err.message] };
    }
  }
  return settings;
}

function unavailable(button, s) {
  button.disabled = true;
  button.title = s.enabled === false ? "Voice is switched off (voice.enabled in the config)"
    : `Voice is not available: ${(s.problems || []).join(" ")}`;
}

async function transcribe(blob) {
  let resp;
  try {
    resp = await fetch("/api/transcribe", { method: "POST", body: blob, credentials: "omit",
      headers: authorized({ "Content-Type": blob.type || "application/octet-stream" }) });
  } catch (_) {
    throw new ApiError(0, "The recording could not be sent: is `jarvis run` still running?");
  }
  if (!resp.ok) throw await failure(resp);
  return resp.json();
}

// Why the microphone could not be opened, in words that fit the cause: "allow it" only when it was refused.
function micProblem(err) {
  const name = (err && err.name) || "Error";
  if (name === "NotFoundError" || name === "OverconstrainedError" || !navigator.mediaDevices) {
    return "No microphone was found on this device: connect one, or type.";
  }
  if (name === "NotAllowedError" || name === "SecurityError") {
    return "The microphone was not allowed for this page: allow it in the browser (the icon in the address bar), or type.";
  }
  if (name === "NotReadableError" || name === "AbortError") {
    return "The microphone could not be opened: another program may be using it. Close that program, or type.";
  }
  return `The microphone cannot be used (${name}), so type your message.`;
}

// The microphone button. onHeard(text, sendNow) gets each transcript; onProblem(message) each failure.
export function micButton(onHeard, onProblem) {
  const button = h("button", { type: "button", class: "mic", "aria-pressed": "false",
    title: "Ask by voice: click, speak, click again" }, "Mic");
  let recorder = null;
  let timer = null;

  const stop = () => {
    clearTimeout(timer);
    if (recorder && recorder.state !== "inactive") recorder.stop();
  };

  const start = async (s) => {
    let media;
    try {
      // Raw sound: the browser's noise suppression and gain control smear words for the recogniser (with them on,
      // the fake-microphone test heard "what does the weather like up to date"). Answers being read aloud are
      // stopped first, so no echo cancellation is needed.
      speaker.stop();
      media = await navigator.mediaDevices.getUserMedia({
        audio: { echoCancellation: false, noiseSuppression: false, autoGainControl: false } });
    } catch (err) {
      onProblem(micProblem(err));
      return;
    }
    const chunks = [];
    recorder = new MediaRecorder(media);
    recorder.addEventListener("dataavailable", (ev) => { if (ev.data.size) chunks.push(ev.data); });
    recorder.addEventListener("stop", async () => {
      media.getTracks().forEach((t) => t.stop());
      button.setAttribute("aria-pressed", "false");
      button.textContent = "Listening done…";
      button.disabled = true;
      try {
        const heard = await transcribe(new Blob(chunks, { type: recorder.mimeType }));
        onHeard(heard.text, Boolean(s.send_transcript));
      } catch (err) {
        onProblem(`Not understood: ${err.message}`);
      } finally {
        button.textContent = "Mic";
        button.disabled = false;
        recorder = null;
      }
    });
    recorder.start();
    button.setAttribute("aria-pressed", "true");
    button.textContent = "Stop mic";
    timer = setTimeout(stop, (s.max_audio_s || 60) * 1000 - 500); // under the server's limit
  };

  button.addEventListener("click", async () => {
    if (recorder) { stop(); return; }
    const s = await voiceSettings();
    if (!s.available) { unavailable(button, s); onProblem(button.title); return; }
    await start(s);
  });
  voiceSettings().then((s) => { if (!s.available) unavailable(button, s); });
  return button;
}

// Markdown to something worth saying: no code blocks, no link targets, no emphasis marks.
function sayable(text) {
  return text.replace(/```[\s\S]*?```/g, " ").replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/https?:\/\/\S+/g, "a link").replace(/[*_`#>|~]+/g, " ").replace(/\s+/g, " ").trim();
}

// Reads answers aloud: feed() the streamed text, finish() at the end; stop() silences it at once.
class Speaker {
  constructor() {
    this.on = localStorage.getItem("jarvis.speaker") === "on";
    this.context = null;
    this.generation = 0; // bumped by stop(): sentences fetched for an older answer are dropped
    this.pending = ""; // streamed text not yet a whole sentence
    this.fed = false;
    this.chain = Promise.resolve(); // sentences are spoken one after the other
    this.source = null;
    this.spoken = 0; // sentences played, shown on the button for tests and the curious
  }

  unlock() { // browsers start audio only after a click or a key: called from those
    if (!this.on) return;
    if (!this.context) this.context = new AudioContext();
    if (this.context.state === "suspended") this.context.resume();
  }

  feed(text) {
    if (!this.on) return;
    this.fed = true;
    this.pending += text;
    // A sentence ends at . ! ? or a line break followed by space; the rest waits for more text.
    const re = /[\s\S]*?(?:[.!?]+(?=\s)|\n)/y;
    let m;
    let taken = 0;
    re.lastIndex = 0;
    while ((m = re.exec(this.pending)) !== null && m[0].length) {
      this.say(m[0]);
      taken = re.lastIndex;
    }
    this.pending = this.pending.slice(taken);
  }

  finish(content) {
    if (!this.on) return;
    if (!this.fed && content) this.pending = content; // the answer came whole, not streamed
    this.say(this.pending);
    this.pending = "";
    this.fed = false;
  }

  say(text) {
    const words = sayable(text);
    if (!words) return;
    const generation = this.generation;
    // Fetched at once (the next sentence is ready when this one ends), played in order.
    const audio = fetch("/api/speak", { method: "POST", credentials: "omit",
      headers: authorized({ "Content-Type": "application/json" }), body: JSON.stringify({ text: words }) })
      .then(async (resp) => (resp.ok ? resp.arrayBuffer() : Promise.reject(await failure(resp))));
    this.chain = this.chain.then(async () => {
      let data;
      try {
        data = await audio;
      } catch (err) {
        this.button.title = `Could not speak: ${err.message}`;
        return;
      }
      if (generation !== this.generation || !this.context) return;
      const buffer = await this.context.decodeAudioData(data);
      if (generation !== this.generation) return;
      await new Promise((done) => {
        this.source = this.context.createBufferSource();
        this.source.buffer = buffer;
        this.source.connect(this.context.destination);
        this.source.addEventListener("ended", done);
        this.source.start();
      });
      this.source = null;
      this.spoken += 1;
      this.button.dataset.spoken = String(this.spoken);
    }).catch((err) => { this.button.title = `Could not play the speech: ${err.message}`; });
  }

  stop() {
    this.generation += 1;
    this.pending = "";
    this.fed = false;
    if (this.source) {
      try { this.source.stop(); } catch (_) { /* already ended */ }
    }
  }

  toggleButton() {
    this.button = h("button", { type: "button", class: "speaker", "aria-pressed": String(this.on),
      title: "Read answers aloud" }, "Speaker");
    this.button.addEventListener("click", () => {
      this.on = !this.on;
      localStorage.setItem("jarvis.speaker", this.on ? "on" : "off");
      this.button.setAttribute("aria-pressed", String(this.on));
      if (this.on) this.unlock();
      else this.stop();
    });
    voiceSettings().then((s) => { if (!s.available) unavailable(this.button, s); });
    return this.button;
  }
}

export const speaker = new Speaker();
