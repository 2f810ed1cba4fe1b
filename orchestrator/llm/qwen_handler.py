"""Tool calls in Qwen2's own format for llama-cpp-python's server: `chat_format: jarvis-qwen-tools`.

Qwen2.5 models are trained on their chat template's tool format: the functions as JSON lines inside <tools> in the
system prompt, a call written as `<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`, results given
back inside <tool_response> in a user turn. Through the ChatML handler (llm/llama_handler.py, "message:" or
"functions.<name>:"), Qwen2.5-Coder 0.5B and 1.5B made 0 tool calls in 20 turns: the forced one-token decision came
out "message" every time and the models then wrote the call as prose. Here the prompt is the model's own template
(the GGUF's `tokenizer.chat_template` when it renders <tool_call>: the Qwen2.5-Coder GGUFs carry `QWEN2_TEMPLATE`
exactly), and the model decides in its own words: its first tokens are free, and when they open a call
(`opens_call`: the Coder models start the call's JSON itself, bare or in a ```json fence, rather than the
<tool_call> token, whose probability was 0.000 on the first token of every request tried) it goes on writing
the call as it began. It is kept when it names one of the tools given with arguments that fit that tool's schema
(`fitting_call`, jsonschema); otherwise it is written again under the constraint the ChatML handler uses
(lm-format-enforcer): the name one of the tools, the arguments JSON that fits the schema. Constrained from the start,
every call cost seconds a token (Qwen's vocabulary is 151k tokens, SmolLM2's 49k): 42 tokens took 213 s constrained
and 58 s free, 2 threads at a load average of 8.8 on 2 cores. Any other start is an answer in words, which stops
where the model would open a call after some prose.

After tool results the model may call again (a multi-step task: write, then test), but not a call it already made
for the same request, and at most `MAX_ROUNDS` rounds a request: a small model asked to choose again repeats itself.
A call it already made, or any call once its rounds are spent, is its answer, restated (`restated_answer`):
Jarvis then shows the results.
The prompt carries Qwen's own words for some tools' arguments (llm/family_prompts.py QWEN); the schemas the calls
are checked and constrained against are the ones the request sent.
Loaded only inside the embedded server's child process (llm/chat_handlers.py registers it), as it imports llama_cpp.
"""

from __future__ import annotations

import json
import re
from typing import Any

import jinja2.sandbox
from llama_cpp.llama_chat_format import _convert_completion_to_chat

from orchestrator.llm.family_prompts import QWEN
from orchestrator.llm.llama_handler import (
    _MAX_BLANKS, _states, _then, _tokenizer, _tool_call_response, _tools_of, bounded_schema, cached_prefix,
    with_cached, with_usage)
from orchestrator.llm.prompt_states import PromptStates

NAME = "jarvis-qwen-tools"
OPEN, CLOSE = "<tool_call>", "</tool_call>"
MAX_ROUNDS = 3  # tool rounds for one user message; then the model answers in words

# Qwen2.5's chat template (its tokenizer_config.json), as the Qwen2.5-Coder GGUFs carry it.
QWEN2_TEMPLATE = """\
{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with \
function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within \
<tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\
\\n</tool_call><|im_end|>\\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
    {%- else %}
        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or \
(message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\\n<tool_call>\\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- message.content }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""

_env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
# As the model's trainers rendered it (Hugging Face's tojson): keys in their order, no HTML escapes (jinja's own
# filter sorts the keys and writes "<" as \u003c).
_env.filters["tojson"] = lambda value, indent=None: json.dumps(value, ensure_ascii=False, indent=indent)
# The markup the template gives a meaning: written inside content (a page, a tool's result) it would close the
# result or open a turn or a call of its own. In content it is written with a blank after "<", read as text.
_MARKUP = re.compile(r"<(?=\|)|<(?=/?tool_(?:call|response)>)|<(?=/?tools>)")


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, list):
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return _MARKUP.sub("< ", str(content))


def _arguments(raw: Any) -> Any:
    """A call's arguments as the template writes them (a JSON object, not a string holding one)."""
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return _text(raw)
    return raw


def template_of(metadata: dict[str, Any] | None) -> str:
    """The GGUF's own chat template when it renders tool calls in this format, else Qwen2.5's."""
    own = (metadata or {}).get("tokenizer.chat_template") or ""
    return own if OPEN in own and "tools" in own else QWEN2_TEMPLATE


