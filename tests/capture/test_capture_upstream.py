"""The capture proxy's own HTTP/1.1 client to the engine (graph/capture/upstream.py).

Each test plays an engine on a raw socket that writes exactly the bytes given (split across reads
where the framing is hardest), so every way HTTP/1.1 frames a body is exercised as a real engine
(or a proxy in front of one) may send it.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import threading
import time
from collections.abc import Awaitable, Callable

import httpx
import pytest

from rollout_graph.capture.upstream import UpstreamClient, usable
from tests.support.capture_helpers import read_records, running_proxy

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """One request's head and body as the engine got them."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return head, await reader.readexactly(length)


def _run(handler: Handler, client_side: Callable[[UpstreamClient], Awaitable[object]], **options) -> object:
    async def main() -> object:
        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = UpstreamClient(f"http://127.0.0.1:{port}", timeout=options.pop("timeout", 5.0), **options)
        try:
            return await client_side(client)
        finally:
            await client.aclose()
            server.close()

    return asyncio.run(main())


async def _pieces(writer: asyncio.StreamWriter, *pieces: bytes) -> None:
    for piece in pieces:
        writer.write(piece)
        await writer.drain()
        await asyncio.sleep(0.01)  # each piece its own read on the other side


def _post(client: UpstreamClient, stream: bool = False) -> Callable[[UpstreamClient], Awaitable[object]]:
    async def call(client: UpstreamClient) -> object:
        response = await client.send("/v1/chat/completions", [(b"content-type", b"application/json")], b'{"a": 1}')
        if stream:
            pieces = [piece async for piece in response.aiter_bytes()]
        else:
            pieces = [await response.aread()]
        await response.aclose()
        return response.status_code, response.headers, pieces

    return call


def test_a_chunked_stream_comes_back_whole_with_sizes_extensions_and_trailers_split_across_reads():
    async def engine(reader, writer):
        head, body = await _request(reader)
        assert head.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n") and body == b'{"a": 1}'
        await _pieces(
            writer,
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
            b'10\r\ndata: {"x": 1}\n\n\r\n',
            b"10;ext=1\r\ndata: ",  # a size with an extension, the data cut in two reads
            b'{"x": 2}\n\n\r\n',
            b"e",  # the next size line cut in two
            b"\r\ndata: [DONE]\n\n\r\n",
            b"0\r\nx-trailer: 1\r\n\r\n",
        )
        writer.close()

    status, headers, pieces = _run(engine, _post(None, stream=True))
    assert status == 200 and headers["content-type"] == "text/event-stream"
    assert b"".join(pieces) == b'data: {"x": 1}\n\ndata: {"x": 2}\n\ndata: [DONE]\n\n'
    assert len(pieces) >= 3  # handed on as the reads came, not held to the end


def test_content_length_close_delimited_and_gzip_bodies_are_read_whole():
    payload = json.dumps({"ok": "é" * 5000}).encode()

    def engine_for(head: bytes, body: bytes, close: bool) -> Handler:
        async def engine(reader, writer):
            await _request(reader)
            await _pieces(writer, head, body[:7], body[7:3000], body[3000:])
            if close:
                writer.close()
            else:
                await asyncio.sleep(0.2)
                writer.close()

        return engine

    sized = b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(payload)
    assert _run(engine_for(sized, payload, False), _post(None))[2] == [payload]
    closed = b"HTTP/1.0 200 OK\r\ncontent-type: application/json\r\n\r\n"
    assert _run(engine_for(closed, payload, True), _post(None))[2] == [payload]
    packed = gzip.compress(payload)
    zipped = b"HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\ncontent-length: %d\r\n\r\n" % len(packed)
    assert _run(engine_for(zipped, packed, False), _post(None))[2] == [payload]


def test_a_100_continue_is_skipped_and_repeated_headers_are_joined():
    async def engine(reader, writer):
        await _request(reader)
        writer.write(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\nx-a: 1\r\nX-A: 2\r\ncontent-length: 2\r\n\r\nno"
        )
        await writer.drain()
        writer.close()

    status, headers, pieces = _run(engine, _post(None))
    assert (status, headers["x-a"], pieces) == (404, "1, 2", [b"no"])


def test_one_connection_serves_call_after_call_and_a_stale_one_is_replaced_once():
    connections = []

    async def engine(reader, writer):
        connections.append(writer)
        n = 0
        while True:
            try:
                await _request(reader)
            except asyncio.IncompleteReadError:
                return
            n += 1
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
            await writer.drain()
            if len(connections) == 1 and n == 3:  # the engine drops its first connection after 3 calls
                writer.close()
                return

    async def calls(client: UpstreamClient) -> object:
        bodies = []
        for _ in range(5):
            response = await client.send("/v1/completions", [], b"{}")
            bodies.append(await response.aread())
            await asyncio.sleep(0)
        return bodies

    assert _run(engine, calls) == [b"ok"] * 5
    assert len(connections) == 2  # three calls on the first, the rest on one new one


