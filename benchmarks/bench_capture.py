"""The capture proxy's cost: added latency per call, and many concurrent streaming sessions.

The fake vLLM-shaped engine (tests/fake_upstream.py) and ``rollout-graph capture`` run as their
own processes, as in real use; this process is the harness.

1. Added latency: the same small chat call, alternately straight to the engine and through the
   proxy (non-streamed, and streamed to the last byte); median of each, and the difference.
   Then the same streamed call under load: ``--concurrent`` sessions (32) at once, each
   alternating direct and proxied calls, every call timed to its last byte (issue 24's goal:
   median added latency <= 3 ms per streamed call with 32 concurrent sessions), once with an
   engine that answers at once (the sessions never pause: the proxy's CPU is shared 32 ways)
   and once with the engine pausing ``--delay`` between chunks (closer to a real engine).
2. Concurrency: 64 sessions, each a 4-turn conversation of streamed calls (the engine waits
   ``--delay`` seconds between chunks), all at once; then the capture file is loaded and every
   session must be one complete chain with nothing lost.

``python benchmarks/bench_capture.py [--calls 300] [--concurrent 32] [--sessions 64] [--turns 4]
[--delay 0.01]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rollout_graph.ingest.loading import load_paths  # noqa: E402
from rollout_graph.pipeline import analyse  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(url: str, process: subprocess.Popen) -> None:
    deadline = time.time() + 30
    while time.time() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{url} exited with {process.returncode}")
        try:
            httpx.get(f"{url}/v1/models", timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not start")


def start(command: list[str]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop(process: subprocess.Popen) -> int:
    process.send_signal(signal.SIGINT)
    try:
        return process.wait(60)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait()


BODY = {"model": "m", "messages": [{"role": "user", "content": "say something short"}], "max_tokens": 8}


# A long context: 32,000 prompt tokens, whose ids the engine returns and the proxy records.
BIG = {**BODY, "messages": [{"role": "user", "content": " ".join(f"w{i % 5000}" for i in range(32_000))}]}


def timed_call(client: httpx.Client, url: str, stream: bool, body: dict = BODY) -> float:
    t0 = time.perf_counter()
    if stream:
        with client.stream("POST", f"{url}/v1/chat/completions", json={**body, "stream": True}) as r:
            for _ in r.iter_bytes():
                pass
    else:
        r = client.post(f"{url}/v1/chat/completions", json=body)
    assert r.status_code == 200
    return time.perf_counter() - t0


def latency(engine: str, proxy: str, calls: int) -> None:
    cases = [
        ("non-streamed", False, BODY, calls),
        ("streamed (to last byte)", True, BODY, calls),
        ("32k-token prompt", False, BIG, max(10, calls // 10)),
    ]
    with httpx.Client(timeout=30) as client:
        for kind, stream, body, n in cases:
            for _ in range(min(20, n)):  # warm up connections and code paths
                timed_call(client, engine, stream, body)
                timed_call(client, proxy, stream, body)
            direct, through = [], []
            for _ in range(n):  # interleaved, so drift on the shared machine hits both alike
                direct.append(timed_call(client, engine, stream, body))
                through.append(timed_call(client, proxy, stream, body))
            d, p = statistics.median(direct), statistics.median(through)
            print(
                f"{kind:>24}: direct {d * 1e3:6.2f} ms · through the proxy {p * 1e3:6.2f} ms · "
                f"added {(p - d) * 1e3:5.2f} ms (median of {n}; p90 added "
                f"{(statistics.quantiles(through, n=10)[8] - statistics.quantiles(direct, n=10)[8]) * 1e3:5.2f} ms)"
            )


async def concurrent_latency(engine: str, proxy: str, sessions: int, calls: int) -> None:
    """Streamed calls from ``sessions`` concurrent harnesses, each alternating direct and proxied
    calls (the order flipping every call), timed to the last byte."""
    limits = httpx.Limits(max_connections=sessions * 2, max_keepalive_connections=sessions * 2)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:

        async def one(url: str) -> float:
            t0 = time.perf_counter()
            async with client.stream("POST", url, json={**BODY, "stream": True}) as r:
                assert r.status_code == 200
                async for _ in r.aiter_bytes():
                    pass
            return time.perf_counter() - t0

        async def harness(s: int, n: int) -> tuple[list[float], list[float]]:
            direct, through = [], []
            urls = (f"{engine}/v1/chat/completions", f"{proxy}/session/lat{s}/v1/chat/completions")
            for i in range(n):
                first, second = urls if (i + s) % 2 == 0 else urls[::-1]
                a, b = await one(first), await one(second)
                d, p = (a, b) if first == urls[0] else (b, a)
                direct.append(d)
                through.append(p)
            return direct, through

        await asyncio.gather(*(harness(s, 3) for s in range(sessions)))  # warm-up: connections, code paths
        results = await asyncio.gather(*(harness(s, calls) for s in range(sessions)))
    direct = [t for d, _ in results for t in d]
    through = [t for _, p in results for t in p]
    added = [p - d for d, p in zip(direct, through, strict=True)]
    dm, pm = statistics.median(direct), statistics.median(through)
    print(
        f"{'streamed, ' + str(sessions) + ' concurrent':>24}: direct {dm * 1e3:6.2f} ms · through the proxy "
        f"{pm * 1e3:6.2f} ms · added {(pm - dm) * 1e3:5.2f} ms (medians of {len(direct)} each; median of the "
        f"paired differences {statistics.median(added) * 1e3:5.2f} ms)"
    )


async def conversation(client: httpx.AsyncClient, proxy: str, session: int, turns: int) -> int:
    messages = [{"role": "system", "content": "be terse"}, {"role": "user", "content": f"task {session}"}]
    chunks = 0
    for turn in range(turns):
        text = ""
        url = f"{proxy}/session/s{session}/v1/chat/completions"
        async with client.stream("POST", url, json={"model": "m", "messages": messages, "stream": True}) as r:
            assert r.status_code == 200
            async for line in r.aiter_lines():
                if line.startswith("data: {"):
                    chunks += 1
                    delta = json.loads(line[6:])["choices"][0]["delta"]
                    text += delta.get("content") or ""
        messages = [*messages, {"role": "assistant", "content": text}, {"role": "user", "content": f"next {turn}"}]
    return chunks


async def concurrent_sessions(proxy: str, sessions: int, turns: int) -> tuple[float, int]:
    limits = httpx.Limits(max_connections=sessions * 2)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        t0 = time.perf_counter()
        chunks = await asyncio.gather(*(conversation(client, proxy, s, turns) for s in range(sessions)))
        return time.perf_counter() - t0, sum(chunks)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--concurrent", type=int, default=32, help="sessions at once for the loaded latency")
    parser.add_argument("--concurrent-calls", type=int, default=20, help="calls per session, each way")
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--delay", type=float, default=0.01, help="engine delay between stream chunks (s)")
    args = parser.parse_args()

    out = Path(tempfile.mkdtemp(prefix="bench-capture-"))
    engine_port, proxy_port = free_port(), free_port()
    engine_url, proxy_url = f"http://127.0.0.1:{engine_port}", f"http://127.0.0.1:{proxy_port}"
    engine = start([sys.executable, "-m", "tests.fake_upstream", str(engine_port)])
    cli = [sys.executable, "-m", "rollout_graph", "capture", "--upstream", engine_url, "--out", str(out)]
    proxy = start([*cli, "--port", str(proxy_port)])
    try:
        wait_up(engine_url, engine)
        wait_up(proxy_url, proxy)
        print(f"added latency per call ({os.cpu_count()} cores, shared machine):")
        latency(engine_url, proxy_url, args.calls)
        if args.concurrent:
            print("with an engine that answers at once (every session always sending):")
            asyncio.run(concurrent_latency(engine_url, proxy_url, args.concurrent, args.concurrent_calls))
    finally:
        print(f"proxy exit code on SIGINT: {stop(proxy)}")
        stop(engine)
        shutil.rmtree(out, ignore_errors=True)

    # Concurrency: a fresh engine with chunk delays, a fresh proxy and capture folder.
    out = Path(tempfile.mkdtemp(prefix="bench-capture-"))
    engine = start([sys.executable, "-m", "tests.fake_upstream", str(engine_port), str(args.delay)])
    proxy = start(
        [
            sys.executable,
            "-m",
            "rollout_graph",
            "capture",
            "--upstream",
            engine_url,
            "--out",
            str(out),
            "--port",
            str(proxy_port),
        ]
    )
    try:
        wait_up(engine_url, engine)
        wait_up(proxy_url, proxy)
        if args.concurrent:
            print(f"with an engine waiting {args.delay * 1e3:.0f} ms between stream chunks:")
            asyncio.run(concurrent_latency(engine_url, proxy_url, args.concurrent, args.concurrent_calls))
        seconds, chunks = asyncio.run(concurrent_sessions(proxy_url, args.sessions, args.turns))
    finally:
        code = stop(proxy)
        stop(engine)
    loaded = load_paths([out])
    shutil.rmtree(out, ignore_errors=True)
    # Every call is recorded: the conversations' and the loaded-latency calls (warm-up included).
    expected = args.sessions * args.turns + (args.concurrent * (3 + args.concurrent_calls) if args.concurrent else 0)
    chains = sum(
        1
        for sid, s in loaded.sessions.items()
        if not sid.startswith("lat")
        and (r := analyse(s)).stats["n_roots"] == 1
        and r.linked_by.count("tokens") == args.turns - 1
    )
    print(
        f"{args.sessions} concurrent streaming sessions x {args.turns} turns: {seconds:.2f} s wall, "
        f"{chunks} chunks relayed; records {loaded.records}/{expected}, loaded {loaded.loaded}, "
        f"skipped {len(loaded.skipped)}; sessions {len(loaded.sessions)}, complete chains {chains}; "
        f"proxy exit code {code}"
    )
    return 0 if loaded.loaded == expected and chains == args.sessions else 1


if __name__ == "__main__":
    sys.exit(main())
