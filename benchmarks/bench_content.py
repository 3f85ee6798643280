"""What a vLLM choice's content array (``logprobs.content`` with top-k alternatives) costs to read,
against what reading it can cost at least with the decoder the loader uses (msgspec).

``python benchmarks/bench_content.py TRACE.jsonl [--lines N] [--rounds R]`` takes the content array
of each of the first N lines (found as the loader finds it: ``logprob_spans.located_span``) and reads every
array R times, the steps interleaved round by round; it prints one JSON line: per step the least
and the median CPU (``time.process_time``) in seconds, scaled to 1,000 calls, and the ratio of
each least to the first step's.

Steps, each doing what the one before does and more:

- ``validate``: the array's JSON syntax checked and nothing built (``msgspec.Raw``): what any
  validating read must spend; the skipped alternatives are most of it;
- ``walk``: the array decoded as entries that keep no field (one struct per entry);
- ``sampled``: the entries' ``token`` and ``logprob`` decoded (``logprob_structs.SAMPLED``);
- ``native``: the C scanner alone (``_speedups.sampled_entries``: the whole span validated, the
  sampled tokens joined and the logprobs' float64 bytes; skipped when the speedups are not built
  or ``ROLLOUT_GRAPH_SPEEDUPS=off``);
- ``columns``: what the loader runs for an array whose alternatives stay in the file
  (``logprob_entries._sampled_only``: the C scanner and its columns when built, else the Python path below);
- ``columns_python``: the Python path (``logprob_entries._sampled_python``: the ASCII check of the skipped
  strings, msgspec's decode, the token and logprob columns, their joined text and float array,
  the deferred alternatives' check).

``columns_python - sampled`` is the Python side; ``sampled - validate`` the objects the decode
builds; ``columns - native`` the C path's glue.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import msgspec  # noqa: E402

from rollout_graph.ingest.files.sources import FileRef  # noqa: E402
from rollout_graph.ingest.shortcuts import logprob_entries as typed  # noqa: E402
from rollout_graph.ingest.shortcuts import logprob_spans  # noqa: E402
from rollout_graph.ingest.shortcuts import logprob_structs as decoders  # noqa: E402
from rollout_graph.ingest.speedups import native  # noqa: E402


class _NoField(msgspec.Struct, gc=False):
    """An entry that keeps none of its fields."""


_VALIDATE = msgspec.json.Decoder(msgspec.Raw)
_WALK = msgspec.json.Decoder(list[_NoField])


def spans_of(path: Path, lines: int) -> list[bytes]:
    """The content arrays of the first ``lines`` lines that hold one (the loader's byte search)."""
    spans = []
    with path.open("rb") as stream:
        for number, raw in enumerate(stream):
            if number >= lines:
                break
            span = logprob_spans.located_span(raw)
            if span is not None:
                spans.append(raw[span[0] : span[1]])
    return spans


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", type=Path)
    ap.add_argument("--lines", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    spans = spans_of(args.trace, args.lines)
    if not spans:
        sys.exit(f"{args.trace}: no vLLM content array in its first {args.lines} lines")
    file = FileRef(str(args.trace), 0, 0)
    steps = {
        "validate": lambda span: _VALIDATE.decode(span),
        "walk": lambda span: _WALK.decode(span),
        "sampled": lambda span: decoders.SAMPLED.decode(span),
        "columns": lambda span: typed._sampled_only(span, file, 0),
        "columns_python": lambda span: typed._sampled_python(span, file, 0),
    }
    if native is not None:
        steps["native"] = native.sampled_entries
    if typed._sampled_only(spans[0], file, 0) is None:
        sys.exit(f"{args.trace}: its content arrays are not read with the alternatives left in the file")
    times: dict[str, list[float]] = {name: [] for name in steps}
    scale = 1000 / len(spans)
    for round_ in range(args.rounds):
        names = list(steps)
        names = names[round_ % len(names) :] + names[: round_ % len(names)]  # interleaved
        for name in names:
            step = steps[name]
            start = time.process_time()
            for span in spans:
                step(span)
            times[name].append((time.process_time() - start) * scale)
    floor = min(times["validate"])
    out = {
        "trace": str(args.trace),
        "calls": len(spans),
        "mb": round(sum(map(len, spans)) / 1e6, 1),
        "rounds": args.rounds,
        "load": open("/proc/loadavg").read().split()[0] if Path("/proc/loadavg").exists() else None,
    }
    for name, values in times.items():
        out[f"{name}_s_per_1000_min"] = round(min(values), 4)
        out[f"{name}_s_per_1000_median"] = round(statistics.median(values), 4)
        out[f"{name}_ratio"] = round(min(values) / floor, 2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
