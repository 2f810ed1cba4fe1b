"""Who may talk to the web UI: the token (a header, never a cookie), the Host and Origin checks, and `jarvis run`
itself."""

from __future__ import annotations

import os
import re
import signal
import stat
import subprocess

import httpx
import pytest

from tests.conftest import JARVIS_BIN, wait_until_up
from tests.ui_server import ui_server  # noqa: F401 - fixture


def test_no_token_is_refused(ui_server):
    with ui_server.client(token="") as c:
        for path in ("/api/threads", "/api/tools", "/api/runs", "/api/settings", "/api/views", "/api/jorbs",
                     "/api/inbox", "/api/reminders", "/api/pending"):
            resp = c.get(path)
            assert resp.status_code == 401, path
            assert "jarvis open" in resp.json()["detail"]
        assert c.post("/api/threads/web-x/messages", json={"text": "hi"}).status_code == 401
        assert c.post("/api/uploads", params={"filename": "a.txt"}, content=b"a").status_code == 401
        assert c.post("/api/inbound", json={"channel": "local", "sender": "x", "text": "y"}).status_code == 401
        assert c.post("/api/tools/fs_list_dir/disable").status_code == 401
        # The shell holds no data (the tab brings the token): served without it, and no cookie is set.
        shell = c.get("/")
        assert shell.status_code == 200 and '<script type="module" src="/static/app.js">' in shell.text
        page = c.get("/", params={"token": "wrong"})
        assert page.status_code == 401 and "jarvis open" in page.text and page.headers["content-type"].startswith("text/html")
        # the page in the UI's own style (was unstyled plain text), the command set as code
        assert "/static/style.css" in page.text and "<code>jarvis open</code>" in page.text


def test_wrong_token_is_refused(ui_server):
    with ui_server.client(token="x" * 43) as c:
        assert c.get("/api/threads").status_code == 401
    with ui_server.client(token="", Cookie=f"jarvis_token_{ui_server.url.rsplit(':', 1)[1]}=wrong") as c:
        assert c.get("/api/threads").status_code == 401
    # Not even the right token is read from a cookie: any server on this host, whatever its port, receives it.
    with ui_server.client(token="", Cookie=f"jarvis_token_{ui_server.url.rsplit(':', 1)[1]}={ui_server.token}") as c:
        assert c.get("/api/threads").status_code == 401
    with ui_server.client(token="") as c:
        assert c.get("/", params={"token": "wrong"}).status_code == 401


def test_right_token_is_accepted(ui_server):
    with ui_server.client() as c:
        resp = c.get("/api/threads")
        assert resp.status_code == 200 and resp.json() == []
        assert "default-src 'self'" in resp.headers["content-security-policy"]
        assert resp.headers["x-frame-options"] == "DENY" and resp.headers["referrer-policy"] == "no-referrer"


def test_foreign_host_is_refused(ui_server):
    """DNS rebinding: a page on evil.example resolving to 127.0.0.1 reaches the socket, but not the API."""
    port = ui_server.url.rsplit(":", 1)[1]
    for host in (f"evil.example:{port}", "127.0.0.1:1", f"127.0.0.1.nip.io:{port}", "localhost"):
        with ui_server.client(Host=host) as c:
            assert c.get("/api/threads").status_code == 421, host
            assert c.get("/static/app.js").status_code == 421, host
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"):
        with ui_server.client(Host=host) as c:
            assert c.get("/api/threads").status_code == 200, host


def test_foreign_origin_is_refused(ui_server):
    port = ui_server.url.rsplit(":", 1)[1]
    for origin in ("http://evil.example", f"http://evil.example:{port}", "null", f"https://127.0.0.1:{port}"):
        with ui_server.client(Origin=origin) as c:
            assert c.get("/api/threads").status_code == 403, origin
            assert c.post("/api/threads/web-x/messages", json={"text": "hi"}).status_code == 403, origin
    with ui_server.client(**{"Sec-Fetch-Site": "cross-site"}) as c:
        assert c.get("/api/threads").status_code == 403
    with ui_server.client(Origin=f"http://127.0.0.1:{port}") as c:
        assert c.get("/api/threads").status_code == 200


