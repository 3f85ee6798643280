"""Search speed on a synthetic 1,000-call rollout (~30M prompt+sampled tokens): messages and
responses, first search (index built) and later searches (index reused); goal: messages < 1 s.

``python benchmarks/bench_search.py [--calls 1000]``; the trace is generated into a temp folder.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.synthetic import write_trace  # noqa: E402
from rollout_graph.analysis.decode import decoder_for  # noqa: E402
from rollout_graph.analysis.search import MESSAGE, RESPONSE, Query, SearchIndex, search  # noqa: E402
from rollout_graph.ingest.load.files import load_paths  # noqa: E402
from rollout_graph.pipeline import analyse  # noqa: E402


def timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "synthetic.jsonl"
        tokens = write_trace(path, args.calls)
        (session,) = load_paths([path]).sessions.values()
    rollout = analyse(session)
    n_chars = sum(len(str(m.get("content") or "")) for c in rollout.calls for m in c.request_messages or ())
    print(f"{len(rollout.calls)} calls, {tokens:,} tokens, {n_chars / 1e6:.0f}M characters of request messages")
    wheres = (MESSAGE, RESPONSE)
    for text, kw in (("pytest again", {}), ("no such text anywhere", {}), ("FIXED the", {"ignore_case": True})):
        query = Query.compile(text, **kw)
        index = SearchIndex(rollout)
        run = lambda index=index, query=query: search(index, query, wheres)  # noqa: E731
        first, hits = timed(run)
        later = statistics.median(timed(run)[0] for _ in range(3))
        label = f"{text!r}" + (" (ignore case)" if kw else "")
        print(
            f"messages+responses {label}: {len(hits)} hits; first search (builds the index) {first * 1000:.0f} ms,"
            f" later searches median {later * 1000:.0f} ms (goal < 1000 ms)"
        )
    decoder = decoder_for(rollout.calls)
    index = SearchIndex(rollout, decoder)
    first, hits = timed(lambda: search(index, Query.compile("<123>")))
    later = statistics.median(timed(lambda: search(index, Query.compile("<123>")))[0] for _ in range(3))
    print(
        f"every place incl. decoded sampled and context spans ({decoder.label}): {len(hits)} hits;"
        f" first {first * 1000:.0f} ms (decodes every span), later median {later * 1000:.0f} ms;"
        f" the index keeps {index.nbytes / 1e6:.0f} MB ({index.partial_note() or 'every call searched'})"
    )


if __name__ == "__main__":
    main()
