"""Signals join throughput: read a signals file (trainer logprobs and advantages for every training
row of a synthetic rollout) and join it. ``python benchmarks/bench_signals.py [--calls 1000]``."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from synthetic import write_trace  # noqa: E402

from rollout_graph.ingest.load.files import load_paths  # noqa: E402
from rollout_graph.pipeline import analyse  # noqa: E402
from rollout_graph.signals.join import attach_all  # noqa: E402
from rollout_graph.signals.reading import read_signals  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace.jsonl"
        write_trace(trace, args.calls)
        rollouts = [analyse(s) for s in load_paths([trace]).sessions.values()]
        lines, positions = [], 0
        for r in rollouts:
            for seq in r.sequences:
                tokens = r.tokens(seq)
                noise = rng.normal(0, 0.01, tokens.logprobs.shape[0])
                positions += tokens.logprobs.shape[0]
                lines.append(orjson.dumps({
                    "session_id": r.session_id, "leaf_id": r.calls[seq.leaf].node_id, "reward": 1.0,
                    "trainer_logprobs": (tokens.logprobs + noise).round(5),
                    "advantages": np.where(tokens.loss_mask == 1, 0.5, 0.0),
                }, option=orjson.OPT_SERIALIZE_NUMPY))  # fmt: skip
        path = Path(tmp) / "run.signals.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")
        size = path.stat().st_size
        started = time.perf_counter()
        signals = read_signals(path)
        read = time.perf_counter() - started
        started = time.perf_counter()
        joined, _ = attach_all(rollouts, signals)
        join = time.perf_counter() - started
    s = joined[0].signals.summary()
    print(
        f"{args.calls} calls, {len(lines)} rows, {positions:,} positions, {size / 1e6:.0f} MB signals: "
        f"read {read:.2f} s ({positions / read / 1e6:.1f}M positions/s), join {join:.2f} s "
        f"({positions / join / 1e6:.1f}M positions/s); compared {s['n_tokens']:,} tokens"
    )


if __name__ == "__main__":
    main()