def test_only_the_ui_itself_or_no_browser_reaches_the_api(ui_server):
    """A page on another port of the same host is same-site, not cross-site: its <img> and <script> GETs carry no
    Origin, and some GETs have effects (GET /api/settings/health starts the MCP servers). /api/ answers only the
    UI's own page (same-origin), the address bar (none) and non-browsers (absent), whatever token comes along."""
    for site in ("same-site", "cross-site", "anything-else"):
        with ui_server.client(**{"Sec-Fetch-Site": site}) as c:
            for path in ("/api/settings/health", "/api/settings/models", "/api/threads/web-x", "/api/jorbs/x"):
                refused = c.get(path)
                assert refused.status_code == 403 and "other web sites" in refused.json()["detail"], (site, path)
    for site in ("same-origin", "none"):
        with ui_server.client(**{"Sec-Fetch-Site": site}) as c:
            assert c.get("/api/threads").status_code == 200, site
    with ui_server.client() as c:
        assert c.get("/api/threads").status_code == 200
    with ui_server.client(token="", **{"Sec-Fetch-Site": "same-site"}) as c:
        assert c.get("/static/app.js").status_code == 200  # the UI's code is public anyway


def _resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads the resident size from /proc")
def test_a_huge_request_head_is_cut_off_without_growing_the_server(ui_server):
    """The token and the Host are checked once a request's headers are whole, and httptools (uvicorn's parser when
    installed) kept them whatever their size: 200 headers of 1 MB without a token grew the server by 200 MB. Now
    the head is cut off past 64 KiB with a 400, the connection closed, and the server answers as before."""
    import socket

    host, port = ui_server.host.rsplit(":", 1)
    head = f"GET /api/threads HTTP/1.1\r\nHost: {ui_server.host}\r\nX-Big: ".encode() + b"a" * (1024 * 1024)
    before = _resident_bytes()
    held = []
    try:
        for _ in range(40):  # never ended: a parser without a bound waits for the rest, holding what it read
            conn = socket.create_connection((host, int(port)), timeout=10)
            held.append(conn)
            try:
                conn.sendall(head)
            except OSError:
                pass  # closed by the server mid-way: what this test wants
        held[0].settimeout(5)
        try:
            answer = held[0].recv(100)
        except TimeoutError:
            answer = b"(no answer: the server is still reading the head)"
        grown = _resident_bytes() - before  # after the wait: the server reads what was sent in its own time
    finally:
        for conn in held:
            conn.close()
    assert grown < 20 * 1024 * 1024, f"the server grew by {grown // 2**20} MB for 40 heads of 1 MB"
    assert answer.startswith(b"HTTP/1.1 400"), answer
    with ui_server.client() as c:
        assert c.get("/api/threads").status_code == 200


def test_the_url_token_goes_to_the_page_and_no_cookie_carries_it(ui_server):
    """The printed URL's token is checked and handed to the page (which keeps it in its tab, web/api.js); no
    cookie carries it, and the one an earlier version set is expired (any port of the host received it)."""
    port = ui_server.url.rsplit(":", 1)[1]
    with httpx.Client(base_url=ui_server.url, follow_redirects=False) as c:
        resp = c.get("/", params={"token": ui_server.token})
        assert resp.status_code == 200 and '<script type="module" src="/static/app.js">' in resp.text
        assert resp.headers["cache-control"] == "no-store" and resp.headers["referrer-policy"] == "no-referrer"
        cookies = resp.headers.get_list("set-cookie")
        assert cookies == [f"jarvis_token_{port}=; Max-Age=0; Path=/; HttpOnly; SameSite=Strict"], cookies
        assert ui_server.token not in str(resp.headers)
        assert c.get("/api/threads").status_code == 401  # nothing was set that a later call would carry
        assert c.get("/api/threads", headers={"Authorization": f"Bearer {ui_server.token}"}).status_code == 200


def test_static_code_needs_no_token(ui_server):
    with ui_server.client(token="") as c:
        for path in ("/static/app.js", "/static/views/chat.js", "/static/style.css"):
            assert c.get(path).status_code == 200, path
        assert c.get("/static/../server_token").status_code in (401, 404)


