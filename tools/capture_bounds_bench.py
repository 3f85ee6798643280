"""Measure the capture proxy on hostile upstream answers (docs/limits.md, "The capture proxy").

Two measurements, each through a real ``rollout-graph capture`` process in front of a raw engine
that answers every call the same way:

- ``sse SIZE_MB``: one SSE event of SIZE_MB megabytes (a chat chunk whose content is that long),
  written in 64 KB pieces; prints the call's wall time and the proxy's peak resident memory.
- ``gzip SIZE_MB``: a non-streamed answer whose gzip body expands to SIZE_MB megabytes; prints the
  same, and what the harness got back.

Usage: ``python tools/capture_bounds_bench.py sse 40`` (or ``gzip 1600``); extra arguments go to
``rollout-graph capture`` (``--max-response-bytes 2G``). Nothing here runs in the test suite.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path

import httpx
import psutil

PIECE = 64 << 10


def _gzip_of_zeros(size: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b"\0" * (1 << 20)
    out = [packer.compress(block) for _ in range(size >> 20)]
    out.append(packer.flush())
    return b"".join(out)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _engine(kind: str, size: int, port: int, ready: threading.Event) -> None:
    gz = _gzip_of_zeros(size) if kind == "gzip" else b""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        lengths = [line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")]
        await reader.readexactly(int(lengths[0]) if lengths else 0)
        if head.startswith(b"GET"):  # the benchmark's own readiness check, passed through
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}")
            await writer.drain()
            writer.close()
            return
        if kind == "gzip":
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-encoding: gzip\r\n")
            writer.write(b"content-length: %d\r\nconnection: close\r\n\r\n" % len(gz))
            for i in range(0, len(gz), PIECE):
                writer.write(gz[i : i + PIECE])
                await writer.drain()
        else:
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")
            writer.write(b'data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"')
            filler = b"a" * PIECE
            for _ in range(size // PIECE):
                writer.write(filler)
                await writer.drain()
            writer.write(b'"},"finish_reason":null}]}\n\n')
            writer.write(
                b'data: {"id":"x","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
            )
            await writer.drain()
        writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", port)
        ready.set()
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def main(argv: list[str]) -> int:
    kind, size = argv[0], int(float(argv[1]) * (1 << 20))
    engine_port, proxy_port = _free_port(), _free_port()
    ready = threading.Event()
    threading.Thread(target=_engine, args=(kind, size, engine_port, ready), daemon=True).start()
    ready.wait(120)
    with tempfile.TemporaryDirectory() as out:
        command = [sys.executable, "-m", "rollout_graph", "capture", "--upstream", f"http://127.0.0.1:{engine_port}"]
        command += ["--out", out, "--port", str(proxy_port), "--quiet", "--no-probe", *argv[2:]]
        proxy = subprocess.Popen(command)
        try:
            process = psutil.Process(proxy.pid)
            url = f"http://127.0.0.1:{proxy_port}"
            for _ in range(200):
                try:
                    httpx.get(url + "/health", timeout=1)
                    break
                except httpx.HTTPError:
                    time.sleep(0.05)
            peak = [process.memory_info().rss]
            done = threading.Event()

            def watch() -> None:
                while not done.is_set():
                    try:
                        peak[0] = max(peak[0], process.memory_info().rss)
                    except psutil.Error:
                        return
                    time.sleep(0.02)

            threading.Thread(target=watch, daemon=True).start()
            body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": kind == "sse"}
            started = time.perf_counter()
            try:
                answer = httpx.post(url + "/v1/chat/completions", json=body, timeout=600)
                status, got = answer.status_code, len(answer.content)
            except httpx.HTTPError as exc:
                status, got = type(exc).__name__, 0
            seconds = time.perf_counter() - started
            done.set()
            print(
                f"{kind} {argv[1]} MB: {seconds:.2f} s, harness got {status} ({got:,} bytes), proxy peak RSS {peak[0] / 2**20:.0f} MB"
            )
        finally:
            proxy.terminate()
            proxy.wait(60)
        for path in Path(out).glob("*.jsonl"):
            print(f"  record file {path.name}: {path.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
