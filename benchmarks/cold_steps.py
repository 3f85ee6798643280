"""Each step's share of a cold ``inspect --json`` in one process: import, read, parse, link,
analyse, print. ``python benchmarks/cold_steps.py TRACE.jsonl`` prints one JSON line of seconds.

read: the file's bytes split into lines (nothing parsed); parse: the loader the command uses
(``rollout_graph.ingest.cache.load_files`` without the cache) minus the read; link: exact-prefix
linking; analyse: the rest of :func:`rollout_graph.pipeline.analyse` (given the links); print:
the JSON contract built and serialised.
"""

from __future__ import annotations

import sys
import time

START = time.perf_counter()

import orjson  # noqa: E402

from rollout_graph.analysis.decode import decoder_for  # noqa: E402
from rollout_graph.core.linking import link  # noqa: E402
from rollout_graph.ingest import cache, reading  # noqa: E402
from rollout_graph.ingest.limits import Limits  # noqa: E402
from rollout_graph.pipeline import analyse  # noqa: E402
from rollout_graph.reports.contract import inspect_json  # noqa: E402


def main(path: str) -> None:
    steps: dict[str, float] = {"import": time.perf_counter() - START}
    t = time.perf_counter()
    limits = Limits()
    lines = 0
    with reading.Source.from_path(path).open() as stream:
        for _ in reading._split(reading._chunks(stream, limits), limits.max_line_bytes, reading._Counter()):
            lines += 1
    steps["read"] = time.perf_counter() - t
    t = time.perf_counter()
    loaded = cache.load_files([path], use_cache=False)
    steps["parse"] = time.perf_counter() - t - steps["read"]
    steps["link"] = steps["analyse"] = 0.0
    rollouts = []
    for session in loaded.sessions.values():
        t = time.perf_counter()
        links = link(session.calls)
        steps["link"] += time.perf_counter() - t
        t = time.perf_counter()
        rollouts.append(analyse(session, links=links, decoder=decoder_for(session.calls, [], None, False)))
        steps["analyse"] += time.perf_counter() - t
    t = time.perf_counter()
    out = orjson.dumps(inspect_json(loaded, rollouts, with_tokens=False), option=orjson.OPT_SERIALIZE_NUMPY)
    steps["print"] = time.perf_counter() - t
    print(orjson.dumps({k: round(v, 3) for k, v in steps.items()} | {"lines": lines, "bytes_out": len(out)}).decode())


if __name__ == "__main__":
    main(sys.argv[1])
