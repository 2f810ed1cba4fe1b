"""jarb_core pieces: the spec, code extraction and static checks, the manifest, the registry, the loader and its
trust tiers through the real ToolExecutor."""

from __future__ import annotations

import pytest

from jarb_core.codecheck import check_module, check_tests, extract_code
from jarb_core.manifest import derive_manifest
from jarb_core.registry import RegistryError
from jarb_core.spec import SpecError, ToolSpec, check_spec, parse_spec
from integrations.base import KNOWN_SIDE_EFFECTS, ToolError, tool_meta
from orchestrator.tools.catalog import ToolCatalog
from orchestrator.core.config import settings_from_dict
from orchestrator.tools.executor import CallContext, ToolExecutor
from orchestrator.jarb.tools import generated_provider, make_factory
from tests.jarb_helpers import FIXED_WORD_COUNT, WORD_COUNT_SPEC, WORD_COUNT_TESTS

# -- spec ------------------------------------------------------------------------------------------------


def test_spec_types_schema_and_signature():
    spec = parse_spec({"spec": {**WORD_COUNT_SPEC, "args": [
        {"name": "text", "type": "string", "description": "t"},
        {"name": "limit", "type": "int | None", "description": "l"},
        {"name": "tags", "type": "list[str]", "description": "g"},
        {"name": "weights", "type": "Dict[str, float]", "description": "w"}]}})
    assert [a.type for a in spec.args] == ["str", "Optional[int]", "List[str]", "Dict[str, float]"]
    schema = spec.args_schema()
    assert schema["required"] == ["text", "tags", "weights"]
    assert schema["properties"]["tags"] == {"type": "array", "items": {"type": "string"}, "description": "g"}
    assert schema["properties"]["limit"]["anyOf"][1] == {"type": "null"}
    assert spec.signature() == ("def word_count(text: str, tags: list[str], weights: dict[str, float], "
                                "limit: int | None = None) -> int:")
    compile(spec.signature() + "\n    pass\n", "<sig>", "exec")  # valid Python


@pytest.mark.parametrize("change, message", [
    ({"name": "WordCount"}, "must be snake_case"),
    ({"name": "json"}, "keyword or module name"),
    ({"name": "test_words"}, "must not start with 'test'"),
    ({"description": "  "}, "description is empty"),
    ({"args": [{"name": "class", "type": "str", "description": "x"}]}, "not a keyword"),
    ({"args": [{"name": "a", "type": "tuple[int]", "description": "x"}]}, "unknown type"),
    ({"args": [{"name": "a", "type": "str", "description": "x"}] * 2}, "argument names repeat"),
    ({"extra_field": 1}, "Extra inputs are not permitted"),
])
def test_bad_specs_say_what_is_wrong(change, message):
    with pytest.raises(SpecError, match=message):
        parse_spec({**WORD_COUNT_SPEC, **change})


def test_spec_context_checks():
    spec = parse_spec({**WORD_COUNT_SPEC, "side_effects": ["todo_write"]})
    with pytest.raises(SpecError, match="unknown side effects todo_write"):
        check_spec(spec, known_effects=KNOWN_SIDE_EFFECTS)
    ok = parse_spec({**WORD_COUNT_SPEC, "side_effects": ["todo_write"], "new_side_effects": {"todo_write": "adds todos"}})
    check_spec(ok, known_effects=KNOWN_SIDE_EFFECTS)
    assert ok.effects() == ["todo_write"]
    with pytest.raises(SpecError, match="taken by an existing tool"):
        check_spec(ok, known_effects=KNOWN_SIDE_EFFECTS, taken_names={"word_count"})
    with pytest.raises(SpecError, match="installed Python module"):
        check_spec(parse_spec({**WORD_COUNT_SPEC, "name": "yaml"}), known_effects=KNOWN_SIDE_EFFECTS)


# -- extraction and static checks ----------------------------------------------------------------------------

CODE = "def word_count(text: str) -> int:\n    return len(text.split())\n"


@pytest.mark.parametrize("reply", [
    f"```python\n{CODE}```",
    f"Sure! Here it is:\n\n```python\n{CODE}```\n\nLet me know if you need more.",
    f"```\n{CODE}```",
    f"```py\n{CODE}",  # cut off before the closing fence
    CODE,
    f"Here is the code:\n{CODE}\nThis splits on whitespace.",
    f"First a helper example:\n```python\nprint('usage')\n```\nAnd the module:\n```python\n{CODE}```",
])
def test_code_is_extracted_from_any_reply_shape(reply):
    assert extract_code(reply, "def word_count(") == CODE


def test_no_code_in_reply():
    assert extract_code("I cannot help with that.") is None
    assert extract_code("") is None


