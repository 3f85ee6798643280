"""The capture proxy's cost: added latency per call, and many concurrent streaming sessions.

The fake vLLM-shaped engine (tests/fake_upstream.py) and ``rollout-graph capture`` run as their
own processes, as in real use; this process is the harness.

1. Added latency: the same small chat call, alternately straight to the engine and through the
   proxy (non-streamed, and streamed to the last byte); median of each, and the difference.
2. Concurrency: 64 sessions, each a 4-turn conversation of streamed calls (the engine waits
   ``--delay`` seconds between chunks), all at once; then the capture file is loaded and every
   session must be one complete chain with nothing lost.

``python benchmarks/bench_capture.py [--calls 300] [--sessions 64] [--turns 4] [--delay 0.01]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
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
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--delay", type=float, default=0.01, help="engine delay between stream chunks (s)")
    args = parser.parse_args()

    out = Path(tempfile.mkdtemp(prefix="bench-capture-"))
    engine_port, proxy_port = free_port(), free_port()
    engine_url, proxy_url = f"http://127.0.0.1:{engine_port}", f"http://127.0.0.1:{proxy_port}"
    engine = start([sys.executable, "-m", "tests.fake_upstream", str(engine_port)])
    cli = [sys.executable, "-m", "graph", "capture", "--upstream", engine_url, "--out", str(out)]
    proxy = start([*cli, "--port", str(proxy_port)])
    try:
        wait_up(engine_url, engine)
        wait_up(proxy_url, proxy)
        print(f"added latency per call ({os.cpu_count()} cores, shared machine):")
        latency(engine_url, proxy_url, args.calls)
    finally:
        print(f"proxy exit code on SIGINT: {stop(proxy)}")
        stop(engine)

    # Concurrency: a fresh engine with chunk delays, a fresh proxy and capture folder.
    out = Path(tempfile.mkdtemp(prefix="bench-capture-"))
    engine = start([sys.executable, "-m", "tests.fake_upstream", str(engine_port), str(args.delay)])
    proxy = start(
        [
            sys.executable,
            "-m",
            "graph",
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
        seconds, chunks = asyncio.run(concurrent_sessions(proxy_url, args.sessions, args.turns))
    finally:
        code = stop(proxy)
        stop(engine)
    loaded = load_paths([out])
    expected = args.sessions * args.turns
    chains = sum(
        1
        for s in loaded.sessions.values()
        if (r := analyse(s)).stats["n_roots"] == 1 and r.linked_by.count("tokens") == args.turns - 1
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