def render_prompt(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                  template: str = QWEN2_TEMPLATE) -> str:
    """The prompt as the model's template renders it, the messages' text escaped, ready for the assistant's turn."""
    shown = []
    for m in messages:
        one = {"role": m.get("role"), "content": _text(m.get("content"))}
        if m.get("role") == "function":
            one["role"] = "tool"
        calls = m.get("tool_calls")
        if calls:
            one["tool_calls"] = [{"function": {"name": _text((c.get("function") or {}).get("name")),
                                               "arguments": _arguments((c.get("function") or {}).get("arguments"))}}
                                 for c in calls]
        shown.append(one)
    listed = [{"type": "function", "function": t["function"]} for t in tools or []]
    return _env.from_string(template).render(messages=shown, tools=listed or None, add_generation_prompt=True)


def qwen_prompt(messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                metadata: dict[str, Any] | None) -> str:
    """The handler's prompt: the request with Qwen's own words (llm/family_prompts.py), in the GGUF's template."""
    return render_prompt(*QWEN.apply(messages, tools), template_of(metadata))


def parse_call(written: str, names: list[str]) -> tuple[str, str]:
    """(name, arguments) from `{"name": ..., "arguments": ...}` as written under the constraint; when it was cut
    short, the name it began with and the arguments as written (Jarvis's executor answers arguments cut short)."""
    text = written.strip()
    try:
        call = json.loads(text)
        return str(call["name"]), json.dumps(call["arguments"])
    except (ValueError, KeyError, TypeError):
        pass
    found = re.match(r'\{"name": "([^"]*)", "arguments": (.*)', text, re.S)
    if not found:
        return (names[0] if len(names) == 1 else "unnamed"), "{"
    return found.group(1), found.group(2)


_PEEK_TOKENS = 4  # enough for "```json\n{" or "<tool_call>" spelled in pieces
# The 1.5B model also wrote some calls as XML, `<tools>\n  <function name="fs_list_dir" arguments='{"path":
# "projects"}'/>\n</tools>` ("what files are in the projects folder?"), as its tool list is shown.
_XML_OPENINGS = ("<tools>", "<function")
_XML_CALL = re.compile(r"""\s*(?:<tools>\s*)?<function\s+name="([^"]+)"\s+arguments='(.*?)'\s*/?>""", re.S)
_XML_CLOSE = "</tools>"
_FENCED_OBJECT = re.compile(r"```(?:json)?\s*\{")


def opens_call(start: str) -> bool | None:
    """Whether the model's first tokens open a tool call; None when they cannot tell yet (a fence or a "<" that
    may still become one). Qwen2.5-Coder 0.5B and 1.5B never wrote the `<tool_call>` token in the bench's requests:
    they start the call's JSON itself, bare (`{"`) or in a ```json fence, so those open a call too; prose, or a fence
    of code, is an answer."""
    text = start.lstrip()
    if text.startswith((OPEN, "{", *_XML_OPENINGS)) or _FENCED_OBJECT.match(text):
        return True
    if (text.startswith("`") and len(text) < 8) or (text and any(o.startswith(text) for o in (OPEN, *_XML_OPENINGS))):
        return None
    return False


_CLOSING_FENCE = "\n```"  # after the call's JSON; the opening fence starts the text, with no line before it
_CALL_OPENING = re.compile(r"\s*(?:<tool_call>|```(?:json)?)?\s*")


def unwrapped_call(written: str) -> str:
    """What the model wrote when it opened a call on its own, without the <tool_call> or ```json it opened with; a
    call written as XML comes back as the JSON call it names (arguments that are not JSON stay a string, which
    does not fit a schema)."""
    xml = _XML_CALL.match(written)
    if xml:
        try:
            arguments = json.loads(xml.group(2))
        except ValueError:
            arguments = xml.group(2)
        return json.dumps({"name": xml.group(1), "arguments": arguments})
    opening = _CALL_OPENING.match(written)
    return written[opening.end():] if opening else written


