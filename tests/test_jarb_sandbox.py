"""The sandbox itself: isolation, limits, the Popen-style pipe jorb scripts will use, and the fallbacks."""

from __future__ import annotations

import json
import os
import shutil
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from jarb_core.sandbox import Bind, Limits, Sandbox, SandboxProtocolError, SandboxUnavailable
from jarb_core.sandbox_backends import seatbelt_profile
from tests.reminder_helpers import wait_for

needs_bwrap = pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("bwrap") is None,
                                 reason="bubblewrap is not installed")


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return Sandbox(Limits(wall_timeout_s=20, max_processes=16, workdir_mb=8, file_size_mb=4))


def py(sandbox: Sandbox, code: str, **kwargs):
    return sandbox.run([sandbox.python, "-I", "-c", textwrap.dedent(code)], **kwargs)


@needs_bwrap
def test_isolation(sandbox, tmp_path, monkeypatch):
    monkeypatch.setenv("JARVIS_TEST_SECRET", "hunter2")
    host_tmp = Path("/tmp") / f"jarvis-host-{uuid.uuid4().hex[:8]}"
    host_tmp.write_text("host")
    home_file = Path.home() / f".jarvis-canary-{uuid.uuid4().hex[:8]}"
    home_file.write_text("private")
    try:
        result = py(sandbox, f"""
            import json, os, socket
            facts = {{"uid": os.getuid(), "env": sorted(os.environ), "home": os.environ["HOME"], "cwd": os.getcwd(),
                     "host_tmp_visible": os.path.exists({str(host_tmp)!r}),
                     "real_home_visible": os.path.exists({str(home_file)!r}),
                     "repo_visible": os.path.exists({str(Path(__file__).resolve())!r}),
                     "interfaces": sorted(n for _, n in socket.if_nameindex())}}
            for target in ("/usr/x", "/x", "/etc/x"):
                try:
                    open(target, "w")
                    facts[target] = "written"
                except OSError as exc:
                    facts[target] = exc.strerror
            open("here.txt", "w").write("ok")
            open("/tmp/t.txt", "w").write("ok")
            facts["workdir_writable"] = open("here.txt").read() == "ok"
            print(json.dumps(facts))
        """)
    finally:
        host_tmp.unlink()
        home_file.unlink()
    assert result.ok, result.stderr_text
    facts = json.loads(result.stdout_text)
    assert "JARVIS_TEST_SECRET" not in facts["env"] and "hunter2" not in result.stdout_text
    assert facts["home"] == facts["cwd"] == "/sandbox"
    assert facts["host_tmp_visible"] is False and facts["real_home_visible"] is False
    assert facts["repo_visible"] is False
    assert facts["interfaces"] == ["lo"]
    assert all(facts[t] == "Read-only file system" for t in ("/usr/x", "/x", "/etc/x"))
    assert facts["workdir_writable"] is True
    if os.geteuid() == 0:
        assert facts["uid"] == 65534  # root's RLIMIT_NPROC exemption does not apply
    assert not Path("/tmp/t.txt").exists() or Path("/tmp/t.txt").read_text() != "ok"


@needs_bwrap
def test_binds_and_workdir(sandbox, tmp_path):
    src = tmp_path / "helper"
    src.mkdir()
    src.chmod(0o755)
    (src / "helper_mod.py").write_text("VALUE = 7\n")
    (src / "helper_mod.py").chmod(0o644)
    work = tmp_path / "work"
    work.mkdir()
    result = py(sandbox, f"""
        import sys
        sys.path.insert(0, {str(src)!r})
        import helper_mod
        print(helper_mod.VALUE)
        try:
            open({str(src)!r} + "/new.py", "w")
        except OSError as exc:
            print(exc.strerror)
        open("result.txt", "w").write("kept")
    """, binds=[Bind(src)], workdir=work)
    assert result.ok, result.stderr_text
    assert result.stdout_text.split("\n")[:2] == ["7", "Read-only file system"]
    assert (work / "result.txt").read_text() == "kept"  # a host work directory keeps what was written

    scratch = py(sandbox, """
        import os
        try:
            with open("big", "wb") as fh:
                for _ in range(64):
                    fh.write(b"0" * (1024 * 1024))
        except OSError as exc:
            print(exc.strerror)
    """)
    assert scratch.stdout_text.strip() in ("File too large", "No space left on device")


