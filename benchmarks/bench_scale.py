"""Growth at scale: for each hostile shape, the time and peak memory of a cold ``inspect --json
--no-cache`` at N and at 2N, and their ratio (time at 2N / time at N: about 2 is linear, about 4
quadratic). Issue 28, docs/limits.md.

Shapes (each written on the fly into a temporary folder):

- ``sessions``: N one-call sessions (a corpus of tiny rollouts);
- ``fork``: one parent call with N distinct children (a wide fork);
- ``retries``: one parent with N identical retries of the same prompt;
- ``document``: a rollout document of N turns sharing one growing sequence (each prompt is the
  whole history: the expansion ``max_expanded_ids`` bounds);
- ``long_line``: one record of N KB of text rejected by orjson (a NaN logprob), so the stdlib
  fallback and its depth check run over the whole line.

Each run is a child process (``os.wait4`` gives its peak RSS and its CPU time, user + system:
on a shared machine the CPU time is the firmer figure, wall time grows with everyone else's
load); N and 2N runs are interleaved
(N, 2N, N, 2N ...) and each figure is the median of ``--rounds`` runs, so load changes on a
shared machine hit both sizes alike. Cold only (``--no-cache``): a warm reopen is another figure
(benchmarks/bench_cold.py).

``python benchmarks/bench_scale.py [--shapes sessions,fork,...] [--scale 1.0] [--rounds 3]``;
``--scale`` multiplies every N (the defaults take about a minute on a quiet 2-core machine).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.support.builders import Turn, vllm_chat  # noqa: E402
from tests.support.hostile import long_document  # noqa: E402


def _write_lines(path: Path, records) -> None:
    with open(path, "wb") as f:
        for record in records:
            f.write(orjson.dumps(record) + b"\n")


def sessions(path: Path, n: int) -> None:
    template = orjson.dumps({**vllm_chat(Turn("CALLID", [1, 2, 3], [4])), "session_id": "SESSID"})
    with open(path, "wb") as f:
        for start in range(0, n, 10_000):
            block = (
                template.replace(b"CALLID", b"c%d" % i).replace(b"SESSID", b"s%d" % i)
                for i in range(start, min(n, start + 10_000))
            )
            f.write(b"\n".join(block) + b"\n")


def fork(path: Path, n: int) -> None:
    prompt = list(range(1, 65))
    parent = vllm_chat(Turn("root", prompt, [100, 101]))
    children = (vllm_chat(Turn(f"k{i}", [*prompt, 100, 101, 200 + i], [7])) for i in range(n))
    _write_lines(path, [parent, *children])


def retries(path: Path, n: int) -> None:
    prompt = list(range(1, 65))
    parent = vllm_chat(Turn("root", prompt, [100, 101]))
    again = (vllm_chat(Turn(f"r{i}", [*prompt, 100, 101, 300], [8 + i % 5])) for i in range(n))
    _write_lines(path, [parent, *again])


def document(path: Path, n: int) -> None:
    _write_lines(path, [long_document(n)])


def long_line(path: Path, n: int) -> None:
    record = vllm_chat(Turn("big", [1, 2, 3], [4]))
    record["request"]["messages"][0]["content"] = "x" * (n << 10)
    path.write_bytes(orjson.dumps(record).replace(b"-0.5", b"NaN", 1) + b"\n")


SHAPES: dict[str, tuple[Callable[[Path, int], None], int, list[str]]] = {
    # shape: (writer, default N, extra flags)
    "sessions": (sessions, 20_000, []),
    "fork": (fork, 2_000, []),
    "retries": (retries, 2_000, []),
    "document": (document, 1_500, []),
    "long_line": (long_line, 16 << 10, []),  # KB of text: 16 MB at N
}


def run_once(path: Path, flags: list[str]) -> tuple[float, float, int, int]:
    """Wall seconds, CPU seconds, peak RSS bytes and exit code of one cold ``inspect --json``."""
    args = [sys.executable, "-m", "rollout_graph", "inspect", str(path), "--json", "--no-cache", *flags]
    start = time.perf_counter()
    child = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime
    return time.perf_counter() - start, cpu, usage.ru_maxrss * 1024, child.returncode


def measure(shape: str, scale: float, rounds: int, folder: Path) -> dict:
    write, base, flags = SHAPES[shape]
    n = max(1, int(base * scale))
    paths = {}
    for size in (n, 2 * n):
        paths[size] = folder / f"{shape}-{size}.jsonl"
        write(paths[size], size)
    times: dict[int, list[float]] = {n: [], 2 * n: []}
    peaks: dict[int, list[int]] = {n: [], 2 * n: []}
    cpus: dict[int, list[float]] = {n: [], 2 * n: []}
    for r in range(rounds):
        order = (n, 2 * n) if r % 2 == 0 else (2 * n, n)
        for size in order:
            seconds, cpu, peak, code = run_once(paths[size], flags)
            if code != 0:
                raise SystemExit(f"{shape} at {size}: inspect exited {code}")
            times[size].append(seconds)
            cpus[size].append(cpu)
            peaks[size].append(peak)
    t1, t2 = statistics.median(times[n]), statistics.median(times[2 * n])
    c1, c2 = statistics.median(cpus[n]), statistics.median(cpus[2 * n])
    return {
        "shape": shape,
        "n": n,
        "bytes_n": paths[n].stat().st_size,
        "seconds_n": round(t1, 3),
        "seconds_2n": round(t2, 3),
        "growth": round(t2 / t1, 2),
        "cpu_n": round(c1, 3),
        "cpu_2n": round(c2, 3),
        "cpu_growth": round(c2 / c1, 2),
        "peak_mb_n": round(max(peaks[n]) / 2**20),
        "peak_mb_2n": round(max(peaks[2 * n]) / 2**20),
        "memory_growth": round(max(peaks[2 * n]) / max(peaks[n]), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="one JSON object per shape")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        if not args.json:
            print(
                f"{'shape':<10} {'N':>8} {'MB at N':>8} {'s at N':>8} {'s at 2N':>8} {'2N/N':>6} "
                f"{'cpu N':>7} {'cpu 2N':>7} {'2N/N':>6} {'peak MB':>14}"
            )
        for shape in args.shapes.split(","):
            row = measure(shape, args.scale, args.rounds, Path(tmp))
            if args.json:
                print(json.dumps(row), flush=True)
            else:
                print(
                    f"{row['shape']:<10} {row['n']:>8,} {row['bytes_n'] / 2**20:>8.1f} {row['seconds_n']:>8.2f} "
                    f"{row['seconds_2n']:>8.2f} {row['growth']:>6.2f} "
                    f"{row['cpu_n']:>7.2f} {row['cpu_2n']:>7.2f} {row['cpu_growth']:>6.2f} "
                    f"{row['peak_mb_n']:>6} -> {row['peak_mb_2n']:<6}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
