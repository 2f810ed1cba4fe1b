"""No program Jarvis starts outside the sandbox gets Jarvis's secrets: every process start in the code goes
through core/child_env.child_environment (or is listed below with why it need not), and the programs that parse
outside content (ffmpeg, eSpeak NG, the embedded model server, a supervised model server) are shown to get none."""

from __future__ import annotations

import ast
import json
import os
import sys
import time
from pathlib import Path

import pytest

from orchestrator.core.child_env import child_environment

REPO = Path(__file__).resolve().parent.parent
CODE = ("orchestrator", "integrations", "jarb_core", "mcp", "tools")

STARTS = {("subprocess", n) for n in ("Popen", "run", "call", "check_call", "check_output")} | {
    ("asyncio", "create_subprocess_exec"), ("asyncio", "create_subprocess_shell"), ("anyio", "open_process"),
    ("anyio", "run_process"), ("os", "system"), ("os", "popen"), ("pty", "spawn")} | {
    ("os", n) for n in ("execv", "execve", "execvp", "execvpe", "execl", "execle", "execlp", "execlpe", "spawnv",
                        "spawnve", "spawnvp", "spawnvpe", "posix_spawn", "posix_spawnp")}

# (file, function): why its process start need not take child_environment.
NOT_THROUGH_THE_HELPER = {
    ("orchestrator/cli/service_cmd.py", "run"): "`jarvis run` itself, which needs its secrets",
    ("orchestrator/core/supervisor.py", "run"): "its env defaults to child_environment(); the callers are checked",
    ("orchestrator/mcp/stdio.py", "bounded_stdio_client"): "the MCP SDK's short list (HOME, PATH, USER...) and the "
                                                           "env the user configured for that server",
    ("integrations/pdf_reader.py", "_new_child"): "PATH and LC_ALL only (pdf_reader._child_environment)",
    ("jarb_core/sandbox.py", "_probe"): "a sandbox plan's environment (the sandbox backend builds it)",
    ("jarb_core/sandbox_process.py", "__init__"): "a sandbox plan's environment (the sandbox backend builds it)",
    ("jarb_core/_limits_exec.py", "main"): "runs inside a sandbox plan, whose environment it keeps",
    ("jarb_core/_idmap_exec.py", "main"): "runs inside a sandbox plan, whose environment it keeps",
}


def _starts(tree: ast.AST):
    """(enclosing function's name, the functions it sits in, call) for each process start in a module."""
    def walk(node: ast.AST, stack: tuple[ast.AST, ...]):
        for child in ast.iter_child_nodes(node):
            inner = (*stack, child) if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else stack
            if isinstance(child, ast.Call):
                f = child.func
                if (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and (f.value.id, f.attr) in STARTS
                        or isinstance(f, ast.Name) and f.id == "Supervisor"):
                    yield (stack[-1].name if stack else "<module>"), stack, child  # type: ignore[attr-defined]
            yield from walk(child, inner)
    yield from walk(tree, ())


def _through_the_helper(call: ast.Call, functions: tuple[ast.AST, ...]) -> bool:
    env = next((k.value for k in call.keywords if k.arg == "env"), None)
    if env is None:
        return False
    text = ast.unparse(env)
    if isinstance(env, ast.Name):  # env = child_environment(...) above, in the function or one around it
        text += " ".join(ast.unparse(a.value) for function in functions for a in ast.walk(function)
                         if isinstance(a, ast.Assign) and any(isinstance(t, ast.Name) and t.id == env.id
                                                              for t in a.targets))
    return "child_environment(" in text