def test_token_is_persisted_privately(jarvis_env):
    from orchestrator.server.security import load_or_create_token

    settings = jarvis_env.settings
    token = load_or_create_token(settings)
    path = settings.data_dir / "server_token"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(token) >= 40
    assert load_or_create_token(settings) == token
    os.chmod(path, 0o644)
    assert load_or_create_token(settings) == token and stat.S_IMODE(path.stat().st_mode) == 0o600


def test_allowed_hosts_extend_the_names(jarvis_env):
    from orchestrator.server.security import Guard

    jarvis_env.write_config(server={"host": "0.0.0.0", "allowed_hosts": ["jarvis.lan"]})
    guard = Guard(jarvis_env.settings, "t" * 43, 8765)
    assert guard.host_ok("jarvis.lan:8765") and guard.host_ok("127.0.0.1:8765")
    assert not guard.host_ok("0.0.0.0:8765") and not guard.host_ok("other.lan:8765")
    assert guard.origin_ok("http://jarvis.lan:8765") and not guard.origin_ok("http://other.lan:8765")


def _start_run(jarvis_env, *args):
    proc = subprocess.Popen([str(JARVIS_BIN), "run", "--port", "0", *args], env=jarvis_env.env(), cwd=str(jarvis_env.path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    line = proc.stdout.readline()
    started = re.search(r"running at (http://[^/\s]+)", line)
    if started:
        wait_until_up(started.group(1))
    return proc, line


def _stop(proc):
    proc.send_signal(signal.SIGINT)
    try:
        return proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail("jarvis run did not stop on Ctrl-C")


@pytest.mark.slow
def test_jarvis_run_serves_the_ui_with_its_token(jarvis_env):
    proc, line = _start_run(jarvis_env)
    try:
        match = re.search(r"Jarvis is running at (http://127\.0\.0\.1:(\d+)/\?token=(\S+))", line)
        assert match, line + proc.stderr.read() if proc.poll() is not None else line
        base = f"http://127.0.0.1:{match.group(2)}"
        token = match.group(3)
        assert token == (jarvis_env.data / "server_token").read_text().strip()
        with httpx.Client(base_url=base, timeout=20) as c:
            assert c.get("/api/views").status_code == 401
            assert c.get(f"/?token={token}").status_code == 200  # the page, which takes the token into its tab
            c.headers["Authorization"] = f"Bearer {token}"
            jarvis_env.server.push({"content": "Served."})
            with c.stream("POST", "/api/threads/web-run/messages", json={"text": "hi"}) as resp:
                body = resp.read().decode()
            assert "event: done" in body and "Served." in body
            services = c.get("/api/settings").json()["services"]
            assert {"name": "recover-in-doubt", "state": "finished", "detail": None} in services
    finally:
        code = _stop(proc)
    assert code == 0


def test_jarvis_run_warns_off_loopback_and_says_when_the_port_is_taken(jarvis_env):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        proc = jarvis_env.cli("run", "--host", "0.0.0.0", "--port", str(port), "--no-services", timeout=60)
    assert "WARNING: serving on 0.0.0.0" in proc.stderr and "server.allowed_hosts" in proc.stderr
    assert proc.returncode == 1 and f"cannot listen on 0.0.0.0:{port}" in proc.stderr and "--port" in proc.stderr


@pytest.mark.slow
def test_a_web_page_cannot_write_escape_sequences_to_the_terminal_running_jarvis(jarvis_env):
    """Any page the user visits can make the browser send a request to Jarvis; the refusal is logged with the path,
    which the page chooses, on the terminal `jarvis run` was started in. An OSC 52 sequence there would put the
    page's text on the user's clipboard: it is written out (core/visible.py, through the log filter)."""
    proc, line = _start_run(jarvis_env, "--no-services")
    try:
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert match, line + proc.stderr.read() if proc.poll() is not None else line
        with httpx.Client(timeout=20) as c:
            refused = c.get(f"http://127.0.0.1:{match.group(1)}/api/health%1b%5d52%3bc%3bY3VybCBldmls%07",
                            headers={"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"})
        assert refused.status_code == 403
    finally:
        _stop(proc)
    logged = proc.stderr.read()
    assert "refused a cross-origin request" in logged, logged
    assert "\x1b" not in logged and "\x07" not in logged and "/api/health\\x1b]52;c;Y3VybCBldmls\\x07" in logged
