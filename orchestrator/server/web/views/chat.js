// Chat: the thread list, the conversation with tool steps as they happen, attachments (dropped PDF/text
// files, pasted YouTube URLs) and confirmations (restored from the checkpoint after a reload or a restart).
import { api, stream, upload } from "../api.js";
import { GONE, answeredList, askAll, sentTo } from "../confirm.js";
import { clear, h, json, ms, problem } from "../dom.js";
import { micButton, speaker } from "../voice.js";

const YOUTUBE = /https?:\/\/(?:www\.|m\.)?(?:youtube\.com|youtu\.be|youtube-nocookie\.com)\/[^\s<>"')\]]+/gi;

let ui;
let activeTurn = null; // the Turn streaming now, for Esc
let threadList;
let threadQuery = "";
let setDrawer = () => {};
let log;
let noteSlot; // between the conversation and the message box: a note there is never below the fold
let input;
let sendButton;
let chipsEl;
let composerNote;
let current = null; // thread id shown
let busy = false;
let staged = []; // attachments for the next message: {upload_id, name, kind} or {kind: "youtube", ref, name}
let steps = new Map(); // tool call id -> Step, for the thread shown (history and live events share it)
// Turns this view did not start (a confirmation answered from the phone, a reminder, an inbound message) are
// seen by watching the thread list: the shown thread running, or changed since it was drawn, is drawn again.
const WATCH_MS = 3000;
let shownStamp = null; // updated_at of the shown thread when it was drawn (or when this view's own turn ended)
let listSignature = "";
let dialogGone = null; // AbortController of the open confirmation dialog

export function mount(el, shell) {
  ui = shell;
  threadList = h("ul", { class: "threads", "aria-label": "Threads" });
  log = h("div", { class: "log", "aria-live": "polite" });
  input = h("textarea", { id: "message", "aria-label": "Message", rows: 3,
    placeholder: "Ask Jarvis… (Enter sends, Shift+Enter for a new line; drop a PDF or text file to attach it)" });
  sendButton = h("button", { type: "submit", class: "primary" }, "Send");
  chipsEl = h("div", { class: "chips", role: "group", "aria-label": "Attachments" });
  composerNote = h("div", { class: "composer-note" });
  const fileInput = h("input", { type: "file", multiple: true, hidden: true,
    accept: ".pdf,.txt,.md,.markdown,.csv,.json,.html,.htm,.xml,.yaml,.yml,.log,.rst" });
  fileInput.addEventListener("change", () => {
    addFiles([...fileInput.files]);
    fileInput.value = "";
  });
  const form = h("form", { class: "composer", onsubmit: (ev) => { ev.preventDefault(); send(); } },
    chipsEl, composerNote,
    h("div", { class: "row" }, input,
      h("div", { class: "buttons" }, sendButton,
        h("button", { type: "button", onclick: () => fileInput.click(), title: "Attach a PDF or text file" }, "Attach"),
        micButton(heard, (message) => { clear(composerNote).append(problem(message)); }),
        speaker.toggleButton())),
    fileInput);
  input.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      send();
    }
  });
  // Esc stops the running turn (unless a dialog is open: there Esc closes the dialog).
  document.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape" && activeTurn && !document.querySelector("dialog[open]") && !el.hidden) activeTurn.stop();
  });
  input.addEventListener("paste", (ev) => {
    const text = ev.clipboardData ? ev.clipboardData.getData("text") : "";
    for (const url of text.match(YOUTUBE) || []) addUrl(url);
  });
  // Under ~700 px the thread list is a drawer over the conversation, opened by this button (hidden when wide).
  let searchTimer = null;
  const search = h("input", { type: "search", class: "thread-search", placeholder: "Search threads",
    "aria-label": "Search threads" });
  search.addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => { threadQuery = search.value.trim(); refreshThreads(); }, 250);
  });
  const sidebar = h("aside", { class: "sidebar", id: "chat-threads" },
    h("button", { type: "button", class: "new-chat", onclick: () => newThread() }, "New chat"), search, threadList);
  const toggle = h("button", { type: "button", class: "threads-toggle", "aria-controls": "chat-threads",
    "aria-expanded": "false", onclick: () => setDrawer(!sidebar.classList.contains("open")) }, "Threads");
  setDrawer = (open) => {
    sidebar.classList.toggle("open", open);
    toggle.setAttribute("aria-expanded", String(open));
  };
  threadList.addEventListener("click", (ev) => { if (ev.target.closest("a")) setDrawer(false); });
  // A tap outside the open drawer closes it (it covers the Threads button on a phone).
  document.addEventListener("pointerdown", (ev) => {
    if (sidebar.classList.contains("open") && !sidebar.contains(ev.target) && !toggle.contains(ev.target)) setDrawer(false);
  });
  noteSlot = h("div", { class: "note-slot" });
  el.append(sidebar, h("div", { class: "conversation" }, h("div", { class: "conversation-bar" }, toggle), log, noteSlot, form));
  // Files dropped anywhere on the window become attachments.
  window.addEventListener("dragover", (ev) => {
    if (el.hidden) return;
    ev.preventDefault();
    document.body.classList.add("dropping");
  });
  window.addEventListener("dragleave", () => document.body.classList.remove("dropping"));
  window.addEventListener("drop", (ev) => {
    document.body.classList.remove("dropping");
    if (el.hidden) return;
    ev.preventDefault();
    addFiles([...(ev.dataTransfer ? ev.dataTransfer.files : [])]);
  });
  refreshThreads();
  setInterval(() => { if (!el.hidden && !document.hidden) watch(); }, WATCH_MS);
}

