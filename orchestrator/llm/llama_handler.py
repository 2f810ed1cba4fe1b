"""A tool-calling chat handler for ChatML models in llama-cpp-python's server: `chat_format: jarvis-chatml-tools`.

Loaded only inside the embedded server's child process (orchestrator/llm/embedded.py registers it before the server
starts); it imports llama_cpp, which the rest of Jarvis never does.

Why not the library's `chatml-function-calling` (llama-cpp-python 0.3.x), measured with SmolLM2-135M here:
  - without `tool_choice` in the request (LangChain sends none; OpenAI's default is "auto") it drops the tools;
  - with "auto" and `stream: true` it raises "Automatic streaming tool choice is not supported";
  - with "auto" a plain answer is generated under a grammar that only allows a function name or the end token,
    so every answer in words comes back empty;
  - tool results (`role: tool`) are left out of the prompt, so the model never sees what a tool returned;
  - its grammars cost about 2 s per sampled token on this machine (SmolLM2's vocabulary is 49k tokens).
This handler uses the same prompt convention ("message:" or "functions.<name>:" and JSON arguments). One token,
restricted to "message" or "functions", decides; a call is then written under a constraint: its name one of the
tools given, its arguments JSON that fits that tool's schema (lm-format-enforcer's character-level parsers, applied
as a logits processor over a prefix tree of the vocabulary built once per model). That costs milliseconds a token
where llama.cpp's grammar sampler cost 2 s here: llama-cpp-python applies the grammar before any other sampler, so
each token it checks all 49k tokens of SmolLM2's vocabulary against the grammar's stacks. Without the constraint
the model wrote calls as Python in code fences, unknown names and half objects (0 valid calls in 11 tries of
`make demo`). A 135M model mostly picks the first function listed, so the list is ordered by how many of the
request's words each tool's name and description share (ties keep the planner's order): a heuristic for a
tiny model, not a router; the model still decides whether to call and what. A streamed call
carries its name once, in its first chunk. The function list sits just before the user's latest message:
llama.cpp reuses the evaluated prompt only up to the first token that differs from its previous call, and the
list is what changes most between turns (with more than planner.max_bound_tools tools, Jarvis binds each turn's
best matches). With the list first in the system prompt, every turn read the whole conversation again (measured
in the fuzz run of tests/test_real_model.py: 12 tokens reused, 500-1400 read again at about 150 tokens a second
on 2 cores, so a thread's turns got slower as it grew); placed here, a turn's first call reads the previous
turn, the list and the request (180-560 tokens in that run, however long the thread), and its call after a tool
result reads only the call and the result (about 110). Then, while the server still holds the thread's prompt,
the list stays where the first request put it, the latest request's best matches are named in one line before
it, and tools bound since are listed there too, as more functions (`plan_layout`): a turn reads only its own
messages ([25]: the cached share of the prompt went from 17-85% a turn to above 80% over bench/prompt.py's 10-turn
thread with every tool bound). Before a request, the state of a prompt evaluated earlier (another thread's, a
jorb's) is restored when it holds more of the prompt than the server does (llm/prompt_states.py). The usage the
handler reports says how many prompt tokens were found cached (`prompt_tokens_details.cached_tokens`).
One rule of its own: after tool results the model answers in words (one round of tool calls per user message),
because a small model asked to choose again calls a tool again, every time.
"""

from __future__ import annotations

import json
import re
import time
import uuid
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import jinja2.sandbox
from llama_cpp.llama_chat_format import _convert_completion_to_chat, register_chat_completion_handler

from orchestrator.llm.context_block import own_words
from orchestrator.llm.prompt_states import PromptStates, common_prefix
from orchestrator.llm.tool_schema import describe_line as _describe, first_sentence as _first_sentence

NAME = "jarvis-chatml-tools"

_LIST_HEAD = "You can call these functions:"
_LIST_START = "<|im_start|>system\n" + _LIST_HEAD
_LIST_TAIL = ("To answer the user in words, write 'message:' and then your answer. To call a function, write\n"
              "'functions.<name>:' and then its arguments as JSON on the next line. After a function's result, answer "
              "the user.")
