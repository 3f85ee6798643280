"""Issue 28: the capture proxy never loses a call silently (full disk, secrets, odd headers and
chunks, big and slow bodies, a harness hanging up mid-upload, the query string, one-line logs).

The upstream here is a tiny Starlette app that records what reached it and answers with canned
bodies or streams, so each fault is exact; the proxy runs in a thread on a free loopback port.
"""

from __future__ import annotations

import errno
import json
import logging
import socket
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from rollout_graph.capture import writer as writer_module
from rollout_graph.capture.server import _OneLine, create_app
from rollout_graph.capture.sessions import MASK, is_secret_header, mask_secrets
from rollout_graph.capture.writer import RecordWriter
from rollout_graph.ingest.load.files import load_paths
from tests.support.capture_helpers import http, read_records, running_proxy, sse_events
from tests.support.fake_upstream import serve_in_thread


def _completion(text: str = "ok") -> dict:
    return {
        "id": "c1",
        "object": "chat.completion",
        "model": "m",
        "prompt_token_ids": [1, 2, 3],
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
                "token_ids": [4],
                "logprobs": {"content": [{"token": "token_id:4", "logprob": -0.1, "top_logprobs": []}]},
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1},
    }


def _chunk(content: str | None = None, finish: str | None = None, token: int = 4) -> dict:
    choice: dict[str, Any] = {"index": 0, "delta": {"content": content or ""}, "finish_reason": finish}
    choice["token_ids"] = [token]
    choice["logprobs"] = {"content": [{"token": f"token_id:{token}", "logprob": -0.1, "top_logprobs": []}]}
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "m",
        "prompt_token_ids": [1, 2, 3],
        "choices": [choice],
    }


class Upstream:
    """Records every request (path, query, headers, body); streams ``self.chunks`` when asked."""

    def __init__(self) -> None:
        self.seen: list[dict] = []
        self.chunks: list[Any] = [_chunk("a", token=4), {"choices": 7}, _chunk("b", token=5), _chunk(None, "stop", 6)]

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/{path:path}", self.handle, methods=["GET", "POST"])])

    async def handle(self, request: Request) -> Response:
        body = await request.body()
        self.seen.append(
            {
                "path": request.url.path,
                "query": request.url.query,
                "headers": {k.decode("latin-1"): v for k, v in request.headers.raw},
                "body": orjson.loads(body) if body else None,
            }
        )
        if request.url.path == "/v1/models":
            return JSONResponse({"data": [{"id": "m"}]}, headers={"x-served-by": "caf\u00e9"})
        parsed = orjson.loads(body)
        if parsed.get("stream"):

            async def events():
                for chunk in self.chunks:
                    yield b"data: " + (chunk if isinstance(chunk, bytes) else orjson.dumps(chunk)) + b"\n\n"
                yield b"data: [DONE]\n\n"

            return StreamingResponse(events(), media_type="text/event-stream")
        return JSONResponse(_completion())


@pytest.fixture
def upstream():
    fake = Upstream()
    with serve_in_thread(fake.app()) as url:
        yield url, fake


# --- secrets --------------------------------------------------------------------------------


def test_secrets_in_bodies_are_masked_in_both_recorded_bodies_and_still_reach_the_upstream(upstream, tmp_path):
    url, fake = upstream
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "my password is hunter2"}],
        "api_key": "sk-body",
        "extra_body": {"api_key": "sk-extra"},
        "metadata": {"token": "tok-meta", "session_name": "kept"},
        "max_tokens": 16,
    }
    headers = {"X-Credentials": "c", "X-Access-Code": "a", "X-Passwd": "p", "X-Title": "kept"}
    with running_proxy(url, tmp_path) as proxy:
        assert http.post(f"{proxy}/v1/chat/completions", json=body, headers=headers).status_code == 200
    [record] = read_records(tmp_path)
    text = json.dumps(record)
    for secret in ("sk-body", "sk-extra", "tok-meta", '"c"', '"a"', '"p"'):
        assert secret not in text, secret
    for recorded in (record["request"], record["submitted_request"]):
        assert recorded["api_key"] == MASK and recorded["extra_body"]["api_key"] == MASK
        assert recorded["metadata"] == {"token": MASK, "session_name": "kept"}
        assert recorded["max_tokens"] == 16 and recorded["messages"] == body["messages"]
    assert set(record["headers"]) >= {"x-title"} and not {"x-credentials", "x-access-code", "x-passwd"} & set(
        record["headers"]
    )
    sent = fake.seen[-1]
    assert sent["body"]["api_key"] == "sk-body" and sent["body"]["extra_body"]["api_key"] == "sk-extra"
    assert load_paths([tmp_path]).loaded == 1