def test_static_checks():
    spec = ToolSpec.model_validate(WORD_COUNT_SPEC)
    assert check_module(CODE, spec) == []
    assert "syntax error at line 1" in check_module("def word_count(text:\n", spec)[0]
    assert "does not define the entry point" in check_module("def count(text):\n    return 1\n", spec)[0]
    assert "missing text; unexpected words" in check_module("def word_count(words):\n    return 1\n", spec)[0]
    assert "without *args" in check_module("def word_count(text, *a, **k):\n    return 1\n", spec)[0]
    assert "not async" in check_module("async def word_count(text):\n    return 1\n", spec)[0]
    assert check_tests(WORD_COUNT_TESTS, spec) == []
    assert any("plain name" in p for p in check_tests("from word_count_v2 import word_count\ndef test_a():\n    pass\n", spec))
    assert any("no test function" in p for p in check_tests("from word_count import word_count\n", spec))


# Trojan Source (CVE-2021-42574): a right-to-left isolate inside a comment moves the `return` the reader sees after
# it into the comment, so the code approved is not the code that runs.
TROJAN = ("def word_count(text: str) -> int:\n"
          "    n = len(text.split())\n"
          "    # \u2067 stop early for the admin \u2066 return 0\u2069 \u2066\n"
          "    return n\n")


def test_code_that_reads_differently_from_how_it_runs_is_refused(settings):
    from jarb_core.testing import TestReport

    spec = parse_spec(WORD_COUNT_SPEC)
    (problem,) = check_module(TROJAN, spec)
    assert "reorder or hide what a reader sees (line 3: \\u2067, line 3: \\u2066" in problem
    assert "hide what a reader sees" in check_tests(WORD_COUNT_TESTS + "\n# all cases\u200b\n", spec)[0]
    factory = make_factory(settings)
    record, report = factory.register_files(WORD_COUNT_SPEC, TROJAN, WORD_COUNT_TESTS, approve_network=lambda s, m: True)
    assert record is None and report.static and "reorder or hide" in report.summary  # refused before running
    with pytest.raises(RegistryError, match="cannot be registered: its module contains characters"):
        factory.register(spec, TROJAN, WORD_COUNT_TESTS, TestReport(passed=True, summary="1 passed"),
                         network_approved=False)  # even with a report that says the tests passed


def test_manifest_must_match_declared_effects():
    code = ("import requests\nfrom pathlib import Path\n\n"
            "def fetch(url: str, out: str):\n    Path(out).write_text(requests.get(url).text)\n")
    manifest = derive_manifest(code)
    assert manifest.effects() == ["fs_write", "network"]
    problems = manifest.contradictions(["network"])
    assert len(problems) == 1 and "fs write (line 5: .write_text(...))" in problems[0] and "'fs_write'" in problems[0]
    assert manifest.contradictions(["network", "fs_write"]) == []
    assert "native code" in derive_manifest("import ctypes\n").contradictions(["network"])[0]
    assert "run time" in derive_manifest("def f(x):\n    return eval(x)\n").contradictions([])[0]
    assert derive_manifest("import importlib.metadata\nopen('x').read()\n").capabilities == []


# -- registry, loader, trust tiers -----------------------------------------------------------------------------


@pytest.fixture
def settings(tmp_path):
    return settings_from_dict({"storage": {"data_dir": str(tmp_path / "data")}, "tools_dir": str(tmp_path / "tools"),
                               "jarb": {"trust_after": 2}, "sandbox": {"wall_timeout_s": 30}}, tmp_path)


def _register(factory, code=FIXED_WORD_COUNT, tests=WORD_COUNT_TESTS, spec=WORD_COUNT_SPEC):
    record, report = factory.register_files(spec, code, tests, approve_network=lambda s, m: True)
    assert record is not None, report.failure_text()
    return record


def test_versions_rollback_and_replay(settings):
    factory = make_factory(settings)
    v1 = _register(factory)
    v2 = _register(factory, code=FIXED_WORD_COUNT.replace("Count the words", "Count words"))
    assert (v1.version, v2.version) == (1, 2)
    assert v1.path.endswith("tools/word_count_v1.py") and v2.tests_path.endswith("tools/tests/test_word_count_v2.py")
    assert [r.version for r in factory.registry.versions("word_count")] == [1, 2]  # the old one stays listed
    assert factory.registry.get("word_count").version == 2
    factory.set_enabled("word_count", False, version=2)
    assert factory.registry.get("word_count").version == 1  # disabling v2 brings v1 back
    factory.set_enabled("word_count", False)
    assert factory.registry.get("word_count") is None
    factory.set_enabled("word_count", True)
    assert factory.registry.get("word_count").version == 2
    with pytest.raises(RegistryError, match="no generated tool nothing"):
        factory.set_enabled("nothing", True)

    report = factory.test(ToolSpec.model_validate(WORD_COUNT_SPEC), FIXED_WORD_COUNT, WORD_COUNT_TESTS)
    spec = ToolSpec.model_validate(WORD_COUNT_SPEC)
    first = factory.register(spec, FIXED_WORD_COUNT, WORD_COUNT_TESTS, report, network_approved=False, request_key="k1")
    again = factory.register(spec, FIXED_WORD_COUNT, WORD_COUNT_TESTS, report, network_approved=False, request_key="k1")
    assert first.id == again.id and first.version == 3  # a replayed registration is the same row