_MORE_HEAD = "You can also call these functions:"
_TEMPLATE = """\
{%- for message in messages -%}
{%- for block in blocks.get(loop.index0, ()) -%}
<|im_start|>system
{{ text(block) }}<|im_end|>
{% endfor -%}
{%- if message.role == 'system' -%}
<|im_start|>system
{{ text(message.content) }}<|im_end|>
{% elif message.role == 'user' -%}
<|im_start|>user
{{ text(message.content) }}<|im_end|>
{% elif message.role == 'assistant' -%}
<|im_start|>assistant
{% if message.tool_calls -%}
{% for call in message.tool_calls %}functions.{{ call.function.name }}:
{{ text(call.function.arguments) }}
{% endfor -%}
{%- else -%}
{% if tools %}message:
{% endif %}{{ text(message.content) }}
{%- endif %}<|im_end|>
{% elif message.role == 'tool' or message.role == 'function' -%}
<|im_start|>tool
{{ text(message.content) }}<|im_end|>
{% endif -%}
{%- endfor -%}
{%- for block in blocks.get(messages|length, ()) -%}
<|im_start|>system
{{ text(block) }}<|im_end|>
{% endfor -%}
{%- if end -%}
<|im_start|>assistant
{% endif -%}"""


def _text(content: Any) -> str:
    """A message's text as the prompt holds it. The prompt is tokenized with its special tokens read as such (the
    template's own <|im_start|> and <|im_end|>), so the same strings inside a page, a tool result or a document
    would start a turn of their own ("<|im_end|><|im_start|>user ...": the user's word, written by a page): in
    content they are written `< |im_start|>`, text the model reads as text."""
    if content is None:
        return ""
    if isinstance(content, list):
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content).replace("<|", "< |")


_env = jinja2.sandbox.ImmutableSandboxedEnvironment(autoescape=False, trim_blocks=False, lstrip_blocks=False,
                                                    keep_trailing_newline=True)  # the model writes after "assistant\n"
_template = _env.from_string(_TEMPLATE)


@dataclass(frozen=True)
class Layout:
    """Where a prompt puts its system blocks (function lists, lines naming a request's best matches): `blocks[i]`
    go just before message i (`i == len(messages)`: after the last one). `listed` names the functions its lists
    describe. The handler keeps the last request's layout, to keep it where the server still holds it."""
    blocks: dict[int, tuple[str, ...]] = field(default_factory=dict)
    listed: frozenset[str] = frozenset()


def render_prompt(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                  cached: Callable[[str], bool] | None = None, previous: Sequence[Layout] = ()) -> str:
    """The prompt, its function list placed where the server's cache is reused most (`plan_layout`)."""
    return render_layout(messages, plan_layout(messages, tools, cached, previous), bool(tools))


def render_layout(messages: list[dict[str, Any]], layout: Layout, tools: bool, *, end: bool = True) -> str:
    """The prompt text: the messages with the layout's blocks; `end`: then the assistant's turn, which the model
    writes."""
    return _template.render(messages=messages, blocks=layout.blocks, tools=tools, text=_text, end=end)