def fitting_call(written: str, tools: list[dict[str, Any]]) -> tuple[str, str] | None:
    """(name, arguments) when `written` starts with one JSON call to one of `tools` whose arguments fit its
    parameter schema (as the constraint would have made it), else None."""
    import jsonschema

    try:
        call, _ = json.JSONDecoder().raw_decode(written.strip())
    except ValueError:
        return None
    if not isinstance(call, dict) or set(call) != {"name", "arguments"} or not isinstance(call["arguments"], dict):
        return None
    tool = next((t for t in tools if t["function"]["name"] == call["name"]), None)
    if tool is None:
        return None
    schema = tool["function"].get("parameters") or {"type": "object"}
    try:
        jsonschema.validate(call["arguments"], schema)
    except jsonschema.SchemaError:
        return None
    except jsonschema.ValidationError:
        return None
    return call["name"], json.dumps(call["arguments"])


def restated_answer(arguments: str, completion: dict[str, Any], stream: bool) -> Any:
    """An answer in words that is the call's arguments alone (`{"path": "notes"}`), as the 135M model restates a
    call: llm/model_output.py restates_call tells it apart from an answer, and, with no tool's name in it, it is
    not read back as a call to run again (the whole call, `{"name": ..., "arguments": ...}`, is: run again, it
    came back again, round after round, and the turn ended with no answer)."""
    text = json.dumps(_arguments(arguments), ensure_ascii=False)
    base: dict[str, Any] = {"id": str(completion.get("id") or "restated"), "object": "text_completion",
                            "created": completion.get("created") or 0, "model": completion.get("model") or ""}
    if not stream:
        whole: Any = {**base, "choices": [
            {"text": text, "index": 0, "logprobs": None, "finish_reason": "stop"}], "usage": completion.get("usage")}
        return _convert_completion_to_chat(whole)
    chunks: Any = [{**base, "choices": [{"text": text, "index": 0, "logprobs": None, "finish_reason": None}]},
                   {**base, "choices": [{"text": "", "index": 0, "logprobs": None, "finish_reason": "stop"}]}]

    def chat() -> Any:
        yield from _convert_completion_to_chat(iter(chunks), stream=True)
        if completion.get("usage"):
            yield {"id": "chat" + base["id"], "object": "chat.completion.chunk", "created": base["created"],
                   "model": base["model"], "choices": [], "usage": completion["usage"]}

    return chat()


def _call_constraint(llama: Any, tools: list[dict[str, Any]], max_tokens: int) -> Any:
    """A logits processor under which the model writes `{"name": "<one of tools>", "arguments": <JSON fitting
    that tool's schema>}` (any JSON object where the schema is one the parser cannot read)."""
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
        head = StringParser('{"name": ' + json.dumps(fn["name"]) + ', "arguments": ')
        branches.append(SequenceParser([head, arguments, StringParser("}")]))
    return LogitsProcessorList([build_llamacpp_logits_processor(_tokenizer(llama), UnionParser(branches))])


