"""Decoding speed with the bundled tokenizer: per-token pieces for 100k tokens (goal: < 0.2 s)."""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rollout_graph.analysis.decode import BUNDLED, SAMPLES, TokenizerDecoder  # noqa: E402


def main() -> None:
    decoder = TokenizerDecoder(SAMPLES / "SmolLM2-135M-Instruct" / "tokenizer.json", BUNDLED)
    ids = np.random.default_rng(0).integers(0, 49152, size=100_000)
    times = []
    for _ in range(5):
        start = time.perf_counter()
        decoder.pieces(ids)
        times.append(time.perf_counter() - start)
    print(f"decode 100k tokens into per-token pieces: median {statistics.median(times) * 1000:.0f} ms (goal < 200 ms)")


if __name__ == "__main__":
    main()
