"""JARB's loop costs: the sandbox around a test run and a call, and graph start-up with a large registry.

Figures (targets from issue [3]):
  1. median wall time of one sandboxed pytest run of a small generated tool, against the same run without the
     sandbox: ratio <= 1.3, and <= 1.5 s absolute;
  2. one sandboxed call of a generated tool: <= 150 ms;
  3. start-up of the chat graph with 1,000 registered tools: <= 1 s (the registry is read lazily);
  4. (issue [14]) the start-up cost of a sandboxed run (`/bin/true` in the sandbox minus `/bin/true` alone):
     goal <= 40 ms; also with a writable folder (idmapped as root) and with network (slirp4netns).
Run: .venv/bin/python bench/jarb_loop.py   (`make bench` runs it)
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jarb_core.spec import ToolSpec  # noqa: E402
from jarb_core.testing import RUNNER, Staging, run_pytest, site_dirs  # noqa: E402
from orchestrator.core.config import settings_from_dict  # noqa: E402
from orchestrator.jarb.tools import generated_provider, make_factory, make_sandbox  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "7"))

SPEC = {"name": "slugify_title", "description": "A URL slug of a title.", "return_type": "str", "side_effects": [],
        "args": [{"name": "title", "type": "str", "description": "the title"}]}
CODE = '''import re
import unicodedata


def slugify_title(title: str) -> str:
    """Lowercase ASCII words joined by dashes."""
    text = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    return "-".join(re.findall(r"[a-z0-9]+", text.lower()))
'''
TESTS = '''from slugify_title import slugify_title


def test_basic():
    assert slugify_title("Hello, World!") == "hello-world"


def test_accents():
    assert slugify_title("Crème brûlée") == "creme-brulee"


def test_empty():
    assert slugify_title("") == ""
'''


def verdict(value: float, target: float) -> str:
    return f"ratio to target {value / target:.2f} ({'target met' if value <= target else 'TARGET MISSED'})"


def bench_pytest(settings) -> None:
    sandbox = make_sandbox(settings)
    argv_tail = ["-I", "-B", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--color=no", "--tb=short", "-o",
                 "addopts=", "-o", "python_files=test_*.py", "test_slugify_title.py"]
    env = {"PATH": "/usr/bin:/bin", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1",
           "HOME": tempfile.gettempdir()}
    boxed, bare = [], []
    run_pytest(sandbox, "slugify_title", CODE, {"test_slugify_title.py": TESTS})  # warm the page cache
    for _ in range(RUNS):
        t = time.perf_counter()
        report = run_pytest(sandbox, "slugify_title", CODE, {"test_slugify_title.py": TESTS})
        boxed.append(time.perf_counter() - t)
        assert report.passed, report.failure_text()
        t = time.perf_counter()
        with Staging({"slugify_title.py": CODE, "test_slugify_title.py": TESTS}) as stage:
            proc = subprocess.run([sandbox.python, *argv_tail], cwd=stage.dir, env=env, capture_output=True)
        bare.append(time.perf_counter() - t)
        assert proc.returncode == 0, proc.stdout
    b, u = statistics.median(boxed), statistics.median(bare)
    print(f"1. pytest run of a generated tool ({sandbox.backend}): sandboxed {b * 1000:.0f} ms, "
          f"unsandboxed {u * 1000:.0f} ms (median of {RUNS})")
    print(f"   sandbox/plain ratio {b / u:.2f}; floor <= 1.3: {verdict(b / u, 1.3)}; goal <= 1.1: {verdict(b / u, 1.1)}")
    print(f"   absolute {b:.2f} s; target <= 1.5 s: {verdict(b, 1.5)}")


def bench_call(settings) -> None:
    factory = make_factory(settings)
    record, report = factory.register_files(SPEC, CODE, TESTS, approve_network=lambda s, m: False)
    assert record is not None, report.failure_text()
    factory.trust(SPEC["name"])
    tool = generated_provider(settings).get_tool(SPEC["name"])
    assert tool.invoke({"title": "Hello World"}) == "hello-world"
    times = []
    for _ in range(max(RUNS, 10)):
        t = time.perf_counter()
        tool.invoke({"title": "Crème brûlée"})
        times.append(time.perf_counter() - t)
    bare = []  # the same runner and module, run directly: what the sandbox adds is the difference
    python = make_sandbox(settings).python
    with Staging({"slugify_title.py": CODE, "_jarb_call.py": RUNNER.read_text()}) as stage:
        for _ in range(max(RUNS, 10)):
            t = time.perf_counter()
            subprocess.run([python, "-I", "-S", "-B", "_jarb_call.py", "slugify_title", *site_dirs()],
                           input=b'{"title": "Creme brulee"}', capture_output=True, cwd=stage.dir)
            bare.append(time.perf_counter() - t)
    m = statistics.median(times)
    print(f"2. one sandboxed call of a generated tool: {m * 1000:.0f} ms (median of {len(times)}; the same call without "
          f"the sandbox: {statistics.median(bare) * 1000:.0f} ms); target <= 150 ms: {verdict(m * 1000, 150)}")


def bench_startup(base: Path) -> None:
    """Graph start-up with 0 and with 1,000 registered tools, each measured in a fresh process."""
    script = f'''
import sys, time
sys.path.insert(0, {str(Path(__file__).resolve().parent.parent)!r})
from orchestrator.core.config import settings_from_dict
from orchestrator.app import App
from orchestrator.llm.client import make_chat_model
settings = settings_from_dict({{"storage": {{"data_dir": sys.argv[1]}}, "tools_dir": sys.argv[2]}}, sys.argv[1])
llm = make_chat_model(settings)
t = time.perf_counter()
app = App(settings, llm=llm, telemetry=False)
graph = app.graph
built = time.perf_counter() - t
t = time.perf_counter()
names = app.runtime.catalog.names()
print(built, time.perf_counter() - t, len(names))
'''
    empty = base / "empty"
    empty.mkdir(parents=True)
    full = base / "full"
    settings = settings_from_dict({"storage": {"data_dir": str(full / "data")}, "tools_dir": str(full / "tools")}, full)
    factory = make_factory(settings)
    spec = ToolSpec.model_validate(SPEC)
    report = factory.test(spec, CODE, TESTS)
    assert report.passed, report.failure_text()
    t = time.perf_counter()
    for i in range(1000):
        s = spec.model_copy(update={"name": f"slugify_title_{i:04d}"})
        factory.register(s, CODE.replace("def slugify_title(", f"def {s.name}("), TESTS, report, network_approved=False)
    print(f"   (registered 1,000 tools in {time.perf_counter() - t:.1f} s)")
    results = {}
    for label, folder in (("0", empty), ("1000", full)):
        data = folder / "data" if label == "1000" else folder
        tools = folder / "tools"
        samples = []
        for _ in range(3):
            out = subprocess.run([sys.executable, "-c", script, str(data), str(tools)], capture_output=True, text=True)
            if out.returncode != 0:
                raise SystemExit(out.stderr)
            built, first_read, count = out.stdout.split()
            samples.append((float(built), float(first_read), int(count)))
        results[label] = (statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples),
                          samples[0][2])
    b0, b1 = results["0"][0], results["1000"][0]
    print(f"3. graph start-up (build_graph): {b1 * 1000:.0f} ms with 1,000 registered tools, {b0 * 1000:.0f} ms with none; "
          f"target <= 1 s: {verdict(b1, 1.0)}")
    print(f"   (the first catalog read then lists {results['1000'][2]} tools in {results['1000'][1] * 1000:.0f} ms)")


def bench_sandbox_startup(base: Path) -> None:
    """What starting a sandbox costs, beyond starting the same program without one."""
    from jarb_core.sandbox import Bind, Sandbox

    sandbox = Sandbox()
    folder = base / "writable"
    folder.mkdir(parents=True)
    runs = max(RUNS, 15)

    def median_ms(fn) -> float:
        fn()  # warm
        samples = []
        for _ in range(runs):
            t = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - t)
        return statistics.median(samples) * 1000

    bare = median_ms(lambda: subprocess.run(["/bin/true"], check=True))
    cases = [("plain", {}), ("with a writable folder", {"binds": [Bind(folder, writable=True)]}),
             ("with network", {"network": True})]
    for label, kwargs in cases:
        boxed = median_ms(lambda kwargs=kwargs: sandbox.run(["/bin/true"], **kwargs))
        print(f"4. sandbox start-up {label}: {boxed - bare:.0f} ms ({boxed:.0f} ms against {bare:.1f} ms for "
              f"/bin/true alone, median of {runs}); goal <= 40 ms: {verdict(boxed - bare, 40)}")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="jarb-bench-") as tmp:
        base = Path(tmp)
        settings = settings_from_dict({"storage": {"data_dir": str(base / "data")}, "tools_dir": str(base / "tools"),
                                       "sandbox": {"required": True}}, base)
        print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
        bench_pytest(settings)
        bench_call(settings)
        bench_startup(base / "startup")
        bench_sandbox_startup(base / "sandbox")


if __name__ == "__main__":
    main()
