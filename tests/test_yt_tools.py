"""YouTube tools through youtube-transcript-api's own fetching and parsing code, replaying recorded responses.

The `responses` library answers the library's HTTP requests with the files recorded from YouTube (as the
library's own test suite does); nothing of ours is mocked.
"""

from __future__ import annotations

import json
import re

import pytest
import responses

from integrations.base import ToolError
from integrations.yt_tools import build_yt_tools, parse_video
from tests.conftest import CORPUS
from tests.fakes.llm_server import last_message_text

YT = CORPUS / "youtube"
PLAYER = "https://www.youtube.com/youtubei/v1/player"
WATCH = "https://www.youtube.com/watch"
TIMEDTEXT = "https://www.youtube.com/api/timedtext"
VIDEO = "GJLlxj_dtq8"


def asset(name: str) -> bytes:
    return (YT / name).read_bytes()


@pytest.fixture
def youtube():
    """The recorded happy path; a test replaces one response to play an error case."""
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.post(PLAYER, body=asset("youtube.innertube.json.static"), content_type="application/json")
        mock.get(WATCH, body=asset("youtube.html.static"))
        mock.get(TIMEDTEXT, body=asset("transcript.xml.static"))
        yield mock


def chat_model(llm_server):
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(base_url=llm_server.base_url, api_key="test", model="scripted-model", max_retries=0, timeout=20)


@pytest.fixture
def tools(llm_server):
    return {t.name: t for t in build_yt_tools(chat_model(llm_server))}


@pytest.mark.parametrize("url, start", [
    (f"https://www.youtube.com/watch?v={VIDEO}", None),
    (f"https://youtube.com/watch?feature=share&v={VIDEO}&list=PL123", None),
    (f"https://m.youtube.com/watch?v={VIDEO}&t=1m30s", 90.0),
    (f"https://music.youtube.com/watch?v={VIDEO}", None),
    (f"https://youtu.be/{VIDEO}", None),
    (f"https://youtu.be/{VIDEO}?t=42", 42.0),
    (f"youtu.be/{VIDEO}?si=abc", None),
    (f"https://www.youtube.com/shorts/{VIDEO}", None),
    (f"https://www.youtube.com/embed/{VIDEO}?start=75", 75.0),
    (f"https://www.youtube-nocookie.com/embed/{VIDEO}", None),
    (f"https://www.youtube.com/live/{VIDEO}?feature=shared", None),
    (f"https://www.youtube.com/v/{VIDEO}", None),
    (f"https://www.youtube.com/watch?v={VIDEO}#t=1h2m3s", 3723.0),
    (f"www.youtube.com/watch?v={VIDEO}&t=90s", 90.0),
    (VIDEO, None),
])
def test_every_url_shape(url, start):
    ref = parse_video(url)
    assert ref.video_id == VIDEO and ref.start_s == start


@pytest.mark.parametrize("url", ["https://vimeo.com/12345", "https://www.youtube.com/watch?v=short", "hello world",
                                 "https://www.youtube.com/channel/UC123", "",
                                 # a "$" in the id's pattern let it end in a line break
                                 f"https://www.youtube.com/watch?v={VIDEO}%0A", f"{VIDEO}x"])
def test_bad_urls_are_refused_in_one_sentence(tools, url):
    with pytest.raises(ToolError, match="is not a YouTube video link"):
        tools["yt_get_transcript"].func(url)


def test_transcript_is_fetched_and_parsed_by_the_library(tools, youtube):
    out = tools["yt_get_transcript"].invoke({"url": f"https://youtu.be/{VIDEO}?t=5"})
    assert out.splitlines()[0] == (f"Transcript of https://www.youtube.com/watch?v={VIDEO} (English, manual; 00:08 long; "
                                   "the link starts at [00:05]):")
    assert "[00:00] Hey, this is just a test this is not the original transcript just something shorter" in out
    watch = [c.request for c in youtube.calls if c.request.url.startswith(WATCH)]
    assert watch and f"v={VIDEO}" in watch[0].url  # the id, not the URL, went to YouTube


def _replay(mock, *, player: str | None = None, watch: str | None = None, player_body: bytes | None = None,
            status: int | None = None, timedtext_status: int | None = None) -> None:
    if player or player_body is not None:
        mock.replace(responses.POST, PLAYER, body=player_body if player_body is not None else asset(player),
                     content_type="application/json")
    if watch:
        mock.replace(responses.GET, WATCH, body=asset(watch))
    if status:
        mock.replace(responses.POST, PLAYER, status=status)
    if timedtext_status:
        mock.replace(responses.GET, TIMEDTEXT, status=timedtext_status)


def _private_video() -> bytes:
    """The recorded unplayable answer, with the reason YouTube gives for a private video."""
    data = json.loads(asset("youtube_unplayable.innertube.json.static"))
    data["playabilityStatus"].update({"status": "LOGIN_REQUIRED", "reason": "This video is private"})
    return json.dumps(data).encode()