def test_limits_and_reasons(sandbox):
    quick = sandbox.with_limits(wall_timeout_s=1.5, cpu_seconds=1)
    slept = py(sandbox, "import time; time.sleep(60)", limits=quick)
    assert slept.killed == "timeout" and "wall timeout of 1.5 s" in slept.describe() and slept.duration_s < 10
    spun = py(sandbox, "while True: pass", limits=sandbox.with_limits(cpu_seconds=1, wall_timeout_s=20))
    assert not spun.ok and "CPU limit of 1 s" in spun.describe()
    flood = py(sandbox, "import sys\nwhile True: sys.stdout.write('z' * 65536)")
    assert flood.killed == "output_limit" and flood.truncated and len(flood.stdout) <= 256 * 1024
    hog = py(sandbox, "x = bytearray(3 * 1024 ** 3)")
    assert "ran out of memory" in hog.describe()


def test_process_tree_is_killed(sandbox):
    """A grandchild in its own session, left sleeping, does not outlive the run."""
    marker = f"jarvis-orphan-{uuid.uuid4().hex[:8]}"
    result = py(sandbox, f"""
        import subprocess, time
        subprocess.Popen(["/bin/sh", "-c", "exec -a {marker} sleep 300"], start_new_session=True)
        time.sleep(60)
    """, limits=sandbox.with_limits(wall_timeout_s=2))
    assert result.killed == "timeout"

    def alive() -> list[str]:
        found = []
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                if marker.encode() in cmdline.read_bytes():
                    found.append(cmdline.parent.name)
            except OSError:
                pass
        return found

    wait_for(lambda: not alive())  # SIGKILL is sent; the kernel ends them as soon as they are scheduled


def test_json_pipe_for_long_lived_scripts(sandbox):
    """The Popen-style interface jorb scripts will use: requests out, answers in, over stdin/stdout."""
    script = textwrap.dedent("""
        import json, sys
        def call(capability, **args):
            print(json.dumps({"call": capability, "args": args}), flush=True)
            return json.loads(sys.stdin.readline())["result"]
        total = call("add", a=2, b=3) + call("add", a=10, b=20)
        print(json.dumps({"done": total}), flush=True)
    """)
    with sandbox.spawn([sandbox.python, "-I", "-c", script]) as proc:
        answers = 0
        while True:
            message = proc.read_json(timeout=10)
            if message is None or "done" in message:
                break
            assert message["call"] == "add"
            proc.send_json({"result": message["args"]["a"] + message["args"]["b"]})
            answers += 1
    assert message == {"done": 35} and answers == 2
    assert proc.result is not None and proc.result.returncode == 0

    with sandbox.spawn([sandbox.python, "-I", "-c", "import time; time.sleep(30)"]) as proc:
        with pytest.raises(TimeoutError):
            proc.read_json(timeout=0.3)
    assert proc.result.killed  # closed while still running: killed, not left behind

    with sandbox.spawn([sandbox.python, "-I", "-c", "import sys; sys.stdout.write('x' * 400000); sys.stdout.flush()"]) as proc:
        with pytest.raises(SandboxProtocolError, match="output limit"):
            proc.read_line(timeout=10)


def test_a_process_with_descriptors_past_1024_still_talks_to_its_sandbox(sandbox, descriptors_past_1024):
    # Found in CI: select() refuses a descriptor numbered 1,024 or more ("filedescriptor out of range"), so a
    # worker holding many files could no longer read a sandboxed script's line or write to a reminder agent.
    with sandbox.spawn([sandbox.python, "-I", "-c", "import json; print(json.dumps({'done': 1}), flush=True)"]) as proc:
        assert proc.stdout.fileno() >= 1024
        assert proc.read_json(timeout=10) == {"done": 1}


def test_refuses_without_a_sandbox_and_explains(monkeypatch):
    if sys.platform.startswith("linux"):
        with pytest.raises(SandboxUnavailable) as err:
            Sandbox(backend="sandbox-exec", required=True)
    else:
        with pytest.raises(SandboxUnavailable) as err:
            Sandbox(backend="bubblewrap", required=True)
    message = str(err.value)
    assert "apt-get install bubblewrap" in message and "sandbox.required: false" in message


def test_rlimits_only_when_not_required_warns_every_time():
    sandbox = Sandbox(Limits(cpu_seconds=1, wall_timeout_s=20), required=False, backend="none")
    assert sandbox.backend == "rlimits" and not sandbox.isolated
    ok = py(sandbox, "print('hi')")
    assert ok.ok and ok.stdout_text.strip() == "hi"
    assert any("NOT ISOLATED" in w for w in ok.warnings)
    spun = py(sandbox, "while True: pass")
    assert "CPU limit" in spun.describe() and any("NOT ISOLATED" in w for w in spun.warnings)


