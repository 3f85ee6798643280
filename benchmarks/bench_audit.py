"""Corpus audit throughput: rollouts per second for 20-call rollouts, 1 and 2 workers, local
process pool vs Ray. ``python benchmarks/bench_audit.py [--rollouts 400]``."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from synthetic import generate  # noqa: E402

from rollout_graph.reports import audit  # noqa: E402

PER_FILE = 10


def write_corpus(folder: Path, rollouts: int) -> list[Path]:
    files = []
    for f in range(rollouts // PER_FILE):
        lines = []
        for r in range(PER_FILE):
            lines += generate(20, seed=f * PER_FILE + r, session=f"r{f}-{r}", max_context=8_000).records
        path = folder / f"part-{f:04d}.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")
        files.append(path)
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rollouts", type=int, default=400)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        files = write_corpus(Path(tmp), args.rollouts)
        size = sum(f.stat().st_size for f in files) / 1e6
        print(f"{args.rollouts} rollouts of 20 calls in {len(files)} files ({size:.0f} MB)")
        audit.run_local(files[:1], 1)  # warm the page cache and imports
        for engine in ("local", "ray"):
            for workers in (1, 2):
                start = time.perf_counter()
                rows = audit.run_local(files, workers) if engine == "local" else audit.run_ray(files, workers)
                elapsed = time.perf_counter() - start
                assert len(rows) == args.rollouts
                print(
                    f"{engine:5s} {workers} worker(s): {elapsed:6.2f} s = {len(rows) / elapsed:7.1f} rollouts/s (start-up included)"
                )


if __name__ == "__main__":
    main()
