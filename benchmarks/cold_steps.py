"""Each step's share of a cold ``inspect --json`` in one process: import, read, parse, link,
analyse, print. ``python benchmarks/cold_steps.py TRACE.jsonl`` prints one JSON line of seconds.

import: every module the command imports on both shapes (the command line, numpy, the loader
and its record formats, the analysis, the contract; the vLLM shape's typed decoders are imported
by its parse); args: the command's argument parser built and the arguments parsed; read: the
file's bytes split into lines (nothing parsed); parse: the loader the command uses
(``rollout_graph.ingest.load.files.load_files`` without the cache) minus the read; link: exact-prefix
linking; analyse: the rest of :func:`rollout_graph.pipeline.analyse` (given the links); print:
the JSON contract built and serialised. Each step is given in seconds of wall-clock time and, as
``cpu_*``, of this process's CPU time (``time.process_time``: steadier on a shared machine).
numpy is loaded as the console command loads it (``rollout_graph.cli.one_blas_thread``), and the
loaded traces are settled after the load as the command settles them
(``rollout_graph.cli.common.settle``). Until 2026-12-01 evening the import step left out the
loader's modules (counted in the parse) and the args step did not exist.
"""

from __future__ import annotations

import sys
import time

START = time.perf_counter()
START_CPU = time.process_time()

from rollout_graph.cli import one_blas_thread  # noqa: E402

one_blas_thread()  # numpy loaded as the console command loads it (one BLAS thread)

import orjson  # noqa: E402

import rollout_graph.cli.inspect  # noqa: E402, F401
import rollout_graph.ingest.load.files  # noqa: E402, F401
from rollout_graph.analysis.decode import decoder_for  # noqa: E402
from rollout_graph.cli import parser  # noqa: E402
from rollout_graph.cli.common import settle  # noqa: E402
from rollout_graph.core.linking import link  # noqa: E402
from rollout_graph.ingest.files.chunks import StreamState, chunks  # noqa: E402
from rollout_graph.ingest.files.lines import split_lines  # noqa: E402
from rollout_graph.ingest.files.sources import Source  # noqa: E402
from rollout_graph.ingest.limits import Limits  # noqa: E402
from rollout_graph.ingest.load.files import load_files  # noqa: E402
from rollout_graph.pipeline import analyse  # noqa: E402
from rollout_graph.reports.contract import inspect_json  # noqa: E402


def main(path: str) -> None:
    steps: dict[str, float] = {"import": time.perf_counter() - START}
    cpu: dict[str, float] = {"import": time.process_time() - START_CPU}
    t, c = time.perf_counter(), time.process_time()
    parser("inspect").parse_args(["inspect", "--json", "--no-cache", path])
    steps["args"], cpu["args"] = time.perf_counter() - t, time.process_time() - c
    t, c = time.perf_counter(), time.process_time()
    limits = Limits()
    lines = 0
    with Source.from_path(path).open() as stream:
        for _ in split_lines(chunks(stream, limits), limits.max_line_bytes, StreamState()):
            lines += 1
    steps["read"], cpu["read"] = time.perf_counter() - t, time.process_time() - c
    t, c = time.perf_counter(), time.process_time()
    loaded = load_files([path], use_cache=False)
    settle()
    steps["parse"] = time.perf_counter() - t - steps["read"]
    cpu["parse"] = time.process_time() - c - cpu["read"]
    for name in ("link", "analyse"):
        steps[name] = cpu[name] = 0.0
    rollouts = []
    for session in loaded.sessions.values():
        t, c = time.perf_counter(), time.process_time()
        links = link(session.calls)
        steps["link"] += time.perf_counter() - t
        cpu["link"] += time.process_time() - c
        t, c = time.perf_counter(), time.process_time()
        rollouts.append(analyse(session, links=links, decoder=decoder_for(session.calls, [], None, False)))
        steps["analyse"] += time.perf_counter() - t
        cpu["analyse"] += time.process_time() - c
    t, c = time.perf_counter(), time.process_time()
    out = orjson.dumps(inspect_json(loaded, rollouts, with_tokens=False), option=orjson.OPT_SERIALIZE_NUMPY)
    steps["print"], cpu["print"] = time.perf_counter() - t, time.process_time() - c
    figures = {k: round(v, 3) for k, v in steps.items()} | {f"cpu_{k}": round(v, 3) for k, v in cpu.items()}
    print(orjson.dumps(figures | {"lines": lines, "bytes_out": len(out)}).decode())


if __name__ == "__main__":
    main(sys.argv[1])