def calls_since_request(messages: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    """The (name, arguments) of the calls made since the latest user message, and so how many rounds it took."""
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    made = []
    for m in messages[last_user + 1:]:
        for c in m.get("tool_calls") or []:
            fn = c.get("function") or {}
            made.append((fn.get("name"), _arguments(fn.get("arguments"))))
    return made


def rounds_since_request(messages: list[dict[str, Any]]) -> int:
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    return sum(1 for m in messages[last_user + 1:] if m.get("role") == "assistant" and m.get("tool_calls"))


_SAMPLING = ("top_p", "top_k", "min_p", "typical_p", "presence_penalty", "frequency_penalty", "repeat_penalty",
             "tfs_z", "mirostat_mode", "mirostat_tau", "mirostat_eta", "model")


def jarvis_qwen_tools(llama: Any, messages: list[dict[str, Any]], functions: list[dict] | None = None,
                      function_call: Any = None, tools: list[dict] | None = None, tool_choice: Any = None,
                      temperature: float = 0.2, stream: bool = False, stop: str | list[str] | None = None,
                      max_tokens: int | None = None, grammar: Any = None, logprobs: bool | None = None,
                      top_logprobs: int | None = None, **kwargs: Any) -> Any:
    sampling = {k: kwargs[k] for k in _SAMPLING if k in kwargs}
    stops = ([stop] if isinstance(stop, str) else list(stop or [])) + ["<|im_end|>"]
    available = _tools_of(functions, tools)
    if function_call is not None and tool_choice is None:
        tool_choice = function_call if isinstance(function_call, str) else {"function": function_call}
    if tool_choice == "none":
        available = []
    named = (tool_choice.get("function") or {}).get("name") if isinstance(tool_choice, dict) else None
    if named is not None and not any(t["function"]["name"] == named for t in available):
        raise ValueError(f"tool_choice names {named!r}, which is not among the tools given")

    prompt = qwen_prompt(messages, available, getattr(llama, "metadata", None))
    prompt_ids = llama.tokenize(prompt.encode("utf-8"), add_bos=True, special=True)
    states = _states.setdefault(llama, PromptStates())
    states.restore(llama, prompt_ids)
    cached = cached_prefix(llama._input_ids, prompt_ids)

    def answer() -> Any:
        # Asked for words after its results, a Qwen Coder model may write its call again as JSON: Jarvis's graph
        # then shows the results instead (chat/planner.py results_instead_of_restated_call).
        processors = kwargs.get("logits_processor")
        chat = _convert_completion_to_chat(
            llama.create_completion(prompt=prompt, temperature=temperature, stream=stream, stop=stops + [OPEN],
                                    max_tokens=max_tokens, grammar=grammar, logits_processor=processors,
                                    logprobs=top_logprobs if logprobs else None, **sampling),
            stream=stream)
        if not stream:
            states.save(llama)
            return {**chat, "usage": with_cached(chat.get("usage"), cached)}
        return _then(with_usage(chat, len(prompt_ids), cached), lambda: states.save(llama))

    if not available:
        return answer()
    opened_itself = tool_choice not in ("required",) and named is None
    if opened_itself:
        # The model's own first tokens decide: a call opened (see `opens_call`) or an answer in words.
        def written(n: int) -> str:
            return llama.create_completion(prompt=prompt, temperature=temperature, stream=False, max_tokens=n,
                                           **sampling)["choices"][0]["text"]

        first = written(1)
        if not opens_call(first if opens_call(first) is not None else written(_PEEK_TOKENS)):
            return answer()
        made = calls_since_request(messages)
        if rounds_since_request(messages) >= MAX_ROUNDS and made:
            # Its rounds spent, it opens one more call: asked for words then, it wrote that call as JSON, which
            # Jarvis read back as a call and ran, until the planner's step limit ("what time is it?" took 12
            # steps). Its last call restated is its answer, and Jarvis shows the results.
            return restated_answer(json.dumps(made[-1][1]), {}, stream)
    chosen = [t for t in available if named is None or t["function"]["name"] == named]
    budget = max_tokens or 256
    call_prompt, call_stops = f"{prompt}{OPEN}\n", stops + [CLOSE, "```"]
    # Written freely first, kept only when it fits; else again under the constraint (see the module's docstring).
    # A call the model opened itself goes on as it began (in a ```json fence, bare, or in <tool_call>): made to
    # write after an opened <tool_call>, a token it never writes itself, Qwen2.5-Coder 0.5B ended its turn at once
    # and every call went the constrained way (a minute or more, where the free one takes seconds).
    free_prompt, free_stops = ((prompt, stops + [CLOSE, _CLOSING_FENCE, _XML_CLOSE]) if opened_itself
                               else (call_prompt, call_stops))
    completion = llama.create_completion(prompt=free_prompt, temperature=temperature, stream=False, stop=free_stops,
                                         max_tokens=budget, **sampling)
    fitting = fitting_call(unwrapped_call(completion["choices"][0]["text"]), chosen)
    if fitting is None:
        completion = llama.create_completion(
            prompt=call_prompt, temperature=temperature, stream=False, stop=call_stops, max_tokens=budget,
            logits_processor=_call_constraint(llama, chosen, budget), **sampling)
    states.save(llama)
    name, arguments = fitting or parse_call(completion["choices"][0]["text"], [t["function"]["name"] for t in chosen])
    if tool_choice != "required" and named is None and (name, _arguments(arguments)) in calls_since_request(messages):
        # The same call again, its result in the prompt already: asked for words then, the model wrote this call
        # again as JSON with more JSON after it (the listing, a schema made up). The call restated is the answer,
        # which Jarvis's graph shows the results for (chat/planner.py results_instead_of_restated_call).
        return restated_answer(arguments, {**completion, "usage": with_cached(completion.get("usage"), cached)},
                               stream)
    return _tool_call_response(name, arguments, {**completion, "usage": with_cached(completion.get("usage"), cached)},
                               stream)

