"""DAG figure build time and size at 1,000 and 5,000 calls (what the browser receives for the chart).

``python benchmarks/bench_dag.py [--calls 1000 5000]`` builds a harness-shaped rollout (long agent
chains with retries, compactions, subagents: tests/support/builders.py ``agent_records``), then times
``rollout_graph.ui.builders.dag.dag_figure`` and measures its JSON, with linear chains collapsed (the default) and
with every call drawn (``collapse=False``). Prints one line per case.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import plotly.io as pio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rollout_graph.ui.builders.dag import dag_figure  # noqa: E402
from tests.support.builders import agent_records, rollout_of  # noqa: E402


def measure(rollout, repeat: int = 3, **options) -> tuple[float, int, int]:
    """Best build time (s), JSON size (bytes) and number of drawn calls."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        figure = dag_figure(rollout, **options)
        best = min(best, time.perf_counter() - start)
    return best, len(pio.to_json(figure, validate=False)), len(figure.data[1].x)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, nargs="+", default=[1000, 5000])
    args = parser.parse_args()
    for n in args.calls:
        rollout = rollout_of(agent_records(n))
        cases = {
            "collapsed": {"near_misses": True},
            "collapsed, a call chosen": {"near_misses": True, "highlight": n // 2},
            "every call drawn": {"near_misses": True, "collapse": False},
        }
        for name, options in cases.items():
            seconds, size, drawn = measure(rollout, **options)
            print(
                f"{n:>6} calls  {name:<26} {drawn:>5} drawn  build {seconds * 1000:7.0f} ms  JSON {size / 1e6:6.2f} MB"
            )


if __name__ == "__main__":
    main()
