"""Jarvis kills only processes it started, on a machine where pids are reused (32,768 wrap in minutes when eight
test runs share it) and other programs run beside it (another user's `make test`).

Every Jarvis process makes its cgroups under the same parent and sweeps the ones left by a Jarvis that died
(orchestrator/core/cgroups.py): the sweep never kills the runs of a Jarvis that lives, not one whose pid it cannot
see (another pid namespace), and does not take a process that got a dead maker's pid for its maker. A sandboxed run
that was waited for is never stopped by its old pid (jarb_core/sandbox_process.py). Real cgroups, real processes,
real pid reuse (in a pid namespace of the test's own); skipped where no cgroup or namespace can be made."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from orchestrator.core import cgroups
from orchestrator.core.cgroups import CgroupLimits, RunCgroup
from tests.conftest import REPO
from tests.mcp_helpers import alive, pids_with_arg, wait_for


def _root_or_skip() -> None:
    if os.geteuid() != 0:
        pytest.skip("making a pid namespace, and choosing the next pid in it, needs root")


def _parent_or_skip() -> tuple[Path, str]:
    where = cgroups.parents()["memory"]  # every run's cgroup has memory
    if isinstance(where, str):
        why = where
        if os.environ.get("JARVIS_REQUIRE_CGROUPS") == "1":
            pytest.fail(f"no cgroup can be made here: {why} (JARVIS_REQUIRE_CGROUPS=1)")
        pytest.skip(f"no cgroup can be made here: {why}")
    return where


def _run_in(cgroup: RunCgroup) -> subprocess.Popen:
    """A member of `cgroup` (as a sandboxed run is), in it from its first instruction."""
    member = subprocess.Popen(cgroup.wrap(["sleep", "300"]))
    wait_for(lambda: member.pid in cgroup.members(), timeout=60)
    return member


def _sweep_from(parent: Path, version: str, *prefix: str) -> None:
    """Another Jarvis process (under `prefix`: in another pid namespace, say) sweeping the shared parent."""
    code = (f"from pathlib import Path; from orchestrator.core import cgroups; "
            f"cgroups._sweep_stale(Path({str(parent)!r}), {version!r})")
    subprocess.run([*prefix, sys.executable, "-c", code], check=True, timeout=120, cwd=REPO,
                   env={**os.environ, "PYTHONPATH": str(REPO)})


def test_a_jarvis_in_another_pid_namespace_never_sweeps_the_runs_of_a_live_one():
    """It cannot see this process's pid, so this process looks dead to it: its runs must be left alone."""
    parent, version = _parent_or_skip()
    _root_or_skip()
    ours = RunCgroup.create(CgroupLimits(memory_bytes=64 * 2**20, max_pids=8), kind="sbx")
    assert ours is not None
    member = _run_in(ours)
    try:
        _sweep_from(parent, version, "unshare", "--pid", "--fork", "--mount-proc")
        assert member.poll() is None and alive(member.pid), "a live Jarvis's run was killed by another's sweep"
        assert all(d.exists() for d, _ in ours.dirs.values())
    finally:
        ours.remove()
        member.wait(timeout=60)


def test_a_pid_taken_by_a_later_process_is_not_the_maker_and_its_runs_are_swept():
    """The maker died and its pid now belongs to another process: the cgroup is stale all the same."""
    parent, version = _parent_or_skip()
    later = subprocess.Popen(["sleep", "300"])  # holds the pid the dead maker had
    start = cgroups.identity(later.pid).rpartition(".")[2]
    before = int(start) - 1  # the maker started earlier
    ns = cgroups.identity(later.pid).partition(".")[0]
    name = f"{cgroups.PREFIX}sbx-{later.pid}-{ns}.{before}-0badc0de"
    stale = RunCgroup({"memory": (parent / name, version)})
    (parent / name).mkdir()
    member = _run_in(stale)
    try:
        assert cgroups.maker_gone(name) and not cgroups.maker_gone(name.replace(f".{before}-", f".{start}-"))
        _sweep_from(parent, version)
        assert member.wait(timeout=60) != 0 and not (parent / name).exists()
        assert later.poll() is None, "the process that got the pid is not touched"
    finally:
        stale.remove()
        later.kill()
        later.wait()
        member.wait(timeout=60)


def test_a_cgroup_left_by_a_jarvis_that_died_is_swept_with_its_runs():
    parent, version = _parent_or_skip()
    maker = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import json, sys
        from orchestrator.core.cgroups import CgroupLimits, RunCgroup
        c = RunCgroup.create(CgroupLimits(memory_bytes=64 * 2**20, max_pids=8))
        print(json.dumps([str(d) for d, _ in c.dirs.values()]), flush=True)
        sys.stdin.read()
    """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)})
    dirs = [Path(d) for d in json.loads(maker.stdout.readline())]
    (made,) = [d for d in dirs if d.parent == parent]
    left = RunCgroup({"memory": (made, version)})
    member = _run_in(left)
    maker.kill()  # dies without removing its cgroups
    maker.wait()
    try:
        _sweep_from(parent, version)
        assert member.wait(timeout=60) != 0 and not made.exists()
    finally:
        for d in dirs:
            RunCgroup({"memory": (d, version)}).remove()
        member.wait(timeout=60)


def test_a_run_that_was_waited_for_is_never_stopped_by_its_old_pid():
    """Its pid, once reaped, goes to a new process leading a group of its own (`make`'s, say): kill() must not
    send that group SIGKILL. Within a pid namespace of the test's own, the next pid is chosen (ns_last_pid)."""
    _root_or_skip()
    script = textwrap.dedent("""
        import subprocess
        from jarb_core.sandbox import Limits, Sandbox

        sandbox = Sandbox(Limits(wall_timeout_s=60))
        run = sandbox.spawn([sandbox.python, "-I", "-c", "pass"])
        assert run.wait().returncode == 0
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(run.pid - 1))
        other = subprocess.Popen(["sleep", "300"], start_new_session=True)
        assert other.pid == run.pid, (other.pid, run.pid)
        run.kill()  # late, as a timer or an output limit can
        try:
            print("killed", other.wait(timeout=5))  # SIGKILL to its group would end it at once
        except subprocess.TimeoutExpired:
            print("alive")
        other.kill()
    """)
    done = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", script], cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["alive"], "kill() of a finished run killed the new owner of its pid"


def test_a_test_finds_its_own_server_not_one_another_run_started_with_the_same_script(tmp_path):
    """Test workers and other users' runs start the same scripts (.cache/npm): a test that kills "the" server must
    find the one it started."""
    script = tmp_path / "server.py"
    script.write_text("import time\ntime.sleep(300)\n")
    # another run's server: started the same way, but not below this process (its parent shell is gone)
    subprocess.run(["sh", "-c", f'{sys.executable} {script} >/dev/null 2>&1 &'], check=True)
    ours = subprocess.Popen([sys.executable, str(script)])
    try:
        wait_for(lambda: len(pids_with_arg(str(script))) == 2, timeout=60)
        assert pids_with_arg(str(script), under=os.getpid()) == [ours.pid]
    finally:
        for pid in pids_with_arg(str(script)):
            os.kill(pid, signal.SIGKILL)
        ours.wait()
