"""In-process CPU of a one-process cold ``inspect --json --no-cache``, accumulated in named
functions: where the command's time goes, function by function.

``python benchmarks/cpu_by_function.py TRACE.jsonl MODULE:FUNCTION [MODULE:CLASS.METHOD ...]``,
e.g. ``rollout_graph.ingest.values.line:parse_line rollout_graph.analysis.near_miss:near_misses``.
Each named function is wrapped (in the module it is looked up in: a name another module imported
before the wrap is not counted there, so name it in that module, e.g.
``rollout_graph.ingest.values.line:columns_for``) with ``time.process_time`` before and after; a
wrapper costs about a microsecond a call, so prefer functions called per line or less. The
command runs as the console command does (the collector off before the imports, one BLAS
thread) in one process (the two-part read switched off). Prints, on stderr, the imports' and the
whole command's CPU seconds and each function's total and call count.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
import time

from rollout_graph.ingest.load import cpu_window

cpu_window.mark_start()
gc.disable()
T0 = time.process_time()
from rollout_graph.cli import one_blas_thread  # noqa: E402

one_blas_thread()
import rollout_graph.cli.inspect  # noqa: E402, F401
import rollout_graph.ingest.load.files  # noqa: E402, F401
from rollout_graph.ingest.load import two_parts  # noqa: E402

two_parts.TWO_PART_MIN_FREE_CORES = float("inf")
totals: dict[str, float] = {}
calls: dict[str, int] = {}


def wrap(spec: str) -> None:
    module_name, _, attribute = spec.rpartition(":")
    owner = importlib.import_module(module_name)
    name = attribute
    if "." in attribute:
        cls, name = attribute.split(".", 1)
        owner = getattr(owner, cls)
    inner = getattr(owner, name)
    key = f"{module_name.rsplit('.', 1)[-1]}.{attribute}"

    def timed(*args, **kwargs):
        start = time.process_time()
        try:
            return inner(*args, **kwargs)
        finally:
            totals[key] = totals.get(key, 0.0) + time.process_time() - start
            calls[key] = calls.get(key, 0) + 1

    setattr(owner, name, timed)


def report(code: int) -> None:
    print(f"imports {T1 - T0:.3f} s, whole command {time.process_time() - T0:.3f} s", file=sys.stderr)
    for key, seconds in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"  {key:48s} {seconds:.3f} s  {calls[key]:>7,} calls", file=sys.stderr)
    sys.stderr.flush()
    real_exit(code)


if __name__ == "__main__":
    trace, *specs = sys.argv[1:]
    for spec in specs:
        wrap(spec)
    T1 = time.process_time()
    from rollout_graph.cli import main

    real_exit = os._exit
    os._exit = report  # the command ends with os._exit once its output is flushed
    sys.argv = ["rollout-graph", "inspect", "--json", "--no-cache", trace]
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115
    try:
        main()
    finally:
        report(0)
