"""``rollout-graph bundle`` build time and file size at 1,000 and 5,000 calls.

``python benchmarks/bench_bundle.py [--calls 1000 5000]`` builds a harness-shaped rollout (tests/support/builders.py
``agent_records``), then times ``rollout_graph.reports.bundle.bundle_html`` (best of three, warm:
the rollout is analysed once before) with every call's detail when it fits the default budget,
with only a chosen call (``--node``), and with every call forced in (a budget of 1 GB), and prints
the page size of each. Loading the trace is not included (``bench_load`` measures it).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rollout_graph.analysis.decode import TraceTextDecoder  # noqa: E402
from rollout_graph.reports.bundle import BundleOptions, bundle_html  # noqa: E402
from tests.support.builders import agent_records, rollout_of  # noqa: E402


def measure(rollout, options: BundleOptions, repeat: int = 3) -> tuple[float, int]:
    """Best build time (s) and page size (bytes)."""
    best, size = float("inf"), 0
    decoder = TraceTextDecoder({})
    for _ in range(repeat):
        start = time.perf_counter()
        page = bundle_html([rollout], [decoder], options)
        best = min(best, time.perf_counter() - start)
        size = len(page.encode("utf-8"))
    return best, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, nargs="+", default=[1000, 5000])
    args = parser.parse_args()
    for n in args.calls:
        rollout = rollout_of(agent_records(n))
        middle = rollout.calls[n // 2].node_id
        cases = {
            "default budget": BundleOptions(),
            "--node (one call)": BundleOptions(node=middle, calls=[middle]),
            "every call": BundleOptions(budget=1 << 30),
        }
        for name, options in cases.items():
            seconds, size = measure(rollout, options)
            print(f"{n:>6} calls  {name:<18} build {seconds * 1000:7.0f} ms  page {size / 1e6:6.2f} MB")


if __name__ == "__main__":
    main()