@pytest.mark.parametrize("case, expected", [
    ({"player": "youtube_transcripts_disabled.innertube.json.static"}, "subtitles turned off"),
    ({"player": "youtube_transcripts_disabled2.innertube.json.static"}, "subtitles turned off"),
    ({"player": "youtube_video_unavailable.innertube.json.static"}, "is unavailable"),
    ({"player": "youtube_age_restricted.innertube.json.static"}, "age-restricted"),
    ({"player": "youtube_request_blocked.innertube.json.static"}, "rate-limiting or blocking"),
    ({"watch": "youtube_too_many_requests.html.static"}, "rate-limiting or blocking"),
    ({"timedtext_status": 429}, "rate-limiting or blocking"),
    ({"player": "youtube_unplayable.innertube.json.static"}, "cannot be played here (Custom Reason)"),
    ({"player_body": "private"}, "is private"),
    ({"player": "youtube_po_token_required.innertube.json.static"}, "proof-of-origin token"),
    ({"watch": "youtube_consent_page_invalid.html.static"}, "cookie-consent page"),
    ({"status": 500}, "answered with an error"),
])
def test_each_error_has_its_own_sentence(tools, youtube, case, expected):
    if case.get("player_body") == "private":
        case = {"player_body": _private_video()}
    _replay(youtube, **case)
    with pytest.raises(ToolError) as info:
        tools["yt_get_transcript"].func(VIDEO)
    message = str(info.value)
    assert expected in message and "\n" not in message


def test_no_transcript_in_the_language_lists_what_there_is(tools, youtube):
    _replay(youtube, player="youtube_ww1_nl_en.innertube.json.static")
    with pytest.raises(ToolError) as info:
        tools["yt_get_transcript"].func(VIDEO, languages=["de"])
    message = str(info.value)
    assert "has no transcript in de" in message and "en (English)" in message and "languages=" in message


def test_other_language_by_request(tools, youtube):
    _replay(youtube, player="youtube_ww1_nl_en.innertube.json.static")
    out = tools["yt_get_transcript"].func(VIDEO, languages=["de", "en"])
    assert "Transcript of" in out and "Hey, this is just a test" in out


def test_consent_page_is_accepted_by_the_library(tools, youtube):
    youtube.replace(responses.GET, WATCH, body=asset("youtube_consent_page.html.static"))
    youtube.add(responses.GET, WATCH, body=asset("youtube.html.static"))
    assert "Hey, this is just a test" in tools["yt_get_transcript"].func(VIDEO)


def test_summary_has_a_timeline_of_real_timestamps(tools, youtube, llm_server):
    llm_server.push({"content": "- A short test video.\n\nTimeline:\n[00:00] a greeting\n[00:05] the made-up ending\n"
                                "[09:59] a moment that does not exist"})
    out = tools["yt_summarize"].invoke({"url": f"https://www.youtube.com/watch?v={VIDEO}"})
    assert out.startswith(f"Summary of https://www.youtube.com/watch?v={VIDEO} (00:08):")
    assert "[00:00] a greeting" in out and "[00:05] the made-up ending" in out
    prompt = last_message_text(llm_server.requests[0])
    assert "<<[00:00]>>" in prompt and "Timeline" in prompt and "Hey, this is just a test" in prompt


def test_summary_without_timestamps_gets_a_timeline_from_the_transcript(tools, youtube, llm_server):
    llm_server.push({"content": "A short test video with no stamps."})
    out = tools["yt_summarize"].invoke({"url": VIDEO})
    assert "Timeline:\n[00:00] Hey, this is just a test" in out


def test_long_transcript_is_summarized_in_parts_with_a_timeline(llm_server, youtube):
    """A 40-minute transcript (built from the recorded XML's format) goes through map-reduce."""
    lines = "".join(f'<text start="{i * 6}.0" dur="6.0">sentence number {i} about topic {i // 50}</text>'
                    for i in range(400))
    youtube.replace(responses.GET, TIMEDTEXT, body=f'<?xml version="1.0" encoding="utf-8" ?><transcript>{lines}</transcript>')
    tools = {t.name: t for t in build_yt_tools(chat_model(llm_server), chunk_tokens=800)}

    def reply(request):
        text = last_message_text(request)
        if text.startswith("List the key points"):
            first = re.search(r"<<\[(\d\d:\d\d)\]>>", text).group(1)
            return {"content": f"[{first}] a point made at {first}"}
        if text.startswith("Merge"):
            return {"content": "\n".join(re.findall(r"\[\d\d:\d\d\][^\n]*", text)[::2])}
        return {"content": "The video covers eight topics."}

    llm_server.add_rule(lambda r: True, reply)
    out = tools["yt_summarize"].invoke({"url": VIDEO})
    maps = [r for r in llm_server.requests if last_message_text(r).startswith("List the key points")]
    assert len(maps) > 3
    assert "The video covers eight topics." in out and "Timeline:" in out
    stamps = re.findall(r"^\[(\d\d):(\d\d)\]", out.split("Timeline:")[1], re.M)
    assert len(stamps) >= 3 and all(int(m) * 60 + int(s) <= 2400 for m, s in stamps)