def test_the_secret_rule_spares_counts_switches_and_schemas():
    body = {
        "max_tokens": 9,
        "return_token_ids": True,
        "tools": [{"function": {"parameters": {"properties": {"password": {"type": "string"}}}}}],
        "auth": {"user": "u", "pass": "p"},
        "nested": [{"Access-Code": "x"}],
    }
    masked = mask_secrets(body)
    assert masked["max_tokens"] == 9 and masked["return_token_ids"] is True
    assert masked["tools"] is body["tools"] and masked["auth"] == MASK and masked["nested"] == [{"Access-Code": MASK}]
    assert body["auth"] == {"user": "u", "pass": "p"}  # the caller's body is never changed
    assert all(is_secret_header(h) for h in ("X-Credentials", "X-Access-Code", "X-Passwd", "X-Api-Key", "Cookie"))
    assert not any(is_secret_header(h) for h in ("X-Title", "User-Agent", "Content-Type", "X-Session-Id"))


# --- headers, query strings -------------------------------------------------------------------


def test_a_non_ascii_header_value_is_forwarded_and_recorded_not_a_crash(upstream, tmp_path):
    url, fake = upstream
    headers = [("X-Title", "Caf\u00e9 app".encode())]
    body = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}]})
    with running_proxy(url, tmp_path) as proxy:
        chat = http.post(f"{proxy}/v1/chat/completions", content=body, headers=headers)
        models = http.get(f"{proxy}/v1/models", headers=headers)
    assert chat.status_code == 200, chat.text
    assert models.status_code == 200 and models.json()["data"][0]["id"] == "m"
    assert models.headers["x-served-by"].encode("latin-1") == "caf\u00e9".encode("latin-1")
    assert all(seen["headers"]["x-title"] == "Caf\u00e9 app".encode() for seen in fake.seen)
    [record] = read_records(tmp_path)
    assert record["headers"]["x-title"] == "Caf\u00e9 app"


def test_the_query_string_reaches_the_engine_and_the_record(upstream, tmp_path):
    url, fake = upstream
    with running_proxy(url, tmp_path) as proxy:
        r = http.post(
            f"{proxy}/v1/chat/completions?api-version=2024-10-21",
            json={"model": "m", "messages": [{"role": "user", "content": "x"}]},
        )
    assert r.status_code == 200
    assert fake.seen[-1]["query"] == "api-version=2024-10-21"
    assert read_records(tmp_path)[0]["query"] == "api-version=2024-10-21"


# --- odd chunks ---------------------------------------------------------------------------------