def test_a_new_connection_closed_without_an_answer_is_an_error_and_not_sent_twice():
    requests = []

    async def engine(reader, writer):
        requests.append(await _request(reader))
        writer.close()

    with pytest.raises(httpx.RemoteProtocolError):
        _run(engine, _post(None))
    assert len(requests) == 1


def test_an_engine_cut_inside_a_body_a_stall_and_bad_framing_are_httpx_errors():
    def engine_for(*pieces: bytes, stall: float = 0.0) -> Handler:
        async def engine(reader, writer):
            await _request(reader)
            await _pieces(writer, *pieces)
            await asyncio.sleep(stall)
            writer.close()

        return engine

    chunked = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
    with pytest.raises(httpx.RemoteProtocolError, match="complete message body"):
        _run(engine_for(chunked, b"10\r\nonly part"), _post(None, stream=True))
    with pytest.raises(httpx.ReadTimeout):
        _run(engine_for(chunked, b"2\r\nok\r\n", stall=2.0), _post(None, stream=True), timeout=0.5)
    with pytest.raises(httpx.RemoteProtocolError, match="not hex"):
        _run(engine_for(chunked, b"zz\r\nok\r\n"), _post(None, stream=True))
    huge = b"HTTP/1.1 200 OK\r\nx-big: " + b"a" * (1 << 20) + b"\r\n\r\n"
    with pytest.raises(httpx.RemoteProtocolError, match="head is over 1 MB"):
        _run(engine_for(huge[:70_000], huge[70_000:]), _post(None))
    with pytest.raises(httpx.RemoteProtocolError, match="not an HTTP response"):
        _run(engine_for(b"SSH-2.0-OpenSSH\r\n\r\n"), _post(None))


def test_an_unreachable_engine_is_a_connect_error():
    async def call(client: UpstreamClient) -> object:
        return await client.send("/v1/completions", [], b"{}")

    async def main() -> None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        client = UpstreamClient(f"http://127.0.0.1:{port}", timeout=5.0)
        with pytest.raises(httpx.ConnectError):
            await call(client)

    asyncio.run(main())


def test_an_engine_behind_a_proxy_from_the_environment_stays_on_httpx(monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert usable("http://engine:8000") and usable("https://engine") and not usable("unix:///tmp/x")
    monkeypatch.setenv("HTTP_PROXY", "http://corp-proxy:3128")
    assert not usable("http://engine:8000")
    monkeypatch.setenv("NO_PROXY", "engine")
    assert usable("http://engine:8000")


def test_a_recorded_stream_through_the_proxy_keeps_the_engine_path_prefix_and_query(tmp_path):
    """End to end: an engine under a path prefix, chunked SSE split oddly, recorded in full."""
    seen = []

    async def engine(reader, writer):
        while True:
            try:
                head, body = await _request(reader)
            except asyncio.IncompleteReadError:
                return
            seen.append(head.split(b"\r\n")[0])
            if not head.startswith(b"POST"):
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}")
                continue
            event = b'data: {"choices": [{"index": 0, "delta": {"content": "hi"}, "token_ids": [4]}]}\n\n'
            framed = b"%x\r\n%s\r\n" % (len(event), event)
            done = b"%x\r\ndata: [DONE]\n\n\r\n0\r\n\r\n" % len(b"data: [DONE]\n\n")
            sse = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
            await _pieces(writer, sse + framed[:9], framed[9:] + done)

    async def serve(port_box: list[int], stop: asyncio.Event) -> None:
        server = await asyncio.start_server(engine, "127.0.0.1", 0)
        port_box.append(server.sockets[0].getsockname()[1])
        await stop.wait()
        server.close()

    loop = asyncio.new_event_loop()
    port_box: list[int] = []
    stop = asyncio.Event()
    thread = threading.Thread(target=loop.run_until_complete, args=(serve(port_box, stop),), daemon=True)
    thread.start()
    while not port_box:
        time.sleep(0.01)
    try:
        with running_proxy(f"http://127.0.0.1:{port_box[0]}/engine/v1", tmp_path) as proxy:
            body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": True}
            with httpx.Client(timeout=10) as client:
                with client.stream("POST", f"{proxy}/v1/chat/completions?api-version=2", json=body) as r:
                    text = b"".join(r.iter_bytes())
        assert r.status_code == 200 and text.count(b"data: ") == 2 and b'"hi"' in text
        assert b"POST /engine/v1/chat/completions?api-version=2 HTTP/1.1" in seen
        (record,) = read_records(tmp_path)
        assert record["status"] == 200 and record["response"][-1] == "data: [DONE]" and "error" not in record
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(5)
