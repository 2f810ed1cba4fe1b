"""API request bodies are bounded before they are read ([17]: every input bounded): a body over
server.max_request_kb gets 413, announced or sent in chunks, and a refused value is never quoted back."""

from __future__ import annotations

from tests.ui_server import ui_server  # noqa: F401 - fixture


def test_an_announced_body_over_the_limit_is_refused_unread(ui_server):
    ui_server.env.settings  # noqa: B018 - the server's own settings object is the one changed below
    ui_server.app.state.jarvis.settings.server.max_request_kb = 64
    with ui_server.client() as c:
        resp = c.post("/api/threads/web-big/messages", content=b'{"text": "' + b"a" * 100_000 + b'"}',
                      headers={"Content-Type": "application/json"})
        assert resp.status_code == 413 and "server.max_request_kb" in resp.json()["detail"], resp.text
        # without the token it is refused for that first, whatever its size
        resp = c.post("/api/threads/web-big/messages", content=b"x" * 100_000,
                      headers={"Authorization": "Bearer wrong", "Content-Type": "application/json"})
        assert resp.status_code == 401
    assert ui_server.env.server.requests == []  # no turn started


def test_a_chunked_body_is_cut_at_the_limit(ui_server):
    ui_server.app.state.jarvis.settings.server.max_request_kb = 64

    def chunks():
        yield b'{"text": "'
        for _ in range(200):
            yield b"a" * 1024
        yield b'"}'

    with ui_server.client() as c:
        resp = c.post("/api/threads/web-big/messages", content=chunks(), headers={"Content-Type": "application/json"})
        assert resp.status_code == 413, resp.text

        # a whole small request, then blanks past the limit: nothing of it is acted on
        def padded():
            yield b'{"text": "hi"}'
            for _ in range(200):
                yield b" " * 1024

        resp = c.post("/api/threads/web-padded/messages", content=padded(), headers={"Content-Type": "application/json"})
        assert resp.status_code == 413, resp.text
    assert ui_server.env.server.requests == []  # no turn started


def test_a_refused_value_is_not_quoted_back(ui_server):
    # FastAPI's 422 quoted the whole value it refused: a message of 60 MB came back in the answer.
    with ui_server.client() as c:
        resp = c.post("/api/threads/web-big/messages", json={"text": "a" * 200_000})
    assert resp.status_code == 422 and len(resp.content) < 2000, len(resp.content)
    (error,) = resp.json()["detail"]
    assert error["loc"] == ["body", "text"] and "100000" in error["msg"] and "input" not in error


def test_uploads_keep_their_own_limit(ui_server):
    ui_server.app.state.jarvis.settings.server.max_request_kb = 64
    with ui_server.client() as c:
        resp = c.post("/api/uploads?filename=notes.txt", content=b"line\n" * 40_000)  # 200 KB, under 50 MB
    assert resp.status_code in (200, 201), resp.text