def plan_layout(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                cached: Callable[[str], bool] | None = None, previous: Sequence[Layout] = ()) -> Layout:
    """Where the function list goes. Without `cached` (a function saying whether the server's evaluated tokens
    start with a text) it sits just before the latest user message, ordered for that request (see the module's
    docstring).

    With it, what the server still holds stays as it is:
    - an earlier request's layout (`previous`, the newest first: the server holds several callers' prompts,
      llm/prompt_states.py), the first whose prompt the server holds up to its last block and the thread's first
      request: later steps and requests keep it, and the functions its lists do not describe yet
      (a thread binds a new tool: chat/tool_binding.py) are listed just before the latest request, as more
      functions. Moving the whole list there instead made the server read the conversation since its old place
      again ([25]: a small window binds each request's best matches, so a thread's tools grow on many turns).
    - else, from a thread's second request on, an earlier request's place for the list, when the server holds the
      prompt up to there and the tools are the same (a layout made before this process held one);
    - else before the first request, when nothing past the system text is cached anyway (the next turns gain).
    Each later request's best matches are named in one short line just before it (where the list used to put
    them first), kept in later turns. Otherwise the list goes next to the latest request."""
    if not tools:
        return Layout()
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    if cached is not None:
        for earlier in previous:
            kept = _keep_layout(messages, tools, users, cached, earlier)
            if kept is not None:
                return kept
    if cached is not None and len(users) > 1:
        for at in reversed(users[:-1][-_PLACES:]):  # where an earlier request of this thread put the list
            layout = _list_at(messages, tools, at)
            if cached(_through_blocks(messages, layout, at)):
                return layout
        # When the server holds neither the conversation without a list before the first request nor a list
        # there (another thread's call came in between, or the summary changed), the list's place costs nothing
        # now, and before the first request it saves the next turns.
        first = users[0]
        plain = render_layout(messages[:first + 1], Layout(), False)
        head = render_layout(messages[:first], _list_at(messages, tools, first), True, end=False)
        if not (cached(plain) or cached(head[:head.index(_LIST_START) + len(_LIST_START)])):
            return _list_at(messages, tools, first)
    return _list_at(messages, tools, users[-1] if users else 0)


_PLACES = 32  # earlier requests looked at for the list's place (each look tokenizes the prompt up to it)


def _through_blocks(messages: list[dict[str, Any]], layout: Layout, at: int) -> str:
    """The prompt up to the end of the blocks before message `at`."""
    upto = Layout({i: b for i, b in layout.blocks.items() if i <= at}, layout.listed)
    return render_layout(messages[:at], upto, True, end=False)


def _keep_layout(messages: list[dict[str, Any]], tools: list[dict[str, Any]], users: list[int],
                 cached: Callable[[str], bool], previous: Layout) -> Layout | None:
    """`previous` with what the latest request adds (see `plan_layout`), or None when the server no longer holds
    the prompt up to its last block and the thread's first request (another thread's list, ordered for another
    request, is not one to keep: a small model mostly calls the first function listed)."""
    if not previous.blocks or not users or max(previous.blocks) > len(messages):
        return None
    last, latest = max(previous.blocks), users[-1]
    if not cached(_through_blocks(messages, previous, max(last, users[0] + 1))):
        return None
    blocks = dict(previous.blocks)
    new = [t for t in tools if t["function"]["name"] not in previous.listed]
    listed = previous.listed | {t["function"]["name"] for t in new}
    # After the last block: before the latest request when the server has not read it yet (a new request), else
    # after the newest message (a later step of the same request).
    same_request = latest <= last and cached(render_layout(messages[:latest + 1], previous, True, end=False))
    at = len(messages) if same_request else latest
    added: list[str] = []
    request = own_words(_text(messages[latest].get("content")))
    if new:
        added.append(f"{_MORE_HEAD}\n{_listing(rank_for_request(new, request))}".rstrip("\n"))
    hint = _hint(tools, request) if at == latest else None
    if hint:
        added.append(hint)
    if added:
        blocks[at] = blocks.get(at, ()) + tuple(added)
    return Layout(blocks, listed)


def _listing(tools: list[dict[str, Any]]) -> str:
    """One line a function, as the lists show them."""
    return "".join(f"functions.{t['function']['name']}: {_describe(t)}\n" for t in tools)


def _list_at(messages: list[dict[str, Any]], tools: list[dict[str, Any]], at: int) -> Layout:
    """The function list just before message `at`, ordered for that request, and the best matches of each later
    request named before it."""
    # ranked by the user's own words: the context Jarvis adds after them (llm/context_block.py) names tools too
    request = own_words(_text(messages[at].get("content"))) if 0 <= at < len(messages) else ""
    blocks: dict[int, tuple[str, ...]] = {
        at: (f"{_LIST_HEAD}\n{_listing(rank_for_request(tools, request))}\n{_LIST_TAIL}",)}
    for i, m in enumerate(messages):
        if i > at and m.get("role") == "user":
            hint = _hint(tools, own_words(_text(m.get("content"))))
            if hint:
                blocks[i] = (hint,)
    return Layout(blocks, frozenset(t["function"]["name"] for t in tools))


