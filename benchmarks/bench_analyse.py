"""The link and analyse steps of a cold ``inspect`` in CPU time, against another revision's
near-miss module, interleaved in one process on one loaded trace (docs/performance.md, "The
analysis step").

The trace is loaded once; each round links and analyses every rollout once with this checkout's
``rollout_graph.analysis.near_miss`` and, with ``--against REV``, once with that revision's
``graph/analysis/near_miss.py`` (read with ``git show``; the rest of the code is this checkout's),
the order alternating each round. Prints the minimum and median CPU seconds
(``time.process_time``) of each, their ratio, and the load average, as one JSON line.

    .venv/bin/python benchmarks/synthetic.py vllm.jsonl --calls 5000 --max-context 3000 --summary-tokens 50
    .venv/bin/python benchmarks/bench_analyse.py vllm.jsonl --against 0d2915e
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from rollout_graph import pipeline
from rollout_graph.analysis.decode import decoder_for
from rollout_graph.core.linking import link
from rollout_graph.ingest import cache

ROOT = Path(__file__).resolve().parent.parent


def _module_at(revision: str, folder: Path):
    """That revision's near-miss module, imported under a name of its own."""
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{revision}:graph/analysis/near_miss.py"],
        check=True,
        capture_output=True,
    ).stdout
    path = folder / "near_miss_at_revision.py"
    path.write_bytes(source)
    spec = importlib.util.spec_from_file_location("near_miss_at_revision", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--against", metavar="REV", help="a git revision whose near-miss module to compare with")
    args = parser.parse_args()
    loaded = cache.load_files([str(args.trace)], use_cache=False)
    sessions = list(loaded.sessions.values())
    variants = {"this": pipeline.near_misses}
    with tempfile.TemporaryDirectory() as folder:
        if args.against:
            variants[args.against] = _module_at(args.against, Path(folder)).near_misses
        link_cpu: list[float] = []
        cpu: dict[str, list[float]] = {name: [] for name in variants}
        for round_ in range(args.rounds):
            order = list(variants) if round_ % 2 == 0 else list(reversed(variants))
            for name in order:
                pipeline.near_misses = variants[name]
                took = 0.0
                for session in sessions:
                    started = time.process_time()
                    links = link(session.calls)
                    link_cpu.append(time.process_time() - started)
                    started = time.process_time()
                    pipeline.analyse(session, links=links, decoder=decoder_for(session.calls, [], None, False))
                    took += time.process_time() - started
                cpu[name].append(took)
        pipeline.near_misses = variants["this"]
    per_round_link = [sum(link_cpu[i : i + len(sessions)]) for i in range(0, len(link_cpu), len(sessions))]
    out: dict = {"trace": args.trace.name, "calls": sum(len(s.calls) for s in sessions), "rounds": args.rounds}
    out["cpu_link"] = {"min": round(min(per_round_link), 3), "median": round(statistics.median(per_round_link), 3)}
    for name, values in cpu.items():
        out[f"cpu_analyse_{name}"] = {"min": round(min(values), 3), "median": round(statistics.median(values), 3)}
    if args.against:
        out["ratio_median"] = round(statistics.median(cpu["this"]) / statistics.median(cpu[args.against]), 3)
    out["load_average"] = [round(x, 2) for x in os.getloadavg()]
    print(orjson.dumps(out).decode())


if __name__ == "__main__":
    main()