def process_starts_without_the_helper(root: Path) -> list[str]:
    found = []
    for folder in CODE:
        for path in sorted((root / folder).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            for function, stack, call in _starts(ast.parse(path.read_text(encoding="utf-8"))):
                if (rel, function) not in NOT_THROUGH_THE_HELPER and not _through_the_helper(call, stack):
                    found.append(f"{rel}:{call.lineno} in {function}: {ast.unparse(call.func)}(...)")
    return found


def test_every_process_start_goes_through_child_environment():
    assert process_starts_without_the_helper(REPO) == []


def test_the_scan_finds_a_start_that_inherits_the_environment(tmp_path):
    (tmp_path / "orchestrator").mkdir()
    (tmp_path / "orchestrator" / "m.py").write_text(
        "import subprocess, os\n"
        "from orchestrator.core.child_env import child_environment\n"
        "def decode(p):\n    return subprocess.run(['ffmpeg', '-i', p])\n"
        "def speak(t):\n    return subprocess.run(['espeak-ng', t], env=dict(os.environ))\n"
        "def ok(t):\n    env = child_environment({'A': '1'})\n    return subprocess.Popen(['x'], env=env)\n")
    assert [line.split(" in ")[1] for line in process_starts_without_the_helper(tmp_path)] == \
        ["decode: subprocess.run(...)", "speak: subprocess.run(...)"]


def test_the_listed_exceptions_still_exist():
    """An entry whose start moved or went away must leave the list, or it would excuse a new one."""
    for rel, function in NOT_THROUGH_THE_HELPER:
        tree = ast.parse((REPO / rel).read_text(encoding="utf-8"))
        assert any(f == function for f, _, _ in _starts(tree)), (rel, function)


SECRETS = {"JARVIS_SECRET_TELEGRAM_TOKEN": "tg-s3cret-1", "OPENAI_API_KEY": "sk-s3cret-2",
           "GITHUB_TOKEN": "gh-s3cret-3", "JARVIS_DATABASE_URL": "postgresql://jarvis:pg-s3cret-4@db/jarvis"}


@pytest.fixture
def secret_env(monkeypatch):
    for k, v in SECRETS.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("LANG", "C.UTF-8")
    return SECRETS


def test_the_helper_drops_secrets_by_name_and_passwords_in_urls(secret_env):
    env = child_environment({"EXTRA": "1"})
    assert not set(secret_env) & set(env), sorted(env)
    assert env["LANG"] == "C.UTF-8" and env["EXTRA"] == "1" and "PATH" in env


def _fake_program(tmp_path: Path, name: str) -> Path:
    """A program named like the real one that writes its environment where the test reads it."""
    out = tmp_path / f"{name}.env.json"
    exe = tmp_path / "bin" / name
    exe.parent.mkdir(exist_ok=True)
    exe.write_text(f"#!{sys.executable}\nimport json, os\njson.dump(dict(os.environ), open({str(out)!r}, 'w'))\n")
    exe.chmod(0o755)
    return out


def _leaked(seen: dict) -> list[str]:
    return [k for k, v in seen.items() if any(s in v for s in SECRETS.values())]


def test_the_audio_decoder_gets_no_secret(secret_env, tmp_path, monkeypatch):
    from orchestrator.voice import audio

    out = _fake_program(tmp_path, "ffmpeg")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(audio.VoiceError):  # it writes no audio: "not audio Jarvis can read"
        audio.decode(b"RIFF....WAVE", max_seconds=5)
    seen = json.loads(out.read_text())
    assert seen and _leaked(seen) == [], _leaked(seen)


def test_the_speech_engine_gets_no_secret(secret_env, tmp_path, monkeypatch):
    from orchestrator.voice import espeak_tts

    out = _fake_program(tmp_path, "espeak-ng")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(espeak_tts.VoiceError):  # it writes no WAV
        espeak_tts.ESpeakNG().synthesize("hello", "en-us", 170)
    seen = json.loads(out.read_text())
    assert seen and _leaked(seen) == [], _leaked(seen)


def test_a_supervised_program_gets_no_secret_unless_given(secret_env, tmp_path):
    from orchestrator.core.supervisor import RestartPolicy, Supervisor

    out = _fake_program(tmp_path, "model-server")
    sup = Supervisor([str(tmp_path / "bin" / "model-server")], RestartPolicy(restart="on-failure"), name="t")
    sup.start()
    try:
        deadline = time.monotonic() + 60
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        sup.stop()
    seen = json.loads(out.read_text())
    assert seen and _leaked(seen) == [], _leaked(seen)
