"""Near-miss analysis on one parent with N children: growth with N (docs/performance.md).

Two shapes, the ones that used to be quadratic: N distinct children of one parent (one continued,
the rest discarded), and N identical re-sends of one prompt (one continued). Prints seconds per N
and the ratio to the previous N (2x the children should be ~2x the time, not 4x).

    .venv/bin/python benchmarks/bench_near_miss.py 5000 10000 20000
"""

from __future__ import annotations

import sys
import time

import numpy as np

from rollout_graph.analysis.near_miss import near_misses
from rollout_graph.core.linking import link
from rollout_graph.core.records import Call
from rollout_graph.core.topology import build_topology


def _call(i: int, prompt: list[int], sampled: list[int]) -> Call:
    return Call(f"n{i}", "s", "mem", i + 1, "test", prompt_ids=np.array(prompt, dtype=np.int32),
                sampled_ids=np.array(sampled, dtype=np.int32))  # fmt: skip


def shapes(n: int) -> dict[str, list[Call]]:
    system = list(range(100, 140))
    parent = _call(0, system, [1, 2])
    base = system + [1, 2]
    distinct = [parent] + [_call(i + 1, base + [1000 + i, 7], [5]) for i in range(n)]
    distinct.append(_call(n + 1, base + [1000, 7, 5, 8], [9]))  # continues the first child
    same = [parent] + [_call(i + 1, base + [7], [5000 + i]) for i in range(n)]
    same.append(_call(n + 1, base + [7, 5000, 8], [9]))
    return {"distinct children": distinct, "identical re-sends": same}


def timed(calls: list[Call]) -> float:
    topology = build_topology(calls, link(calls).parents)
    start = time.perf_counter()
    near_misses(calls, topology)
    return time.perf_counter() - start


def main(sizes: list[int]) -> None:
    previous: dict[str, float] = {}
    for n in sizes:
        for name, calls in shapes(n).items():
            seconds = min(timed(calls) for _ in range(2))
            ratio = f"  x{seconds / previous[name]:.2f}" if name in previous else ""
            print(f"{name:>20} N={n:>7,}: {seconds:8.3f} s{ratio}")
            previous[name] = seconds


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [5000, 10000, 20000])