let watching = false; // a look under way: a slow one is not overlapped by the next (two views of one turn)

async function watch() {
  if (busy || !current || watching) return;
  watching = true;
  try {
    const id = current;
    // While the list is searched, the look is the plain list: a search reads every thread's messages, and the
    // shown thread may not match it.
    const threads = threadQuery ? await listThreads("").catch(() => null) : await refreshThreads();
    const shown = threads && threads.find((t) => t.thread_id === id);
    if (!shown || busy || current !== id) return;
    if (shown.running || (shownStamp && shown.updated_at !== shownStamp)) {
      if (dialogGone) dialogGone.abort(); // its question was answered elsewhere, or is another one now
      await openThread(id);
    }
  } finally {
    watching = false;
  }
}

export async function show(arg) {
  setDrawer(false);
  if (arg && arg !== current) await openThread(arg);
  else if (!arg && !current) await newThread();
  input.focus();
}

// -- threads -----------------------------------------------------------------------------------------
// The threads, most recent first (drawn again only when something shown in the list changed); `adopt`: this
// view's own turn just ended, so the shown thread's new updated_at is not news to it.
async function refreshThreads({ adopt = false } = {}) {
  let threads;
  try {
    threads = await listThreads(threadQuery);
  } catch (err) {
    listSignature = "";
    clear(threadList).append(h("li", { class: "problem", text: err.message }));
    return null;
  }
  const shown = threads.find((t) => t.thread_id === current);
  if (adopt && shown) shownStamp = shown.updated_at;
  const signature = JSON.stringify([current, threadQuery, threads.map((t) => [t.thread_id, t.title, t.running, t.status])]);
  if (signature === listSignature) return threads;
  listSignature = signature;
  clear(threadList);
  for (const t of threads) {
    const badges = [];
    if (t.running) badges.push(h("span", { class: "badge working", text: "working" }));
    else if (t.status === "waiting") badges.push(h("span", { class: "badge waiting", text: "needs you" }));
    const title = t.title || "(untitled)";
    threadList.append(h("li", { class: t.thread_id === current ? "current" : "" },
      h("a", { href: `#chat/${encodeURIComponent(t.thread_id)}`, title: t.thread_id }, title), badges,
      h("button", { type: "button", class: "icon", title: "Rename", "aria-label": `Rename ${title}`,
        onclick: () => renameThread(t.thread_id, title) }, "✎"),
      h("button", { type: "button", class: "icon", title: "Delete", "aria-label": `Delete ${title}`,
        onclick: () => deleteThread(t.thread_id, title) }, "×")));
  }
  if (!threads.length && threadQuery) threadList.append(h("li", { class: "muted", text: `No thread matches “${threadQuery}”.` }));
  return threads;
}

function listThreads(query) {
  return api(query ? `/api/threads?q=${encodeURIComponent(query)}` : "/api/threads");
}

