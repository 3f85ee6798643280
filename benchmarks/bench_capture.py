"""The capture proxy's cost: added latency per call, alone and with many concurrent sessions.

The fake vLLM-shaped engine (tests/support/fake_upstream.py) and ``rollout-graph capture`` run as their
own processes, as in real use; this process is the harness. The machine is usually shared: every
figure is printed with the load average next to it, and latencies are compared in pairs (the
same call straight to the engine and through the proxy, back to back, the order rotating).

1. One call at a time: the same small chat call alternately straight to the engine and through
   the proxy (non-streamed, streamed to the last byte, a 32,000-token prompt); medians and the
   difference.
2. Loaded: ``--levels`` (1, 8, 32) concurrent harness sessions, each sending the same streamed
   call straight to the engine and through every proxy in turn, timed to the last byte: the
   median and 95th percentile of the paired differences (issue 24's goal: median added latency
   <= 3 ms per streamed call with 32 concurrent sessions) and the proxy's CPU milliseconds per
   call (from /proc: the figure the machine's load does not change much). Once with an engine
   that answers at once (every session always sending: the proxy's CPU is shared 32 ways) and once
   with the engine pausing ``--delay`` between chunks (closer to a real engine).
   ``--baseline DIR`` runs a second proxy from another checkout (a folder with ``graph/``, e.g.
   ``git archive <commit> graph | tar -x -C DIR``) in the same rounds: before/after on one load.
3. Concurrency: 64 sessions, each a 4-turn conversation of streamed calls, all at once; then the
   capture file is loaded and every session must be one complete chain with nothing lost.

``python benchmarks/bench_capture.py [--calls 300] [--levels 1,8,32] [--rounds 160]
[--sessions 64] [--turns 4] [--delay 0.01] [--baseline DIR]``
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

from rollout_graph.ingest.load.files import load_paths  # noqa: E402
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


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc; 0.0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.1f}/{five:.1f}"


async def concurrent_latency(
    engine: str, proxies: dict[str, tuple[str, int]], sessions: int, calls: int
) -> dict[str, tuple[float, float, float, float]]:
    """Streamed calls from ``sessions`` concurrent harnesses, each sending the same call straight
    to the engine and through every proxy in turn (the order rotating every call), timed to the
    last byte. Per proxy: the median and 95th percentile of the paired differences (proxied minus
    the direct call of the same round) and its CPU milliseconds per call."""
    limits = httpx.Limits(max_connections=sessions * 4, max_keepalive_connections=sessions * 4)
    names = list(proxies)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:

        async def one(url: str) -> float:
            t0 = time.perf_counter()
            async with client.stream("POST", url, json={**BODY, "stream": True}) as r:
                assert r.status_code == 200
                async for _ in r.aiter_bytes():
                    pass
            return time.perf_counter() - t0

        async def harness(s: int, n: int) -> list[dict[str, float]]:
            urls = {"direct": f"{engine}/v1/chat/completions"}
            urls |= {name: f"{proxies[name][0]}/session/lat{s}/v1/chat/completions" for name in names}
            order = list(urls)
            rounds = []
            for i in range(n):
                k = (i + s) % len(order)
                timed = {}
                for name in order[k:] + order[:k]:
                    timed[name] = await one(urls[name])
                rounds.append(timed)
            return rounds

        await asyncio.gather(*(harness(s, 2) for s in range(sessions)))  # warm-up: connections, code paths
        before = {name: cpu_seconds(pid) for name, (_, pid) in proxies.items()}
        results = await asyncio.gather(*(harness(s, calls) for s in range(sessions)))
        spent = {name: cpu_seconds(pid) - before[name] for name, (_, pid) in proxies.items()}
    rounds = [r for session in results for r in session]
    out = {}
    direct = statistics.median(r["direct"] for r in rounds)
    for name in names:
        added = sorted(r[name] - r["direct"] for r in rounds)
        p95 = statistics.quantiles(added, n=20)[18] if len(added) >= 20 else added[-1]
        ratio = statistics.median(r[name] for r in rounds) / direct
        out[name] = (statistics.median(added), p95, spent[name] / len(rounds), ratio)
    text = " · ".join(
        f"{name}: added median {m * 1e3:5.2f} ms, p95 {p * 1e3:6.2f} ms, x{q:.2f} of direct, CPU {c * 1e3:4.2f} ms/call"
        for name, (m, p, c, q) in out.items()
    )
    print(f"{sessions:>3} concurrent ({len(rounds)} rounds, direct median {direct * 1e3:6.2f} ms): {text}")
    return out


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


def start_proxy(engine_url: str, out: Path, port: int, source: str | None = None) -> subprocess.Popen:
    """``rollout-graph capture`` as its own process; ``source``: a folder whose ``rollout_graph``
    package (or ``graph`` folder) is run instead of this checkout's (an earlier version)."""
    cli = [sys.executable, "-m", "rollout_graph", "capture", "--upstream", engine_url, "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if source is not None:
        base = Path(tempfile.mkdtemp(prefix="bench-capture-src-"))
        src = Path(source).resolve()
        (base / "rollout_graph").symlink_to(src / "graph" if (src / "graph").is_dir() else src / "rollout_graph")
        env["PYTHONPATH"] = f"{base}{os.pathsep}{ROOT}"
    return subprocess.Popen(
        [*cli, "--port", str(port)], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument(
        "--levels", default="1,8,32", help="concurrent sessions for the loaded latency, comma-separated (0: skip)"
    )
    parser.add_argument("--rounds", type=int, default=160, help="rounds per level (split over its sessions)")
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--delay", type=float, default=0.01, help="engine delay between stream chunks (s)")
    parser.add_argument(
        "--baseline", metavar="DIR", help="also run the proxy of another checkout (a folder with graph/), interleaved"
    )
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",") if int(x) > 0]

    def proxies(engine_url: str, folders: list[Path]) -> dict[str, tuple[str, subprocess.Popen]]:
        running = {}
        for name, source in [("proxy", None), ("baseline", args.baseline)][: 2 if args.baseline else 1]:
            port = free_port()
            folder = Path(tempfile.mkdtemp(prefix="bench-capture-"))
            folders.append(folder)
            running[name] = (f"http://127.0.0.1:{port}", start_proxy(engine_url, folder, port, source))
        for url, process in running.values():
            wait_up(url, process)
        return running

    def levels_run(engine_url: str, title: str) -> None:
        folders: list[Path] = []
        running = proxies(engine_url, folders)
        try:
            print(title)
            for n in levels:
                before = load()
                asyncio.run(
                    concurrent_latency(
                        engine_url,
                        {k: (u, p.pid) for k, (u, p) in running.items()},
                        n,
                        max(2, args.rounds // n),
                    )
                )
                print(f"      ({before} before, {load()} after; {os.cpu_count()} cores)")
        finally:
            for _, process in running.values():
                print(f"  proxy exit code on SIGINT: {stop(process)}")
            for folder in folders:
                shutil.rmtree(folder, ignore_errors=True)

    engine_port = free_port()
    engine_url = f"http://127.0.0.1:{engine_port}"
    engine = start([sys.executable, "-m", "tests.support.fake_upstream", str(engine_port)])
    try:
        wait_up(engine_url, engine)
        if args.calls:
            out = Path(tempfile.mkdtemp(prefix="bench-capture-"))
            proxy_port = free_port()
            proxy_url = f"http://127.0.0.1:{proxy_port}"
            proxy = start_proxy(engine_url, out, proxy_port)
            try:
                wait_up(proxy_url, proxy)
                print(f"added latency per call, one at a time ({os.cpu_count()} cores, {load()}):")
                latency(engine_url, proxy_url, args.calls)
            finally:
                print(f"proxy exit code on SIGINT: {stop(proxy)}")
                shutil.rmtree(out, ignore_errors=True)
        if levels:
            levels_run(engine_url, "streamed calls, engine answering at once (every session always sending):")
    finally:
        stop(engine)

    # A fresh engine with chunk delays (closer to a real engine): the loaded latency, then the
    # concurrency check on a fresh proxy and capture folder.
    engine = start([sys.executable, "-m", "tests.support.fake_upstream", str(engine_port), str(args.delay)])
    out = Path(tempfile.mkdtemp(prefix="bench-capture-"))
    proxy_port = free_port()
    proxy_url = f"http://127.0.0.1:{proxy_port}"
    try:
        wait_up(engine_url, engine)
        if levels:
            levels_run(engine_url, f"streamed calls, engine waiting {args.delay * 1e3:.0f} ms between chunks:")
        if not args.sessions:
            return 0
        proxy = start_proxy(engine_url, out, proxy_port)
        try:
            wait_up(proxy_url, proxy)
            seconds, chunks = asyncio.run(concurrent_sessions(proxy_url, args.sessions, args.turns))
        finally:
            code = stop(proxy)
    finally:
        stop(engine)
    loaded = load_paths([out])
    shutil.rmtree(out, ignore_errors=True)
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
