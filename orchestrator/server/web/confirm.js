// The confirmation dialog: what the call will do, its side effects, why Jarvis asks, the arguments as editable
// JSON, and Approve / Edit / Deny (a call that may already have happened: Approve again / Skip).
// askAll(pending) resolves with {interrupt_id: answer} for every pending confirmation, or null if dismissed. An
// answer is what the user chose ({answer: approve|edit|deny, args, reason}); the server maps it to the value the
// turn resumes with (orchestrator/answers.py), an in-doubt call's key included.
import { h, json, when } from "./dom.js";

// confirmations.notify: where confirmations were sent to be answered from the phone (each item's `sent`), and where
// a thread's were answered (`answered`: the UI, Telegram, email, the CLI). Used by the chat and the jorbs views.
export function sentTo(items) {
  const sent = items.flatMap((x) => x.sent || []);
  if (!sent.length) return null;
  return h("p", { class: "muted small sent-to" }, "Also sent to " + sent.map((s) => `${s.channel} (${s.to}) ${when(s.at)}`).join(", ") +
    "; the first answer counts.");
}

export function answeredList(answered) {
  if (!(answered || []).length) return null;
  return h("details", { class: "answered" }, h("summary", {}, "Answers given"),
    h("ul", {}, answered.map((a) => h("li", { text: `${a.answer} ${a.tool}: from ${a.via}, ${when(a.at)}` }))));
}

// `signal` (an AbortSignal): the question was answered elsewhere meanwhile (a phone, the CLI): the dialog goes
// and askAll resolves to GONE.
export const GONE = "gone";

function ask(item, index, total, signal) {
  return new Promise((resolve) => {
    const inDoubt = item.kind === "in_doubt";
    const original = json(item.args || {});
    const args = h("textarea", { id: "confirm-args", class: "args", rows: 8, readonly: true, spellcheck: "false" });
    args.value = original;
    const note = h("p", { class: "problem", role: "alert", hidden: !item.error, text: item.error ? `Note: ${item.error}` : "" });
    const reason = h("input", { type: "text", id: "confirm-deny-reason", placeholder: "optional: why not (told to Jarvis)" });

    const dialog = h("dialog", { class: "confirm", role: "dialog", "aria-labelledby": "confirm-title", "aria-describedby": "confirm-summary" });
    const finish = (answer) => {
      dialog.close();
      dialog.remove();
      resolve(answer);
    };
    const approve = () => {
      if (inDoubt || args.value.trim() === original.trim()) return finish({ answer: "approve" });
      let edited;
      try {
        edited = JSON.parse(args.value);
      } catch (err) {
        note.textContent = `The arguments are not valid JSON: ${err.message}`;
        note.hidden = false;
        return;
      }
      if (!edited || typeof edited !== "object" || Array.isArray(edited)) {
        note.textContent = "The arguments must be a JSON object.";
        note.hidden = false;
        return;
      }
      finish({ answer: "edit", args: edited });
    };
    const edit = () => {
      args.readOnly = false;
      args.classList.add("editing");
      args.focus();
      editButton.disabled = true;
      approveButton.textContent = "Approve";
    };
    const deny = () => finish({ answer: "deny", reason: inDoubt ? undefined : reason.value.trim() || undefined });

    const approveButton = h("button", { type: "button", class: "primary", onclick: approve }, inDoubt ? "Approve again" : "Approve");
    const editButton = inDoubt ? null : h("button", { type: "button", onclick: edit }, "Edit");
    const denyButton = h("button", { type: "button", class: "danger", onclick: deny }, inDoubt ? "Skip" : "Deny");

    dialog.append(...[
      h("h2", { id: "confirm-title" },
        inDoubt ? `May have happened: ${item.tool}` : `Confirm: ${item.tool}`,
        total > 1 ? h("span", { class: "count", text: ` (${index + 1} of ${total})` }) : null),
      h("p", { id: "confirm-summary", class: "summary", text: item.summary || "" }),
      item.side_effects && item.side_effects.length
        ? h("p", { class: "effects" }, "Side effects: ", item.side_effects.map((e) => h("span", { class: "badge effect", text: e })))
        : null,
      item.reason ? h("p", { class: "reason" }, h("strong", { text: item.escalated ? "Escalated: " : "Why Jarvis asks: " }), item.reason) : null,
      note,
      sentTo([item]),
      h("label", { for: "confirm-args" }, "Arguments (JSON)"),
      args,
      inDoubt ? null : h("label", { for: "confirm-deny-reason", class: "small" }, "Reason if you deny"),
      inDoubt ? null : reason,
      h("div", { class: "actions" }, approveButton, editButton, denyButton),
    ].filter(Boolean));
    dialog.addEventListener("cancel", (ev) => {
      ev.preventDefault();
      finish(null);
    });
    if (signal) {
      if (signal.aborted) return resolve(GONE);
      signal.addEventListener("abort", () => finish(GONE), { once: true });
    }
    document.body.append(dialog);
    dialog.showModal();
    // Deny has the focus: a stray Enter must never approve a side effect (approving is a deliberate click)
    denyButton.focus();
  });
}

export async function askAll(pending, signal) {
  const answers = {};
  for (let i = 0; i < pending.length; i++) {
    const answer = await ask(pending[i], i, pending.length, signal);
    if (answer === null || answer === GONE) return answer;
    // The question shown (`ref`): an answer to it never answers another one asked meanwhile under the same id.
    answers[pending[i].interrupt_id] = { ...answer, ref: pending[i].ref };
  }
  return answers;
}