async function renameThread(id, title) {
  const name = (window.prompt("New name for this conversation", title) || "").trim();
  if (!name || name === title) return;
  try {
    await api(`/api/threads/${encodeURIComponent(id)}`, { method: "PATCH", body: { title: name } });
  } catch (err) {
    ui.banner(`Could not rename it: ${err.message}`);
  }
  refreshThreads();
}

async function deleteThread(id, title) {
  if (!window.confirm(`Delete “${title}”? Its messages are gone for good (what it did stays in the effects ledger).`)) return;
  try {
    await api(`/api/threads/${encodeURIComponent(id)}`, { method: "DELETE" });
  } catch (err) {
    ui.banner(`Could not delete it: ${err.message}`);
    return;
  }
  if (id === current) await newThread();
  else refreshThreads();
}

// A new conversation's id is made here, at once: while it was fetched from the server, a message typed right
// after "New chat" was still sent to the previous conversation (and its answer drawn nowhere).
function newThreadId() {
  const bytes = crypto.getRandomValues(new Uint8Array(6));
  return "web-" + [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
}

async function newThread() {
  setDrawer(false); // the new conversation is what the user wants to see
  clear(noteSlot);
  const thread_id = newThreadId();
  current = thread_id;
  shownStamp = null;
  steps = new Map();
  history.replaceState(null, "", `#chat/${encodeURIComponent(thread_id)}`);
  clear(log).append(h("p", { class: "empty", text: "Ask Jarvis anything. Drop a PDF or text file on the window to attach it; paste a YouTube link to attach the video." }));
  refreshThreads();
}

async function openThread(id) {
  current = id;
  steps = new Map();
  clear(log);
  clear(noteSlot);
  let thread;
  try {
    thread = await api(`/api/threads/${encodeURIComponent(id)}`);
  } catch (err) {
    log.append(problem(err.status === 404 ? `There is no conversation ${id}.` : err.message,
      h("button", { type: "button", onclick: () => newThread() }, "New chat")));
    return;
  }
  if (current !== id) return;
  shownStamp = thread.updated_at;
  let messages = thread.messages;
  if (thread.running) {
    // The running turn's events are replayed from its start: show the history before it only.
    const lastHuman = messages.map((m) => m.type).lastIndexOf("human");
    messages = messages.slice(0, lastHuman + 1);
  }
  renderHistory(messages, thread.attachments);
  const answers = answeredList(thread.answered);
  if (answers) log.append(answers);
  if (thread.tainted && !thread.running) showTainted(id);
  refreshThreads();
  // Not awaited: the view is shown while the turn streams or the dialog waits.
  if (thread.running) runStream(`/api/threads/${encodeURIComponent(id)}/events`, undefined, "GET");
  else if (thread.pending.length) confirm(thread.pending);
  else if (thread.stalled) showStalled();
}

// The conversation read content from outside: side effects ask first until the user says it is fine.
function showTainted(id) {
  const note = h("div", { class: "pending-note tainted", role: "status" },
    "This conversation has read content from outside it (a file, a page, an email), so Jarvis asks before every ",
    "side effect here, even those set to automatic. ",
    h("button", { type: "button", onclick: async () => {
      try {
        await api(`/api/threads/${encodeURIComponent(id)}/trust`, { method: "POST" });
        note.remove();
      } catch (err) {
        note.replaceWith(problem(err.message));
      }
    } }, "I checked what it read: trust it"));
  clear(noteSlot).append(note);
}

function renderHistory(messages, attachments) {
  if (attachments && attachments.length) {
    log.append(h("div", { class: "thread-attachments" }, "Attached: ",
      attachments.map((a) => h("span", { class: `chip ${a.kind}`, text: a.name || a.ref }))));
  }
  for (const m of messages) {
    if (m.type === "human") log.append(userBubble(m.content));
    else if (m.type === "ai") {
      if (m.content) log.append(h("div", { class: "msg assistant", trustedHtml: m.html }));
      for (const c of m.tool_calls || []) {
        const step = new Step(c.name, c.args);
        steps.set(c.id, step);
        log.append(step.el);
      }
      for (const c of m.invalid_tool_calls || []) {
        const step = new Step(c.name || "?", c.args);
        step.finish(false, `could not be read: ${c.error}`);
        log.append(step.el);
      }
    } else if (m.type === "tool") {
      const step = steps.get(m.tool_call_id);
      if (step) step.finish(m.status !== "error", m.content);
    }
  }
  scroll();
}

// Calls that ended without a tool_end event (denied, skipped, refused by policy) get their result from the
// checkpoint once the turn is over.
async function settleSteps(id) {
  if (![...steps.values()].some((s) => !s.finished)) return;
  let thread;
  try {
    thread = await api(`/api/threads/${encodeURIComponent(id)}`);
  } catch (_) {
    return;
  }
  if (current !== id) return;
  for (const m of thread.messages) {
    const step = m.type === "tool" ? steps.get(m.tool_call_id) : null;
    if (step && !step.finished) step.finish(m.status !== "error", m.content);
  }
}

function userBubble(text, names = []) {
  return h("div", { class: "msg user" }, h("div", { class: "text", text }),
    names.length ? h("div", { class: "attached" }, names.map((n) => h("span", { class: "chip", text: n }))) : null);
}

function scroll() {
  log.scrollTop = log.scrollHeight;
}

// -- one tool step -------------------------------------------------------------------------------------
class Step {
  constructor(tool, args) {
    this.status = h("span", { class: "status", text: "asked" });
    this.duration = h("span", { class: "duration" });
    this.argsPre = h("pre", { text: json(args || {}) });
    this.result = h("pre", { class: "preview", hidden: true });
    this.el = h("div", { class: "step", "data-tool": tool },
      h("div", { class: "step-head" }, h("span", { class: "tool", text: tool }), this.status, this.duration),
      h("details", {}, h("summary", {}, "arguments"), this.argsPre),
      this.result);
  }

  start(args) {
    this.status.textContent = "running";
    this.el.classList.add("running");
    if (args) this.argsPre.textContent = json(args);
  }

  finish(ok, preview, duration) {
    this.finished = true;
    // A call the user denied, or the policy refused, did not fail: it was not run, and says so in its own color.
    const denied = /^(The user denied|Not done:|Skipped )/.test(preview || "");
    this.el.classList.remove("running");
    this.el.classList.add(ok ? "ok" : denied ? "denied" : "failed");
    this.status.textContent = ok ? "done" : denied ? "not run" : "failed";
    if (duration !== undefined) this.duration.textContent = ms(duration);
    this.result.textContent = preview || "";
    this.result.hidden = !preview;
    if (!ok && !denied) {
      this.el.append(h("p", { class: "hint", text: "The tool failed; Jarvis saw this error and may try another way. If it needs you (a missing file, a setting), fix it and ask again." }));
    }
  }
}

// -- one streamed turn ----------------------------------------------------------------------------------
class Turn {
  constructor() {
    this.bubble = null;
    this.text = "";
    this.pending = [];
    this.failed = false;
    this.live = new Map(); // keyed progress lines, updated in place until the step they describe is over
    this.waits = []; // "waiting for the model" lines: gone once it answers (they read as a failure otherwise)
    // What Jarvis is doing now and for how long, so a slow model is not mistaken for a hung one.
    this.stage = "thinking";
    this.started = Date.now();
    this.status = h("span");
    // Stop: the model's answer ends at its next token and nothing new starts; a tool already running finishes.
    this.stopButton = h("button", { type: "button", class: "stop", title: "Stop this turn (Esc)" }, "Stop");
    this.stopButton.addEventListener("click", () => this.stop());
    this.working = h("div", { class: "working" }, h("span", { role: "status" }, this.status), " ", this.stopButton);
    this.thread = current;
    this.tick();
    this.ticker = setInterval(() => this.tick(), 1000);
    log.append(this.working);
  }

  tick() {
    const s = Math.round((Date.now() - this.started) / 1000);
    this.status.textContent = `Jarvis is working… ${this.stage} · ${s} s`;
  }

  async stop() {
    speaker.stop();
    if (this.stopButton.disabled) return;
    this.stopButton.disabled = true;
    this.setStage("stopping");
    try {
      await ui.api(`/api/threads/${encodeURIComponent(this.thread)}/stop`, { method: "POST" });
    } catch (err) {
      this.stopButton.disabled = false;
      this.place(problem(`Could not stop: ${err.message}`));
    }
  }

  setStage(stage) {
    this.stage = stage;
    this.tick();
  }

  place(el) {
    log.insertBefore(el, this.working);
    scroll();
  }

  handle(ev) {
    switch (ev.event) {
      case "token":
        this.modelAnswered(); // the next wait gets a line of its own
        if (this.stage !== "writing the answer") this.setStage("writing the answer");
        if (!this.bubble) {
          this.bubble = h("div", { class: "msg assistant streaming" });
          this.text = "";
          this.place(this.bubble);
        }
        this.text += ev.text;
        this.bubble.textContent = this.text;
        speaker.feed(ev.text);
        scroll();
        break;
      case "tool_call": {
        this.modelAnswered();
        this.bubble = null;
        speaker.finish("");
        let step = steps.get(ev.id);
        if (!step) {
          step = new Step(ev.tool, ev.args);
          steps.set(ev.id, step);
          this.place(step.el);
        }
        break;
      }
      case "tool_start":
        this.setStage(`calling ${ev.tool}`);
        this.step(ev).start(ev.args);
        break;
      case "tool_end":
        this.setStage("thinking");
        this.step(ev).finish(ev.ok, ev.preview, ev.duration_ms);
        scroll();
        break;
      case "progress": {
        if (ev.stage) this.setStage(String(ev.stage).replaceAll("_", " "));
        const text = ev.message || [ev.stage, ev.attempt && `attempt ${ev.attempt}`].filter(Boolean).join(" · ") || json(ev, 0);
        // A keyed event ("waiting for the model (35 s, try 2 of 3)" every few seconds) replaces the line before it.
        const shown = ev.key && this.live.get(ev.key);
        if (shown) {
          shown.textContent = text;
        } else {
          const line = h("div", { class: "progress", text });
          if (ev.key) this.live.set(ev.key, line);
          if (ev.stage === "waiting for the model") this.waits.push(line);
          this.place(line);
        }
        break;
      }
      case "confirmation":
        this.setStage("waiting for your confirmation");
        this.pending.push(ev);
        break;
      case "done":
        if (!this.bubble) {
          this.bubble = h("div", { class: "msg assistant" });
          this.place(this.bubble);
        }
        this.bubble.classList.remove("streaming");
        speaker.finish(ev.content);
        if (ev.content) this.bubble.innerHTML = ev.html; // sanitized server-side
        else this.bubble.remove();
        break;
      case "stopped": // what was said so far stays, with the note (as the thread keeps it)
        if (this.bubble) this.bubble.remove();
        this.bubble = h("div", { class: "msg assistant stopped", text: ev.content });
        this.place(this.bubble);
        break;
      case "error":
        this.fail(ev.message, ev.kind);
        break;
      default:
        break;
    }
  }

  step(ev) {
    const callId = (ev.key || "").split("|")[2];
    let step = steps.get(callId);
    if (!step) {
      step = new Step(ev.tool, ev.args);
      steps.set(callId, step);
      this.place(step.el);
    }
    return step;
  }

  modelAnswered() { // a wait that ended in an answer is not news: its lines go (a turn that fails keeps them)
    this.live.clear();
    for (const line of this.waits) line.remove();
    this.waits = [];
  }

  fail(message, kind) {
    this.failed = true;
    this.failKind = kind;
    if (this.bubble) this.bubble.classList.remove("streaming");
    if (kind === "refused") { // the server said no before the turn began: nothing was saved, nothing to retry
      this.place(problem(`Not sent: ${message}`));
      return;
    }
    const actions = [h("button", { type: "button", onclick: (e) => { e.target.closest(".problem").remove(); retry(); } }, "Retry")];
    if (kind === "model_endpoint" && ui.has("settings")) {
      actions.push(h("button", { type: "button", onclick: () => ui.navigate("settings") }, "Check the model in Settings"));
    }
    const what = kind === "model_endpoint" ? "The model did not answer. " : "This turn stopped. ";
    this.place(problem(`${what}${message} Your message is kept: Retry continues where it stopped.`, ...actions));
  }

  close() {
    clearInterval(this.ticker);
    this.working.remove();
  }
}

async function runStream(path, body, method = "POST") {
  const id = current;
  busy = true;
  sendButton.disabled = true;
  const turn = new Turn();
  activeTurn = turn;
  try {
    await stream(path, { method, body }, (ev) => {
      if (current === id) turn.handle(ev);
    });
  } catch (err) {
    if (current === id) turn.fail(err.message, err.status === 0 ? "connection" : err.status >= 400 ? "refused" : "request");
  } finally {
    turn.close();
    if (activeTurn === turn) activeTurn = null;
    busy = false;
    sendButton.disabled = false;
  }
  await refreshThreads({ adopt: current === id });
  if (current === id && !turn.pending.length) await settleSteps(id);
  if (current === id && turn.pending.length) await confirm(turn.pending);
  return turn;
}

// -- confirmations ---------------------------------------------------------------------------------------
async function confirm(pending) {
  const id = current;
  const note = h("div", { class: "pending-note", role: "status" },
    h("strong", { text: "Waiting for your confirmation: " }), pending.map((p) => p.summary).join(" · "), " ",
    h("button", { type: "button", onclick: () => { note.remove(); confirm(pending); } }, "Review"), sentTo(pending));
  const gone = new AbortController();
  dialogGone = gone;
  const answers = await askAll(pending, gone.signal);
  if (dialogGone === gone) dialogGone = null;
  if (answers === GONE || current !== id) return;
  if (answers === null) {
    log.append(note);
    scroll();
    return;
  }
  await runStream(`/api/threads/${encodeURIComponent(id)}/resume`, { answers });
}

function showStalled() {
  log.append(problem("The last turn did not finish (the model endpoint may have been down, or Jarvis was stopped). Your message is kept.",
    h("button", { type: "button", onclick: (e) => { e.target.closest(".problem").remove(); retry(); } }, "Retry")));
  scroll();
}

async function retry() {
  if (busy || !current) return;
  await runStream(`/api/threads/${encodeURIComponent(current)}/retry`, undefined);
}

// -- sending ----------------------------------------------------------------------------------------------
async function send() {
  const text = input.value.trim();
  if (busy || (!text && !staged.length)) return;
  speaker.stop(); // a new message silences the previous answer
  speaker.unlock();
  if (!current) await newThread();
  const attachments = staged.map((a) => (a.upload_id ? { upload_id: a.upload_id } : { kind: a.kind, ref: a.ref }));
  const names = staged.map((a) => a.name);
  const empty = log.querySelector(".empty");
  if (empty) empty.remove();
  log.append(userBubble(text, names));
  input.value = "";
  composerNote.textContent = "";
  staged = [];
  renderChips();
  scroll();
  const turn = await runStream(`/api/threads/${encodeURIComponent(current)}/messages`, { text, attachments });
  if (turn.failKind === "refused" && !input.value) { // not sent: give the words back rather than lose them
    input.value = text;
    composerNote.textContent = "Your message is back in the box: send it again when the problem above is fixed.";
  }
}

// What the microphone heard: into the box to check (after what is typed there), or sent at once when set so.
function heard(text, sendNow) {
  composerNote.textContent = "";
  input.value = input.value.trim() ? `${input.value.trim()} ${text}` : text;
  if (sendNow) send();
  else input.focus();
}

function addUrl(url) {
  if (staged.some((a) => a.ref === url)) return;
  staged.push({ kind: "youtube", ref: url, name: url });
  renderChips();
}

async function addFiles(files) {
  composerNote.textContent = "";
  for (const file of files) {
    const chip = h("span", { class: "chip uploading", text: `${file.name} (uploading…)` });
    chipsEl.append(chip);
    try {
      const stored = await upload(file);
      staged.push({ upload_id: stored.upload_id, name: stored.name, kind: stored.kind });
    } catch (err) {
      composerNote.append(problem(err.message));
    } finally {
      chip.remove();
    }
  }
  renderChips();
}

function renderChips() {
  clear(chipsEl);
  for (const a of staged) {
    chipsEl.append(h("span", { class: `chip ${a.kind}` }, a.name,
      h("button", { type: "button", class: "remove", "aria-label": `Remove ${a.name}`, onclick: () => {
        staged = staged.filter((x) => x !== a);
        renderChips();
      } }, "×")));
  }
}