def test_trust_tier_through_the_executor(settings):
    factory = make_factory(settings)
    _register(factory)
    provider = generated_provider(settings)
    executor = ToolExecutor(settings, ToolCatalog([provider]))
    asked = []

    def confirm(request):
        asked.append(request)
        return {"decision": "approve"}

    def call(i: int):
        ctx = CallContext(thread_id="t", key=f"t|m|c{i}|0")
        return executor.execute("word_count", {"text": "a b c"}, ctx, confirm)

    assert call(1).content == "3" and call(2).content == "3"
    assert len(asked) == 2 and "newly generated" in asked[0].reason and asked[0].tool == "word_count"
    record = factory.registry.get("word_count")
    assert record.trust == "policy" and record.confirmed_calls == 2
    assert call(3).content == "3"
    assert len(asked) == 2  # no side effects declared: its policy is auto once trusted

    _register(factory)  # a new version starts over in the confirm tier
    assert call(4).ok and len(asked) == 3
    factory.trust("word_count")
    assert call(5).ok and len(asked) == 3


def test_changed_module_is_refused(settings):
    factory = make_factory(settings)
    record = _register(factory)
    provider = generated_provider(settings)
    assert [t.name for t in provider.list_tools()] == ["word_count"]
    tool = provider.get_tool("word_count")
    from pathlib import Path

    Path(record.path).write_text(FIXED_WORD_COUNT + "\nimport os\n")
    assert provider.list_tools() == []  # no longer offered to the planner
    with pytest.raises(ToolError, match="was changed after it was registered"):
        tool.invoke({"text": "a b"})
    with pytest.raises(ToolError, match="was changed after it was registered"):
        factory.retest("word_count")


def test_provider_is_lazy(settings):
    opened = []
    from jarb_core.loader import GeneratedToolProvider

    provider = GeneratedToolProvider(lambda: opened.append("registry") or make_factory(settings).registry,
                                     lambda: opened.append("sandbox"))
    assert opened == []
    assert provider.list_tools() == [] and opened == ["registry"]


def test_tool_errors_reach_the_model_as_tool_errors(settings):
    factory = make_factory(settings)
    code = ("def safe_div(a: float, b: float) -> float:\n    if b == 0:\n        raise ValueError('b must not be 0')\n"
            "    return a / b\n")
    tests = "from safe_div import safe_div\n\n\ndef test_div():\n    assert safe_div(6, 3) == 2\n"
    spec = {"name": "safe_div", "description": "Divide a by b.", "return_type": "float", "side_effects": [],
            "args": [{"name": "a", "type": "float", "description": "a"}, {"name": "b", "type": "float", "description": "b"}]}
    _register(factory, code, tests, spec)
    factory.trust("safe_div")
    executor = ToolExecutor(settings, ToolCatalog([generated_provider(settings)]))
    ctx = CallContext(thread_id="t", key="t|m|c|0")
    outcome = executor.execute("safe_div", {"a": 1, "b": 0}, ctx, lambda r: "approve")
    assert not outcome.ok and "ValueError: b must not be 0" in outcome.content
    bad = executor.execute("safe_div", {"a": "x"}, CallContext(thread_id="t", key="k2"), lambda r: "approve")
    assert not bad.ok and "bad arguments" in bad.content


def test_fs_write_tool_writes_inside_the_roots_only(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    settings = settings_from_dict({"storage": {"data_dir": str(root / "data")}, "tools_dir": str(root / "tools"),
                                   "fs": {"roots": [str(root)]}, "jarb": {"trust_after": 0}}, tmp_path)
    factory = make_factory(settings)
    code = ("from pathlib import Path\n\n\ndef save_note(path: str, text: str) -> str:\n"
            "    Path(path).write_text(text)\n    return path\n")
    tests = ("from save_note import save_note\n\n\ndef test_save(tmp_path):\n    p = tmp_path / 'n.txt'\n"
             "    assert save_note(str(p), 'hi') == str(p) and p.read_text() == 'hi'\n")
    spec = {"name": "save_note", "description": "Save text to a file.", "return_type": "str",
            "side_effects": ["fs_write"], "args": [{"name": "path", "type": "str", "description": "file"},
                                                  {"name": "text", "type": "str", "description": "content"}]}
    _register(factory, code, tests, spec)
    provider = generated_provider(settings)
    tool = provider.get_tool("save_note")
    assert tool_meta(tool).untrusted_output and tool_meta(tool).side_effects == ("fs_write",)
    assert tool.invoke({"path": str(root / "note.txt"), "text": "hello"}) == str(root / "note.txt")
    assert (root / "note.txt").read_text() == "hello"
    before = sorted(p.name for p in (root / "data").iterdir())
    for target in (outside / "x.txt", root / "data" / "x.txt", root / "tools" / "save_note_v1.py"):
        with pytest.raises(ToolError, match="No such file|Read-only|Permission denied"):
            tool.invoke({"path": str(target), "text": "pwned"})
    assert not (outside / "x.txt").exists()
    assert sorted(p.name for p in (root / "data").iterdir()) == before
    assert "pwned" not in (root / "tools" / "save_note_v1.py").read_text()
    assert provider.list_tools()[0].name == "save_note"  # its module is intact