_WORD = re.compile(r"[a-z0-9]+")
_STOP = {"the", "and", "for", "you", "your", "what", "this", "that", "with", "from", "are", "can", "please", "all",
         "its", "into", "any", "one", "not", "how", "who", "has", "have", "was", "there", "them", "then", "given"}


def _stems(text: str) -> set[str]:
    """Words of three letters or more, cut to four letters ("files" and "file", "writes" and "write" meet)."""
    return {w[:4] for w in _WORD.findall(text.lower().replace("_", " ")) if len(w) > 2 and w not in _STOP}


def rank_for_request(tools: list[dict[str, Any]], request: str) -> list[dict[str, Any]]:
    """The tools, those sharing most words with the request first (a word of the name counts twice: "read" in
    fs_read_text says more than "read" in a description); ties keep their order."""
    wanted = _stems(request)
    if not wanted:
        return list(tools)

    return sorted(tools, key=lambda t: -_shares(t, request, wanted))


def _hint(tools: list[dict[str, Any]], request: str) -> str | None:
    """The request's best matches (up to three tools sharing its words), named in one line."""
    matches = [t["function"]["name"] for t in rank_for_request(tools, request)[:3] if _shares(t, request)]
    return ("Functions for this request: " + ", ".join(f"functions.{n}" for n in matches) + ".") if matches else None


def _shares(tool: dict[str, Any], request: str, wanted: set[str] | None = None) -> int:
    wanted = _stems(request) if wanted is None else wanted
    fn = tool.get("function") or {}
    return 2 * len(wanted & _stems(fn.get("name", ""))) + len(wanted & _stems(_first_sentence(fn.get("description") or "")))


def _tools_of(functions: list[dict] | None, tools: list[dict] | None) -> list[dict[str, Any]]:
    if functions:
        return [{"type": "function", "function": f} for f in functions]
    return [t for t in tools or [] if (t.get("function") or {}).get("name")]


def _only_tokens(allowed: set[int]) -> Any:
    """A logits processor that leaves only `allowed` tokens possible."""
    import numpy as np

    def process(_input_ids: Any, scores: Any) -> Any:
        masked = np.full_like(scores, -np.inf)
        index = list(allowed)
        masked[index] = scores[index]
        return masked

    from llama_cpp import LogitsProcessorList

    return LogitsProcessorList([process])


# Per model (the server process holds one), held weakly by the model object, so a model loaded later at the same
# address never gets another model's: the latest requests' layouts, the newest first (where their blocks are, so a
# next request can keep them where the server's cache or a saved state still holds them: `plan_layout`), and the
# prompts evaluated before the last one (llm/prompt_states.py).
_layouts: weakref.WeakKeyDictionary[Any, list[Layout]] = weakref.WeakKeyDictionary()
LAYOUTS_KEPT = 8  # about as many prompts as the saved states hold
_states: weakref.WeakKeyDictionary[Any, PromptStates] = weakref.WeakKeyDictionary()


# The vocabulary's prefix tree for lm-format-enforcer, built once per model (about a second for 49k tokens); the
# server process holds one model.
_tokenizer_data: dict[int, Any] = {}
# Blanks in a row the arguments may hold between JSON tokens: with more, a small model padded a finished call
# with newlines until max_tokens.
_MAX_BLANKS = 1


