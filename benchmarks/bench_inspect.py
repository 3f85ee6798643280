"""Whole-process `rollout-graph inspect --json` on synthetic harness-shaped rollouts.

Prints: fast vs naive at 1,000 calls; scaling from 1,000 to 4,000 calls; linking time alone;
peak resident memory per token. ``python benchmarks/bench_inspect.py [--calls 1000] [--runs 3]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from synthetic import write_trace  # noqa: E402

from rollout_graph.core.linking import link  # noqa: E402
from rollout_graph.ingest.load.files import load_paths  # noqa: E402


def run_inspect(path: Path, naive: bool = False) -> tuple[float, int]:
    command = (
        [sys.executable, str(HERE / "measure.py")] + (["--naive"] if naive else []) + ["inspect", str(path), "--json"]
    )
    start = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=True)
    elapsed = time.perf_counter() - start
    rss = int(done.stderr.rsplit("peak_rss_bytes=", 1)[1])
    return elapsed, rss


def median_run(path: Path, runs: int, naive: bool = False) -> tuple[float, int]:
    results = [run_inspect(path, naive) for _ in range(runs)]
    return statistics.median(r[0] for r in results), max(r[1] for r in results)


def link_seconds(path: Path, runs: int) -> float:
    session = next(iter(load_paths([path]).sessions.values()))
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        link(session.calls)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--skip-naive", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        small, large = Path(tmp) / "small.jsonl", Path(tmp) / "large.jsonl"
        empty = Path(tmp) / "empty.jsonl"
        empty.write_text("")
        tokens_small = write_trace(small, args.calls)
        tokens_large = write_trace(large, 4 * args.calls, seed=1)
        print(f"small: {args.calls} calls, {tokens_small / 1e6:.1f}M tokens, {small.stat().st_size / 1e6:.0f} MB")
        print(f"large: {4 * args.calls} calls, {tokens_large / 1e6:.1f}M tokens, {large.stat().st_size / 1e6:.0f} MB")

        os.sync()  # let the freshly written traces reach the disk before anything is timed
        _, baseline_rss = run_inspect(empty)
        run_inspect(small)  # warm-up: the page cache, not the project, is what a first run measures
        fast_small, rss_small = median_run(small, args.runs)
        fast_large, rss_large = median_run(large, args.runs)
        print(f"inspect --json, median of {args.runs}: small {fast_small:.2f} s, large {fast_large:.2f} s")
        time_ratio = fast_large / fast_small
        token_ratio = tokens_large / tokens_small
        print(f"scaling: {token_ratio:.2f}x tokens cost {time_ratio:.2f}x time (goal: <= 5x for 4x)")
        print(
            f"linking alone (median of {args.runs}): small {link_seconds(small, args.runs):.3f} s, "
            f"large {link_seconds(large, args.runs):.3f} s (goal: < 1 s at ~30M tokens)"
        )
        for name, rss, tokens in (("small", rss_small, tokens_small), ("large", rss_large, tokens_large)):
            print(
                f"peak RSS {name}: {rss / 1e6:.0f} MB = {rss / tokens:.2f} bytes/token "
                f"({(rss - baseline_rss) / tokens:.2f} above the {baseline_rss / 1e6:.0f} MB interpreter baseline; goal ~12)"
            )
        if not args.skip_naive:
            start = time.perf_counter()
            subprocess.run(
                [sys.executable, str(HERE / "naive_inspect.py"), str(small)], stdout=subprocess.DEVNULL, check=True
            )
            naive_full = time.perf_counter() - start
            print(
                f"naive inspect (stdlib JSON, lists, reference linking), 1 run: {naive_full:.1f} s "
                f"-> project is {naive_full / fast_small:.1f}x faster (goal: >= 20x)"
            )
            naive_linking, _ = run_inspect(small, naive=True)
            print(
                f"project loader + reference linking, 1 run: {naive_linking:.1f} s "
                f"-> fast linking alone makes it {naive_linking / fast_small:.1f}x faster"
            )


if __name__ == "__main__":
    main()