def test_one_odd_upstream_chunk_is_skipped_and_recorded_never_a_cut_stream(upstream, tmp_path):
    url, _ = upstream
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": True}
    with running_proxy(url, tmp_path) as proxy:
        r = http.post(f"{proxy}/v1/chat/completions", json=body)
        anthropic = http.post(
            f"{proxy}/v1/messages",
            json={"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "x"}], "stream": True},
        )
    assert r.status_code == 200
    events = [d for _, d in sse_events(r.text)]
    contents = [e["choices"][0]["delta"]["content"] for e in events if isinstance(e, dict) and e.get("choices")]
    assert contents[:2] == ["a", "b"] and events[-1] == "[DONE]"
    names = [name for name, _ in sse_events(anthropic.text)]
    assert anthropic.status_code == 200 and names[-1] == "message_stop", names
    records = read_records(tmp_path)
    assert all("error" not in rec for rec in records), [rec.get("error") for rec in records]
    assert all(any("skipped" in n for n in rec.get("stream_notes", [])) for rec in records)


def test_an_anthropic_client_gets_an_error_event_when_the_upstream_really_fails(upstream, tmp_path):
    url, fake = upstream
    fake.chunks = [_chunk("a"), {"error": {"message": "engine died"}}]
    with running_proxy(url, tmp_path) as proxy:
        r = http.post(
            f"{proxy}/v1/messages",
            json={"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "x"}], "stream": True},
        )
    events = sse_events(r.text)
    assert events[-1][0] == "error" and "engine died" in json.dumps(events[-1][1])
    assert "engine died" in read_records(tmp_path)[0]["error"]


# --- bodies: cap, slow clients, hanging up --------------------------------------------------------


def test_a_body_over_the_cap_is_a_413_and_a_recorded_failure(upstream, tmp_path):
    url, fake = upstream
    big = {"model": "m", "messages": [{"role": "user", "content": "x" * 50_000}]}

    def chunked():  # no Content-Length: the cap holds on what arrives
        data = orjson.dumps(big)
        for at in range(0, len(data), 4096):
            yield data[at : at + 4096]

    with running_proxy(url, tmp_path, max_body_bytes=10_000) as proxy:
        declared = http.post(f"{proxy}/v1/chat/completions", json=big)
        streamed = http.post(f"{proxy}/v1/chat/completions", content=chunked())
        small = http.post(f"{proxy}/v1/chat/completions", json={"model": "m", "messages": []})
    assert declared.status_code == 413 and "10,000 bytes" in declared.json()["error"]["message"]
    assert streamed.status_code == 413 and small.status_code == 200
    records = read_records(tmp_path)
    assert [r.get("status") for r in records] == [413, 413, 200]
    assert records[0]["request"] is None and "--max-body-bytes" in records[0]["error"]
    assert len(fake.seen) == 1  # the big bodies never reached the engine


def _raw_request(port: int, body_sent: bytes, declared: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {declared}\r\n\r\n"
    ).encode()
    sock.sendall(head + body_sent)
    return sock


def test_a_slow_client_is_timed_out_with_a_408(upstream, tmp_path):
    url, _ = upstream
    with running_proxy(url, tmp_path, client_timeout=0.5) as proxy:
        sock = _raw_request(int(proxy.rsplit(":", 1)[1]), b'{"model": "m", ', 1000)
        answer = sock.recv(65536).decode("latin-1")
        sock.close()
    assert answer.startswith("HTTP/1.1 408"), answer[:200]
    [record] = read_records(tmp_path)
    assert record["status"] == 408 and "stalled" in record["error"] and record["latency_s"] < 5


def test_a_harness_hanging_up_mid_upload_closes_its_record_at_once(upstream, tmp_path):
    url, _ = upstream
    with running_proxy(url, tmp_path) as proxy:
        app_writer_path = None
        sock = _raw_request(int(proxy.rsplit(":", 1)[1]), b'{"model": "m", ', 1000)
        time.sleep(0.3)
        sock.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # written while the proxy still runs, not at shutdown
            files = list(tmp_path.glob("*.jsonl"))
            if files and files[0].read_bytes().endswith(b"\n"):
                app_writer_path = files[0]
                break
            time.sleep(0.05)
    assert app_writer_path is not None, "the record stayed open until the proxy stopped"
    [record] = read_records(tmp_path)
    assert "hung up" in record["error"] and 0.2 < record["latency_s"] < 5


# --- the writer on a full disk --------------------------------------------------------------------


def test_a_full_disk_is_reported_per_call_and_the_file_stays_line_consistent(tmp_path, monkeypatch):
    real_write = writer_module.os.write
    state = {"full": False}

    def write(fd: int, data) -> int:
        if state["full"]:
            real_write(fd, bytes(data[: len(data) // 2]))  # half the line reaches the disk, then ENOSPC
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(writer_module.os, "write", write)
    reported: list[str] = []
    writer = RecordWriter.in_folder(tmp_path, on_error=reported.append)
    for i in range(5):
        writer.write({"call_id": f"ok{i}", "n": i})
    _drain(writer, 5)
    state["full"] = True
    for i in range(3):
        writer.write({"call_id": f"lost{i}", "n": i})
    _drain_errors(writer, 3)
    assert len(reported) == 3 and all("No space left on device" in r for r in reported)
    assert [f"lost{i}" in r for i, r in enumerate(reported)] == [True] * 3  # each reported as it happened
    state["full"] = False  # space returns: the next call lands on a clean line
    writer.write({"call_id": "after", "n": 9})
    writer.close()
    lines = writer.path.read_bytes().split(b"\n")
    assert lines[-1] == b""
    parsed = [orjson.loads(line) for line in lines[:-1]]
    assert [p["call_id"] for p in parsed] == [f"ok{i}" for i in range(5)] + ["after"]
    assert writer.written == len(parsed) == 6


def _drain(writer: RecordWriter, n: int) -> None:
    deadline = time.monotonic() + 10
    while writer.written < n and time.monotonic() < deadline:
        time.sleep(0.01)


def _drain_errors(writer: RecordWriter, n: int) -> None:
    deadline = time.monotonic() + 10
    while len(writer.errors) < n and time.monotonic() < deadline:
        time.sleep(0.01)


def test_small_records_queued_behind_a_big_one_are_written_first(tmp_path, monkeypatch):
    """What a SIGKILL during a 200 MB write would lose: only that record, not the calls behind it."""
    writer = RecordWriter.in_folder(tmp_path)
    order: list[str] = []
    release = threading.Event()
    real = writer._write_line

    def slow_first(data: bytes) -> None:
        order.append(orjson.loads(data)["call_id"])
        if order[0] == "blocker" and len(order) == 1:
            release.wait(10)
        real(data)

    monkeypatch.setattr(writer, "_write_line", slow_first)
    writer.write({"call_id": "blocker"})
    time.sleep(0.1)
    writer.write({"call_id": "big", "blob": "x" * (writer_module.BIG_RECORD + 10)})
    for i in range(3):
        writer.write({"call_id": f"small{i}"})
    release.set()
    writer.close()
    assert order == ["blocker", "small0", "small1", "small2", "big"]
    assert writer.written == 5


# --- expected events in one line --------------------------------------------------------------------


def test_expected_events_are_logged_in_one_line():
    log_filter = _OneLine()
    for exc in (httpx.ReadTimeout("read timed out"), httpx.RemoteProtocolError("peer closed")):
        try:
            raise exc
        except httpx.HTTPError:
            import sys

            record = logging.LogRecord(
                "uvicorn.error", logging.ERROR, "x", 1, "Exception in ASGI application", (), sys.exc_info()
            )
        assert log_filter.filter(record)
        assert record.exc_info is None and "\n" not in record.getMessage()
        assert type(exc).__name__ in record.getMessage()
    try:
        raise ValueError("a real bug")
    except ValueError:
        import sys

        bug = logging.LogRecord(
            "uvicorn.error", logging.ERROR, "x", 1, "Exception in ASGI application", (), sys.exc_info()
        )
    log_filter.filter(bug)
    assert bug.exc_info is not None  # a bug keeps its traceback


def test_the_app_installs_the_one_line_filter(tmp_path):
    create_app(
        __import__("rollout_graph.capture.server", fromlist=["CaptureConfig"]).CaptureConfig(
            "http://127.0.0.1:9", tmp_path
        ),
        RecordWriter.in_folder(tmp_path),
    ).state.writer.close()
    assert any(isinstance(f, _OneLine) for f in logging.getLogger("uvicorn.error").filters)


def test_a_recorded_count_equals_the_parseable_lines(upstream, tmp_path):
    url, _ = upstream
    with running_proxy(url, tmp_path) as proxy:
        for _ in range(4):
            http.post(f"{proxy}/v1/chat/completions", json={"model": "m", "messages": []})
    files = list(Path(tmp_path).glob("*.jsonl"))
    assert len(read_records(tmp_path)) == 4 and len(files) == 1


def test_a_responses_client_gets_response_failed_when_the_upstream_really_fails(upstream, tmp_path):
    url, fake = upstream
    fake.chunks = [_chunk("a"), {"error": {"message": "engine died"}}]
    with running_proxy(url, tmp_path) as proxy:
        r = http.post(f"{proxy}/v1/responses", json={"model": "m", "input": "x", "stream": True})
    events = sse_events(r.text)
    assert events[-1][0] == "response.failed" and "engine died" in json.dumps(events[-1][1])


def test_an_odd_chunk_keeps_a_responses_stream_whole(upstream, tmp_path):
    url, _ = upstream
    with running_proxy(url, tmp_path) as proxy:
        r = http.post(f"{proxy}/v1/responses", json={"model": "m", "input": "x", "stream": True})
    names = [name for name, _ in sse_events(r.text)]
    assert names[-1] == "response.completed", names
    assert "error" not in read_records(tmp_path)[0]


def test_an_upstream_cut_is_logged_in_one_line_not_a_traceback(tmp_path):
    from tests.support.fake_upstream import running_upstream

    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    logger = logging.getLogger("uvicorn.error")
    handler = Keep()
    with running_upstream() as (url, _), running_proxy(url, tmp_path) as proxy:
        logger.addHandler(handler)  # after the servers configured their logging (dictConfig drops handlers)
        try:
            body = {"model": "fake-cut", "messages": [{"role": "user", "content": "x"}], "stream": True}
            with pytest.raises(httpx.HTTPError):
                http.post(f"{proxy}/v1/chat/completions", json=body).raise_for_status()
            time.sleep(0.3)
        finally:
            logger.removeHandler(handler)
    proxy_records = [
        r for r in seen if "fake upstream" not in str(r.exc_info)
    ]  # the fake engine's own cut is its affair
    cut = [r for r in proxy_records if "stream cut" in r.getMessage()]
    assert cut, [r.getMessage() for r in seen]
    assert all(r.exc_info is None and "\n" not in r.getMessage() for r in proxy_records), [r.getMessage() for r in seen]
    assert "upstream stream cut" in read_records(tmp_path)[0]["error"]


# --- stream framing: the proxy cuts the engine's bytes into lines itself ------------------------


def _framed_upstream(pieces: list[bytes]) -> Starlette:
    """An engine whose stream comes in exactly these byte pieces."""

    async def chat(request: Request) -> Response:
        async def body():
            for piece in pieces:
                yield piece

        return StreamingResponse(body(), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


def _sse(content: str, ids: list[int]) -> bytes:
    chunk = {"choices": [{"index": 0, "delta": {"content": content}, "token_ids": ids, "finish_reason": None}]}
    return b"data: " + orjson.dumps(chunk)


def test_events_split_joined_crlf_or_unterminated_reach_the_harness_whole_and_recorded(tmp_path):
    """Two events in one read, one event cut mid-JSON across reads, CRLF endings, a comment, and
    a last line without its newline: the harness gets every event (without the added ids), the
    record every chunk, and nothing is called an error."""
    a, b, c = _sse("a", [1]), _sse("b", [2]), _sse("c", [3])
    pieces = [
        b": keep-alive\r\n\r\n" + a + b"\r\n\r\n" + b + b"\r\n\r\n",  # a comment and two events in one read
        c[:17],  # an event cut in the middle of its JSON
        c[17:] + b"\n\n",
        b"data: [DONE]",  # no newline at the end
    ]
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": True}
    with serve_in_thread(_framed_upstream(pieces)) as url, running_proxy(url, tmp_path) as proxy:
        r = http.post(f"{proxy}/v1/chat/completions", json=body)
    assert r.status_code == 200
    events = [d for _, d in sse_events(r.text)]
    assert [e["choices"][0]["delta"]["content"] for e in events[:-1]] == ["a", "b", "c"]
    assert events[-1] == "[DONE]"
    assert all("token_ids" not in e["choices"][0] for e in events[:-1])  # the proxy added them: stripped
    assert ": keep-alive\n" in r.text  # a comment passes through
    (record,) = read_records(tmp_path)
    assert "error" not in record and "stream_notes" not in record
    assert [ch["choices"][0]["token_ids"] for ch in record["response"][:-1]] == [[1], [2], [3]]
    assert record["response"][-1] == "data: [DONE]"