def _tokenizer(llama: Any) -> Any:
    from lmformatenforcer import TokenEnforcerTokenizerData
    from lmformatenforcer.integrations.llamacpp import build_token_enforcer_tokenizer_data

    data = _tokenizer_data.get(id(llama))
    if data is None:
        built = build_token_enforcer_tokenizer_data(llama)
        # Tokens that decode to nothing (<|endoftext|>, <|im_end|> and the other specials: 62 in SmolLM2) never
        # break a character-level parser, so they stayed allowed and the model could end a call right after its
        # name (a call to fs_read_text with no arguments at all). Only the end-of-text token may end a call, and
        # only where the arguments are complete.
        data = _tokenizer_data[id(llama)] = TokenEnforcerTokenizerData(
            [t for t in built.regular_tokens if t[1]], built.decoder, built.eos_token_id, built.use_bitmask,
            built.vocab_size)
    return data


# An integer range this small is written as the list of its values: the parser checks JSON's shape, not
# numeric bounds (find_tools got limit 256 where at most 25 is allowed).
_MAX_ENUMERATED_RANGE = 100


def bounded_schema(schema: Any, max_chars: int) -> Any:
    """The schema as the constraint can hold it: `maxLength` on every string that has none (a small model writing
    a path or a note can run on until max_tokens cuts the call in the middle of a string, and a cut call is no
    call), and a small integer range as an enum of its values."""
    if isinstance(schema, list):
        return [bounded_schema(s, max_chars) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: bounded_schema(v, max_chars) for k, v in schema.items()}
    if out.get("type") == "string" and "maxLength" not in out:
        out["maxLength"] = max_chars
    low, high = out.get("minimum"), out.get("maximum")
    if (out.get("type") == "integer" and "enum" not in out and isinstance(low, int) and isinstance(high, int)
            and 0 <= high - low <= _MAX_ENUMERATED_RANGE):
        out["enum"] = list(range(low, high + 1))
    return out


def _call_constraint(llama: Any, tools: list[dict[str, Any]], max_tokens: int) -> Any:
    """A logits processor under which the model writes `<name>:\n<arguments>` for one of `tools`, the arguments
    JSON that fits the tool's parameter schema (any JSON object where the schema is one the parser cannot read).
    Strings get at most `max_tokens` characters (about a quarter of the budget, at ~4 characters a token)."""
    from llama_cpp import LogitsProcessorList
    from lmformatenforcer import CharacterLevelParserConfig, JsonSchemaParser, SequenceParser, StringParser, UnionParser
    from lmformatenforcer.integrations.llamacpp import build_llamacpp_logits_processor

    config = CharacterLevelParserConfig(max_consecutive_whitespaces=_MAX_BLANKS)
    branches = []
    for tool in tools:
        fn = tool["function"]
        schema = bounded_schema(fn.get("parameters") or {"type": "object", "properties": {}}, max(16, max_tokens))
        try:
            arguments = JsonSchemaParser(schema, config=config)
        except Exception:  # noqa: BLE001 - a schema the parser does not read: any object, checked by Jarvis
            arguments = JsonSchemaParser({"type": "object"}, config=config)
        branches.append(SequenceParser([StringParser(f"{fn['name']}:\n"), arguments]))
    return LogitsProcessorList([build_llamacpp_logits_processor(_tokenizer(llama), UnionParser(branches))])


def split_call(written: str, names: list[str]) -> tuple[str, str]:
    """(name, arguments) from `<name>:\n<arguments>` as written under the constraint; the arguments are the first
    JSON value when it is complete, else what was written (Jarvis's executor answers arguments cut short)."""
    name, _, rest = written.partition(":")
    name = name.strip() or (names[0] if len(names) == 1 else "unnamed")
    rest = rest.strip()
    try:
        _, end = json.JSONDecoder().raw_decode(rest)
        return name, rest[:end]
    except ValueError:
        return name, rest


