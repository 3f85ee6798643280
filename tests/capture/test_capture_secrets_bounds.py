"""Issue 41's proxy items: no secret in any file (headers, body keys by pattern, header lists in a
body, query parameters), session ids checked before they can reach the engine's path, an engine
answer bounded (decompressed size, one SSE line, a whole stream) with a recorded error instead of
a crash, and one long SSE line handled in linear time."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import tracemalloc
import zlib

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from rollout_graph.capture.sessions import (
    MASK,
    BadSessionPath,
    is_secret_header,
    mask_query,
    mask_secrets,
    split_session_path,
)
from rollout_graph.capture.upstream import LineSplitter, UpstreamTooLarge
from tests.support.capture_helpers import http, read_records, running_proxy
from tests.support.fake_upstream import running_upstream, serve_in_thread


@pytest.fixture(scope="module")
def upstream():
    with running_upstream() as (url, fake):
        yield url, fake


SECRETS = {
    "X-Session-Jwt": "eyJhbGciOi.jwt-secret-1",
    "X-Bearer": "bearer-secret-2",
    "X-Upstream-Token": "token-secret-3",
    "x-goog-api-key": "AIza-secret-4",
    "Authorization": "Bearer sk-secret-5",
}
BODY_SECRETS = {
    "private_key": "-----BEGIN PRIVATE KEY----- secret-6",
    "bearer": "secret-7",
    "user_jwt": "secret-8",
    "client_secret": "secret-9",
    "password": "secret-10",
    "authorization": "Basic secret-11",
    "metadata": {"access_token": "secret-12", "refresh_token": "secret-13", "title": "kept-title"},
    "headers": [["Authorization", "Bearer secret-14"], ["X-Title", "kept-header"]],
    "extra_headers": [{"name": "X-Api-Key", "value": "secret-15"}, {"name": "X-Trace", "value": "kept-trace"}],
    "stop_token_ids": [7, 8],
    "prompt_cache_key": "kept-cache-key",
}
QUERY = "api_key=secret-16&key=secret-17&token=secret-18&access_token=secret-19&api-version=kept-version"


def _secret_values() -> list[str]:
    values = list(SECRETS.values())
    values += [
        v for v in json.dumps(BODY_SECRETS).split('"') if v.startswith(("secret-", "-----", "Basic", "Bearer s"))
    ]
    return values + [f"secret-{n}" for n in range(6, 20)]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
        ("/v1/messages", {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}),
        ("/v1/responses", {"model": "m", "input": "hi"}),
        ("/v1beta/models/m:generateContent", {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}),
    ],
)
def test_no_secret_in_a_header_body_or_query_reaches_a_file(upstream, tmp_path, path, body):
    url, fake = upstream
    with running_proxy(url, tmp_path) as proxy:
        answer = http.post(f"{proxy}/session/s{path}?{QUERY}", json={**body, **BODY_SECRETS}, headers=SECRETS)
    assert answer.status_code == 200, answer.text
    text = "".join(f.read_text() for f in tmp_path.iterdir())
    for secret in _secret_values():
        assert secret not in text, secret
    (record,) = read_records(tmp_path)
    assert record["query"].startswith("api_key=[masked") and record["query"].endswith("api-version=kept-version")
    for kept in ("kept-title", "kept-header", "kept-trace", "kept-cache-key"):
        assert kept in text, kept
    assert record["request"]["stop_token_ids"] == [7, 8]
    assert not {h.lower() for h in SECRETS} & set(record["headers"])
    if path == "/v1/chat/completions":  # the chat dialect is forwarded as sent: the engine gets everything
        assert fake.requests[-1]["private_key"] == BODY_SECRETS["private_key"]
        assert fake.headers[-1]["x-session-jwt"] == SECRETS["X-Session-Jwt"]


def test_the_rules_mask_by_pattern_and_spare_what_is_no_credential():
    assert mask_query("alt=sse&key=abc&n=1") == "alt=sse&key=[masked%20by%20rollout-graph]&n=1"
    assert mask_query("api%5Fkey=abc") == "api%5Fkey=[masked%20by%20rollout-graph]"  # spelt encoded
    assert mask_query("token=&x=1") == "token=&x=1"  # nothing to hide
    masked = mask_secrets(BODY_SECRETS)
    assert masked["headers"] == [["Authorization", MASK], ["X-Title", "kept-header"]]
    assert masked["extra_headers"][0]["value"] == MASK and masked["extra_headers"][1]["value"] == "kept-trace"
    assert masked["metadata"] == {"access_token": MASK, "refresh_token": MASK, "title": "kept-title"}
    assert masked["stop_token_ids"] == [7, 8] and masked["prompt_cache_key"] == "kept-cache-key"
    for header in ("X-Session-Jwt", "X-Bearer", "X-Upstream-Token", "x-goog-api-key", "X-Private-Key"):
        assert is_secret_header(header), header
    for header in ("X-Session-Id", "x-claude-code-session-id", "X-Title", "Content-Type", "User-Agent"):
        assert not is_secret_header(header), header


# --- session ids -------------------------------------------------------------------------------


def _raw_post(proxy: str, raw_path: str) -> tuple[int, str]:
    """A POST with the path exactly as given (an HTTP client would normalise ``..`` away)."""
    host, port = proxy.removeprefix("http://").split(":")
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(
            f"POST {raw_path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
            + body
        )
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), rest.decode("utf-8", "replace")


@pytest.mark.parametrize(
    "raw_path",
    [
        "/session/x%2F..%2F..%2Fetc%2Fpasswd/v1/chat/completions",
        "/session/a/b/v1/chat/completions",
        "/session/a%5Cb/v1/chat/completions",
        "/session/../v1/chat/completions",
        "/session/%2E%2E/v1/models",
        "/session/a/../../etc/passwd",
        "/v1/%2E%2E/%2E%2E/etc/passwd",
        "/session/a/b/v1beta/models/m:generateContent",
    ],
)
def test_a_session_id_or_path_that_walks_is_refused_and_never_reaches_the_engine(upstream, tmp_path, raw_path):
    url, fake = upstream
    sent = len(fake.requests)
    with running_proxy(url, tmp_path) as proxy:
        status, text = _raw_post(proxy, raw_path)
        ok = http.post(f"{proxy}/session/run-1.a_b:c@d/v1/chat/completions", json={"model": "m", "messages": []})
    assert status == 400 and "error" in json.loads(text), text
    assert len(fake.requests) == sent + 1 and ok.status_code == 200  # only the good call reached the engine
    assert [r["session_id"] for r in read_records(tmp_path)] == ["run-1.a_b:c@d"]


def test_split_session_path_reads_the_raw_path():
    assert split_session_path("/session/abc/v1/messages", b"/session/abc/v1/messages") == ("abc", "/v1/messages")
    with pytest.raises(BadSessionPath, match="holds a '/'"):
        split_session_path("/session/a/../b/v1/messages", b"/session/a%2F..%2Fb/v1/messages")
    with pytest.raises(BadSessionPath, match="over 200 characters"):
        split_session_path("/session/" + "a" * 201 + "/v1/messages")


# --- bounded answers ---------------------------------------------------------------------------


def _gzip_zeros(size: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return b"".join([packer.compress(b"\0" * (1 << 20)) for _ in range(size >> 20)] + [packer.flush()])


class Hostile:
    """An engine answering with a gzip bomb, one huge SSE line or an endless stream."""

    def __init__(self) -> None:
        self.bomb = _gzip_zeros(200 << 20)  # 200 MB of zeros in about 200 KB

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/chat/completions", self.chat, methods=["POST"])])

    async def chat(self, request: Request) -> Response:
        body = json.loads(await request.body())
        model = body.get("model")
        if model == "bomb":
            return Response(self.bomb, headers={"content-encoding": "gzip", "content-type": "application/json"})
        if model == "ok":
            return JSONResponse({"choices": [{"index": 0, "message": {"role": "assistant", "content": "fine"}}]})

        async def events():
            if model == "long-line":
                yield b'data: {"choices":[{"index":0,"delta":{"content":"'
                for _ in range(int(body.get("mb", 3)) * 16):
                    yield b"a" * (64 << 10)
                    await asyncio.sleep(0)
                yield b'"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
            else:  # endless: small events, forever
                while True:
                    yield b'data: {"choices":[{"index":0,"delta":{"content":"' + b"x" * 4000 + b'"}}]}\n\n'
                    await asyncio.sleep(0)

        return StreamingResponse(events(), media_type="text/event-stream")


@pytest.fixture(scope="module")
def hostile():
    engine = Hostile()
    with serve_in_thread(engine.app()) as url:
        yield url


def _body(model: str, **extra) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": "hi"}], **extra}


def test_a_gzip_bomb_fails_the_call_with_a_recorded_error_in_bounded_memory(hostile, tmp_path):
    with running_proxy(hostile, tmp_path, max_response_bytes=1 << 20) as proxy:
        tracemalloc.start()
        try:
            failed = http.post(f"{proxy}/session/h/v1/chat/completions", json=_body("bomb"))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        after = http.post(f"{proxy}/session/h/v1/chat/completions", json=_body("ok"))
    assert failed.status_code == 502 and "1,048,576 bytes" in failed.json()["error"]["message"]
    assert after.status_code == 200  # the proxy keeps serving
    assert peak < 24 << 20, f"{peak:,} bytes held for a 200 MB bomb under a 1 MB bound"
    records = read_records(tmp_path)
    assert "capture --max-response-bytes" in records[0]["error"] and "error" not in records[1]


@pytest.mark.parametrize(
    ("model", "option", "words"),
    [("long-line", "max_event_bytes", "one line"), ("endless", "max_response_bytes", "answer")],
)
def test_an_sse_line_or_stream_over_its_bound_fails_the_call_and_the_harness_hears_of_it(
    hostile, tmp_path, model, option, words
):
    with running_proxy(hostile, tmp_path, **{option: 1 << 20}) as proxy:
        chat = http.post(f"{proxy}/v1/chat/completions", json=_body(model, stream=True, mb=3))
        claude = http.post(
            f"{proxy}/v1/messages", json={"model": model, "max_tokens": 8, "stream": True, "mb": 3, "messages": []}
        )
    assert chat.status_code == 200 and '"error"' in chat.text and "1,048,576 bytes" in chat.text
    assert claude.status_code == 200 and "event: error" in claude.text
    records = read_records(tmp_path)
    assert len(records) == 2 and all(words in r["error"] and "1,048,576" in r["error"] for r in records)


def test_one_long_sse_line_is_joined_once_linear_in_its_size():
    # a line arriving in 512 reads of 64 KB: its pieces are kept and joined once, when it ends
    # (the old loop re-joined the whole pending line on every read: 512 * 511 / 2 pieces copied)
    splitter = LineSplitter(max_line=64 << 20)
    piece = b"a" * (64 << 10)
    assert [list(splitter.lines(piece)) for _ in range(512)] == [[]] * 512
    assert len(splitter.pending) == 512 and splitter.copied == 0
    (line, second) = list(splitter.lines(b'"}\ndata: [DONE]\n'))
    assert len(line) == 512 * len(piece) + 2 and second == b"data: [DONE]"
    assert splitter.copied == len(line)  # every byte copied once
    assert splitter.rest() is None
    tail = LineSplitter(max_line=10)
    assert list(tail.lines(b"ab\ncd")) == [b"ab"] and tail.rest() == b"cd"
    with pytest.raises(UpstreamTooLarge, match="over 10 bytes"):
        list(tail.lines(b"x" * 11))


def test_a_32_mb_sse_line_reaches_the_harness_and_the_record_whole(hostile, tmp_path):
    with running_proxy(hostile, tmp_path) as proxy:
        answer = http.post(f"{proxy}/v1/chat/completions", json=_body("long-line", stream=True, mb=32), timeout=120)
    assert answer.status_code == 200 and len(answer.content) > 32 << 20
    (record,) = read_records(tmp_path)
    assert len(record["response"][0]["choices"][0]["delta"]["content"]) == 32 << 20


# --- a slow engine head ------------------------------------------------------------------------


class SlowHead:
    """An engine that reads a long prompt: its response head waits until the test releases it."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/chat/completions", self.chat, methods=["POST"])])

    async def chat(self, request: Request) -> Response:
        body = json.loads(await request.body())
        while not self.release.is_set():  # the engine is still reading the prompt
            await asyncio.sleep(0.01)
        model = body.get("model")
        if model == "refuse":
            message = "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens"
            return JSONResponse({"error": {"message": message, "code": 400}}, status_code=400)
        message = {"role": "assistant", "content": "slow answer"}
        if model == "whole":
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            return JSONResponse({"id": "x", "object": "chat.completion", "model": "m", "choices": [choice]})

        async def events():
            for piece in ("slow", " answer"):
                delta = {"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
                yield b"data: " + json.dumps(delta).encode() + b"\n\n"
            yield b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'

        return StreamingResponse(events(), media_type="text/event-stream")


@pytest.mark.parametrize("model", ["stream", "whole", "refuse"])
@pytest.mark.parametrize("dialect", ["chat", "google"])
def test_a_slow_engine_head_starts_the_harness_stream_first_and_fills_it_after(tmp_path, model, dialect):
    import httpx

    engine = SlowHead()
    if dialect == "chat":
        path, body = (
            "/v1/chat/completions",
            {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": True},
        )
    else:
        path, body = (
            f"/v1beta/models/{model}:streamGenerateContent?alt=sse",
            {"contents": [{"parts": [{"text": "hi"}]}]},
        )
    with serve_in_thread(engine.app()) as url, running_proxy(url, tmp_path, head_wait=0.05) as proxy:
        with httpx.stream("POST", f"{proxy}{path}", json=body, timeout=30) as answer:
            assert answer.status_code == 200 and not engine.release.is_set()  # the head came first
            engine.release.set()
            text = answer.read().decode()
    (record,) = read_records(tmp_path)
    if model == "refuse":
        assert '"error"' in text and "upstream HTTP 400" in text
        assert "context_budget_exhausted" in record["error"] and record["status"] == 400
    elif dialect == "chat":
        assert "slow" in text and text.rstrip().endswith("data: [DONE]") and "error" not in record
    else:
        events = [json.loads(line[6:]) for line in text.split("\r\n\r\n") if line.startswith("data: ")]
        said = "".join(p.get("text", "") for e in events for p in e["candidates"][0]["content"]["parts"])
        assert said == "slow answer" and events[-1]["candidates"][0]["finishReason"] == "STOP"
        assert "error" not in record
