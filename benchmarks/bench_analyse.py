"""The link and analyse steps of a cold ``inspect`` in CPU time, against another checkout,
interleaved (docs/performance.md, "Link and analyse of a cold inspect").

Two worker processes load the trace once each: one imports ``rollout_graph`` from this checkout,
the other from the checkout given with ``--against DIR`` (its root, e.g. made with ``git worktree
add --detach DIR REV``; the whole library is that checkout's: linking, topology, near misses,
findings). Each round asks both, one after the other (the order alternating each round), to link
and analyse every rollout once, as ``inspect`` does; each answers with its CPU seconds
(``time.process_time``) for the two steps. The two processes run in turn, never together, so a
round's two figures see the same machine. Prints the minimum and median of each, the ratios of
the medians, and the load average, as one JSON line. Without ``--against`` only this checkout runs.

    git worktree add --detach /tmp/base main
    .venv/bin/python benchmarks/bench_analyse.py TRACE.jsonl --against /tmp/base
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from checkout import CHECKOUT_FINDER  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

# A worker: maps the package names to one checkout's folders (a finder placed first, as the
# editable install maps them to this one's), loads the trace, then on each line read from stdin
# links and analyses every rollout once and prints its CPU seconds as JSON.
WORKER = (
    r"""
import importlib.util, json, sys, time
root, trace = sys.argv[1], sys.argv[2]
"""
    + CHECKOUT_FINDER
    + r"""from rollout_graph.cli import one_blas_thread
one_blas_thread()
from rollout_graph.analysis.decode import decoder_for
from rollout_graph.core.linking import link
try:  # this checkout's one load path; a checkout from before graph/ingest/load/ had it in cache.py
    from rollout_graph.ingest.load.files import load_files
except ImportError:
    from rollout_graph.ingest.cache import load_files
from rollout_graph.pipeline import analyse
loaded = load_files([trace], use_cache=False)
sessions = list(loaded.sessions.values())
print(json.dumps({"calls": sum(len(s.calls) for s in sessions)}), flush=True)
for _ in sys.stdin:
    cpu = {"link": 0.0, "analyse": 0.0}
    for session in sessions:
        started = time.process_time()
        links = link(session.calls)
        cpu["link"] += time.process_time() - started
        started = time.process_time()
        analyse(session, links=links, decoder=decoder_for(session.calls, [], None, False))
        cpu["analyse"] += time.process_time() - started
    print(json.dumps(cpu), flush=True)
"""
)


class Worker:
    def __init__(self, root: Path, trace: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", WORKER, str(root), str(trace)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.calls = json.loads(self._line())["calls"]

    def _line(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"a worker exited (code {self.process.wait()})")
        return line

    def round(self) -> dict[str, float]:
        assert self.process.stdin is not None
        self.process.stdin.write("go\n")
        self.process.stdin.flush()
        figures: dict[str, float] = json.loads(self._line())
        return figures

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)


def _summary(values: list[float]) -> dict[str, float]:
    return {"min": round(min(values), 3), "median": round(statistics.median(values), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--against", type=Path, metavar="DIR", help="another checkout's root to compare with")
    args = parser.parse_args()
    names = ["this"] + (["against"] if args.against else [])
    roots = {"this": ROOT, "against": args.against.resolve() if args.against else ROOT}
    workers = {name: Worker(roots[name], args.trace) for name in names}
    load_before = os.getloadavg()
    figures: dict[str, dict[str, list[float]]] = {name: {"link": [], "analyse": [], "both": []} for name in names}
    try:
        for round_ in range(args.rounds):
            for name in names if round_ % 2 == 0 else names[::-1]:
                cpu = workers[name].round()
                figures[name]["link"].append(cpu["link"])
                figures[name]["analyse"].append(cpu["analyse"])
                figures[name]["both"].append(cpu["link"] + cpu["analyse"])
    finally:
        for worker in workers.values():
            worker.close()
    out: dict = {"trace": args.trace.name, "calls": workers["this"].calls, "rounds": args.rounds}
    for name in names:
        for step, values in figures[name].items():
            out[f"cpu_{step}_{name}"] = _summary(values)
    if args.against:
        for step in ("link", "analyse", "both"):
            this, other = (statistics.median(figures[n][step]) for n in ("this", "against"))
            out[f"ratio_{step}"] = round(this / other, 3) if other else None
    out["load_average"] = [[round(x, 2) for x in load_before], [round(x, 2) for x in os.getloadavg()]]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