def _tool_call_response(name: str, arguments: str, completion: dict[str, Any], stream: bool) -> Any:
    call_id = f"call_{uuid.uuid4().hex[:16]}"
    created, model = completion.get("created", int(time.time())), completion.get("model", "")
    chat_id = "chat" + str(completion.get("id", uuid.uuid4().hex))
    if not stream:
        return {
            "id": chat_id, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": None, "message": {
                "role": "assistant", "content": None,
                "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}],
            }}],
            "usage": completion.get("usage"),
        }

    def chunks() -> Iterator[dict[str, Any]]:
        base = {"id": chat_id, "object": "chat.completion.chunk", "created": created, "model": model}
        deltas = [
            ({"role": "assistant", "content": None, "tool_calls": [
                {"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}]}, None),
            ({"tool_calls": [{"index": 0, "function": {"arguments": arguments}}]}, None),
            ({}, "tool_calls"),
        ]
        for delta, finish in deltas:
            yield {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
        if completion.get("usage"):
            yield {**base, "choices": [], "usage": completion["usage"]}

    return chunks()


def cached_prefix(evaluated: Any, prompt_ids: list[int]) -> int:
    """How many of the prompt's first tokens the model has evaluated already (llama.cpp keeps the last prompt's
    KV cache and evaluates only from the first token that differs, as `Llama.generate` does)."""
    return min(common_prefix(evaluated, prompt_ids), max(0, len(prompt_ids) - 1))  # the last is read again


def _then(chunks: Iterator[dict[str, Any]], done: Callable[[], None]) -> Iterator[dict[str, Any]]:
    """The chunks, then `done()` once the last was sent (not when the client left before)."""
    yield from chunks
    done()


def with_cached(usage: dict[str, Any] | None, cached: int) -> dict[str, Any] | None:
    """OpenAI's usage with `prompt_tokens_details.cached_tokens`: how much of the prompt the server did not read
    again (LangChain reports it as `input_token_details.cache_read`; bench/prompt.py measures it)."""
    if not usage:
        return usage
    return {**usage, "prompt_tokens_details": {"cached_tokens": min(cached, int(usage.get("prompt_tokens") or 0))}}


def with_usage(chunks: Iterator[dict[str, Any]], prompt_tokens: int, cached: int = 0) -> Iterator[dict[str, Any]]:
    """A streamed answer closed by OpenAI's usage chunk (no choices, the counts), which llama-cpp-python's server
    does not send: without it every turn on the built-in model showed 0/0 tokens in `jarvis runs`. The server
    streams one token a chunk, so the chunks that carry text are counted."""
    written = 0
    last: dict[str, Any] | None = None
    for chunk in chunks:
        last = chunk
        written += sum(1 for c in chunk.get("choices") or [] if (c.get("delta") or {}).get("content"))
        yield chunk
    if last is not None:
        yield {"id": last.get("id"), "object": "chat.completion.chunk", "created": last.get("created"),
               "model": last.get("model"), "choices": [],
               "usage": with_cached({"prompt_tokens": prompt_tokens, "completion_tokens": written,
                                     "total_tokens": prompt_tokens + written}, cached)}


@register_chat_completion_handler(NAME)
def jarvis_chatml_tools(
    llama: Any,
    messages: list[dict[str, Any]],
    functions: list[dict] | None = None,
    function_call: Any = None,
    tools: list[dict] | None = None,
    tool_choice: Any = None,
    temperature: float = 0.2,
    top_p: float = 0.95,
    top_k: int = 40,
    min_p: float = 0.05,
    typical_p: float = 1.0,
    stream: bool = False,
    stop: str | list[str] | None = None,
    response_format: Any = None,
    max_tokens: int | None = None,
    presence_penalty: float = 0.0,
    frequency_penalty: float = 0.0,
    repeat_penalty: float = 1.1,
    tfs_z: float = 1.0,
    mirostat_mode: int = 0,
    mirostat_tau: float = 5.0,
    mirostat_eta: float = 0.1,
    model: str | None = None,
    logits_processor: Any = None,
    grammar: Any = None,
    logprobs: bool | None = None,
    top_logprobs: int | None = None,
    **kwargs: Any,
) -> Any:
    stops = ([stop] if isinstance(stop, str) else list(stop or [])) + ["<|im_end|>"]
    sampling = dict(top_p=top_p, top_k=top_k, min_p=min_p, typical_p=typical_p, presence_penalty=presence_penalty,
                    frequency_penalty=frequency_penalty, repeat_penalty=repeat_penalty, tfs_z=tfs_z,
                    mirostat_mode=mirostat_mode, mirostat_tau=mirostat_tau, mirostat_eta=mirostat_eta, model=model,
                    logits_processor=logits_processor)
    available = _tools_of(functions, tools)
    if function_call is not None and tool_choice is None:
        tool_choice = function_call if isinstance(function_call, str) else {"function": function_call}
    if tool_choice == "none":
        available = []
    def tokens(text: str) -> list[int]:
        return llama.tokenize(text.encode("utf-8"), add_bos=True, special=True)

    states = _states.setdefault(llama, PromptStates())

    def evaluated(head: str) -> bool:  # held by the context, or by a state it can restore
        ids = tokens(head)
        return max(common_prefix(llama._input_ids, ids), states.longest(ids)) >= len(ids) - 1

    recent = _layouts.setdefault(llama, [])
    layout = plan_layout(messages, available, cached=evaluated, previous=recent)
    recent.insert(0, layout)
    del recent[LAYOUTS_KEPT:]
    prompt = render_layout(messages, layout, bool(available))
    # Before anything of this request is evaluated: the part of the prompt a previous call left cached.
    prompt_ids = tokens(prompt)
    states.restore(llama, prompt_ids)
    cached = cached_prefix(llama._input_ids, prompt_ids)

    def save() -> None:
        states.save(llama)

    def answer(prefix: str) -> Any:
        chat = _convert_completion_to_chat(
            llama.create_completion(prompt=prompt + prefix, temperature=temperature, stream=stream, stop=stops,
                                    max_tokens=max_tokens, grammar=grammar,
                                    logprobs=top_logprobs if logprobs else None, **sampling),
            stream=stream,
        )
        if not stream:
            save()
            return {**chat, "usage": with_cached(chat.get("usage"), cached)}
        return _then(with_usage(chat, len(llama.tokenize((prompt + prefix).encode("utf-8"), add_bos=True,
                                                         special=True)), cached), save)

    if not available:
        return answer("")

    if isinstance(tool_choice, dict):  # a function named by the caller
        name = (tool_choice.get("function") or {}).get("name")
        if not any(t["function"]["name"] == name for t in available):
            raise ValueError(f"tool_choice names {name!r}, which is not among the tools given")
    elif tool_choice != "required" and messages and messages[-1].get("role") in ("tool", "function"):
        # After a round of tool results the model answers in words. A small model left to choose calls a tool
        # again every time (measured with SmolLM2-135M: 10 turns out of 10 ended at Jarvis's step limit).
        return answer("message:\n")
    else:
        # One sampled token decides: the model's next token restricted to the first token of "message" or of
        # "functions" (a logits mask).
        first = {word: llama.tokenize(word.encode(), add_bos=False, special=False)[0] for word in ("message", "functions")}
        decision = llama.create_completion(
            prompt=prompt, temperature=temperature, stream=False, max_tokens=1,
            logits_processor=_only_tokens(set(first.values())),
            **{k: v for k, v in sampling.items() if k != "logits_processor"},
        )["choices"][0]["text"]
        if tool_choice != "required" and not decision.strip().startswith("functions"):
            return answer("message:\n")
        name = None
    # The call itself, under the constraint: one of the tools given (the one named by tool_choice, if any), its
    # arguments fitting its schema.
    chosen = [t for t in available if name is None or t["function"]["name"] == name]
    budget = max_tokens or 256
    completion = llama.create_completion(
        prompt=prompt + "functions.", temperature=temperature, stream=False, stop=stops,
        max_tokens=budget, logits_processor=_call_constraint(llama, chosen, budget),
        **{k: v for k, v in sampling.items() if k != "logits_processor"},
    )
    save()
    name, arguments = split_call(completion["choices"][0]["text"], [t["function"]["name"] for t in chosen])
    return _tool_call_response(name, arguments, {**completion, "usage": with_cached(completion.get("usage"), cached)},
                               stream)