def test_seatbelt_profile_denies_network_writes_and_home():
    profile = seatbelt_profile(workdir="/private/tmp/w", tmpdir="/private/tmp/w/.tmp", readable=["/opt/py"],
                               executables=["/opt/py/bin/python3"], network=False, home="/Users/me")
    assert "(deny network*)" in profile and "(deny file-write*)" in profile
    assert '(deny file-read* (subpath "/Users/me"))' in profile and "(deny process-fork)" in profile
    assert "network" not in seatbelt_profile(workdir="/w", tmpdir="/t", readable=[], executables=[], network=True,
                                             home="/h").split("(deny file-write*)")[0].replace("(version 1)", "")


def test_no_backend_needs_required_false():
    with pytest.raises(SandboxUnavailable, match="sandbox.required: false"):
        Sandbox(backend="none", required=True)


@needs_bwrap
@pytest.mark.skipif(os.geteuid() != 0, reason="only a root Jarvis has a uid 0 to give away")
def test_a_writable_folder_never_means_uid_0(sandbox, tmp_path):
    """As root, a writable bind used to keep uid 0 (capabilities dropped, yet uid 0 may write sysctls). Now the
    command runs as the unprivileged uid and sees the folder as its own through an idmapped mount: what it
    writes lands owned by the folder's owner, and nothing else of root's is within reach."""
    (tmp_path / "mine.txt").write_text("root's file\n")
    (tmp_path / "mine.txt").chmod(0o644)
    result = py(sandbox, f"""
        import os
        print(os.getuid(), os.geteuid())
        open({str(tmp_path)!r} + "/mine.txt", "a").write("appended\\n")
        open({str(tmp_path)!r} + "/new.txt", "w").write("made")
        for path in ("/etc/shadow", "/proc/sys/kernel/core_pattern"):
            try:
                open(path, "r+")
                print(path, "opened")
            except OSError as exc:
                print(path, exc.strerror)
        try:
            os.setuid(0)
        except PermissionError as exc:
            print("setuid:", exc.strerror)
    """, binds=[Bind(tmp_path, writable=True)])
    assert result.ok, result.stderr_text
    lines = result.stdout_text.splitlines()
    assert lines[0] == "65534 65534"
    assert lines[1] in ("/etc/shadow Permission denied", "/etc/shadow No such file or directory")
    assert lines[2] in ("/proc/sys/kernel/core_pattern Read-only file system",
                        "/proc/sys/kernel/core_pattern Permission denied")
    assert lines[3] == "setuid: Operation not permitted"
    assert (tmp_path / "mine.txt").read_text() == "root's file\nappended\n"
    assert (tmp_path / "new.txt").stat().st_uid == 0 and (tmp_path / "mine.txt").stat().st_uid == 0


@needs_bwrap
def test_jorb_scripts_run_in_the_sandbox(tmp_path):
    """orchestrator.jorbs starts scripts through `script_spawner`: calls still reach the parent, files do not."""
    from jarb_core.sandbox import script_spawner
    from orchestrator.core.config import settings_from_dict
    from orchestrator.jorbs.script_runner import run_script

    settings = settings_from_dict({"storage": {"data_dir": str(tmp_path / "data")}}, tmp_path)
    canary = Path.home() / f".jarvis-canary-{uuid.uuid4().hex[:8]}"
    canary.write_text("private")
    calls = []

    def handle(ns, method, args, kwargs):
        calls.append((ns, method, args))
        return 41

    try:
        script = (f"n = jarvis.math.answer() + 1\n"
                  f"try:\n    open({str(canary)!r}).read()\n    seen = 'read'\n"
                  f"except OSError as exc:\n    seen = exc.strerror\n"
                  f"[n, seen]")
        outcome = run_script(script, handle, spawn=script_spawner(settings), timeout_s=30)
    finally:
        canary.unlink()
    assert outcome.error is None, outcome.error
    assert outcome.result == [42, "No such file or directory"]
    assert calls == [("math", "answer", [])]


def test_the_network_sandbox_s_resolv_conf_goes_with_its_process():
    """The resolv.conf the network sandbox shows its runs (one per process, in the temporary folder) is removed
    when the process ends: every process that ran a networked tool left one behind."""
    import subprocess

    code = ("from jarb_core.sandbox_network import _resolv_conf; import os; p = _resolv_conf(); "
            "print(p); assert os.path.exists(p) and _resolv_conf() == p")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    path = proc.stdout.strip()
    assert path.endswith(".conf") and "jarvis-resolv-" in path
    assert not Path(path).exists()
