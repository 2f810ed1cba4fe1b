"""Streaming latency of the web UI: how soon the model's first token reaches the API stream and the browser.

Anchor: the scripted model server's own first-token time (a client streaming from it directly), with a
simulated thinking time before the first token. Measured: the time from sending a message (POST to the API,
or a click on Send in Chromium) to that first token arriving (SSE event, or painted in the page); also the
relay delay from the moment the scripted server emits the token to its arrival in the API stream.
Target (issue 11): UI first-token time <= 1.2 x the scripted server's + 20 ms.

    .venv/bin/python bench/ui_stream.py [--reps 7] [--think-ms 300]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.fakes.llm_server import FakeLLMServer  # noqa: E402

ANSWER = "The first token should arrive quickly, and the rest follows as it is generated."


# One client for every request, created before any timing (creating one costs tens of ms).
CLIENT = httpx.Client(timeout=30)


def direct_first_token(server: FakeLLMServer, think_s: float) -> float:
    server.push({"content": ANSWER, "delay_s": think_s})
    body = {"model": "scripted-model", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    start = time.perf_counter()
    first = None
    with CLIENT.stream("POST", f"{server.base_url}/chat/completions", json=body) as resp:
        for line in resp.iter_lines():
            if first is None and '"content": "' in line and '"content": ""' not in line:
                first = time.perf_counter() - start
    assert first is not None, "the scripted server sent no token"
    return first


def api_first_token(url: str, token: str, server: FakeLLMServer, think_s: float, rep: int) -> tuple[float, float]:
    emitted: dict[str, float] = {}

    def respond(request: dict) -> dict:
        emitted["at"] = time.perf_counter() + think_s  # the scripted server sleeps think_s, then emits
        return {"content": ANSWER, "delay_s": think_s}

    server.add_rule(lambda req: True, respond, times=1)
    headers = {"Authorization": f"Bearer {token}"}
    start = time.perf_counter()
    first = arrival = None
    with CLIENT.stream("POST", f"{url}/api/threads/bench-{rep}/messages", json={"text": "hi"}, headers=headers) as resp:
        for line in resp.iter_lines():
            if first is None and line.startswith("event: token"):
                arrival = time.perf_counter()
                first = arrival - start
    assert first is not None and arrival is not None, "no token arrived"
    return first, arrival - emitted["at"]


BROWSER_JS = """async (text) => {
  // a new chat each time, like the API runs (a growing thread would make later prompts longer)
  const old = location.hash;
  [...document.querySelectorAll("button")].find((b) => b.textContent === "New chat").click();
  const deadline = performance.now() + 10000;
  while (location.hash === old || !document.querySelector(".log .empty")) {
    if (performance.now() > deadline) throw new Error("the new chat did not open");
    await new Promise((r) => setTimeout(r, 5));
  }
  const box = document.getElementById("message");
  box.value = text;
  const before = document.querySelectorAll(".msg.assistant").length;
  const seen = new Promise((resolve, reject) => {
    setTimeout(() => reject(new Error("no token arrived in 10 s")), 10000);
    const obs = new MutationObserver(() => {
      const bubbles = document.querySelectorAll(".msg.assistant");
      if (bubbles.length > before && bubbles[bubbles.length - 1].textContent.length > 0) {
        obs.disconnect();
        resolve(performance.now());
      }
    });
    obs.observe(document.querySelector(".log"), { childList: true, subtree: true, characterData: true });
  });
  const start = performance.now();
  [...document.querySelectorAll("button")].find((b) => b.textContent === "Send").click();
  return (await seen) - start;
}"""


def browser_first_tokens(url: str, token: str, server: FakeLLMServer, think_s: float, reps: int) -> list[float] | None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("browser: skipped (chromium not installed; scripts/install-system-deps.sh chromium)")
        return None
    from playwright.sync_api import sync_playwright

    out = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])
        page = browser.new_page()
        page.goto(f"{url}/?token={token}")
        page.get_by_role("textbox", name="Message").wait_for()
        for i in range(reps + 1):
            server.push({"content": ANSWER, "delay_s": think_s})
            elapsed = page.evaluate(BROWSER_JS, f"message {i}")
            page.wait_for_selector(".msg.assistant:not(.streaming) >> nth=-1")
            page.wait_for_function("() => !document.querySelector('.working')")
            if i:  # the first one warms up the page's modules and connections
                out.append(elapsed / 1000)
        browser.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--think-ms", type=float, default=300.0, help="the scripted model's time before its first token")
    args = parser.parse_args()
    think = args.think_ms / 1000

    import logging

    logging.basicConfig(level=logging.WARNING)
    from orchestrator.core.config import load_settings
    from orchestrator.app import App
    from orchestrator.server.app import create_app, serve_in_thread

    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer() as server:
        cfg = Path(tmp) / "config.yml"
        cfg.write_text(yaml.safe_dump({
            "models": {"primary": {"base_url": server.base_url, "model": "scripted-model", "api_key": "bench",
                                   "max_retries": 0}},
            "storage": {"data_dir": str(Path(tmp) / "data")}, "tools_dir": str(Path(tmp) / "tools"),
            "mcp": {"dir": str(Path(tmp) / "mcp")}, "fs": {"roots": [tmp]}, "sandbox": {"required": False},
        }))
        settings = load_settings(cfg)
        app = create_app(App(settings), services=[])

        direct_first_token(server, think)  # warm-up
        direct = [direct_first_token(server, think) for _ in range(args.reps)]
        with serve_in_thread(app) as url:
            token = app.state.token
            api_first_token(url, token, server, think, -1)  # warm-up
            api = [api_first_token(url, token, server, think, i) for i in range(args.reps)]
            browser = browser_first_tokens(url, token, server, think, args.reps)

    d = statistics.median(direct)
    a = statistics.median(x[0] for x in api)
    relay = statistics.median(x[1] for x in api)
    budget = 1.2 * d + 0.020
    print(f"scripted model thinking time: {args.think_ms:.0f} ms, {args.reps} reps, medians")
    print(f"scripted server's own first token (direct client): {d * 1000:7.1f} ms   (anchor)")
    print(f"API stream first token (POST -> SSE token event):   {a * 1000:7.1f} ms   ratio {a / d:.3f}   "
          f"target <= {budget * 1000:.1f} ms: {'met' if a <= budget else 'NOT met'}")
    print(f"relay, scripted server emits -> API stream receives: {relay * 1000:7.1f} ms")
    if browser:
        b = statistics.median(browser)
        print(f"browser first token (click Send -> token painted):  {b * 1000:7.1f} ms   ratio {b / d:.3f}   "
              f"target <= {budget * 1000:.1f} ms: {'met' if b <= budget else 'NOT met'}")


if __name__ == "__main__":
    main()
