"""Write a synthetic training run: ``STEPS`` step folders of ``ROLLOUTS`` rollouts each, as prime-rl's
token export lays them out (``token_exports/step_{N}/rank_{R}.jsonl``, small rows), with rewards
that climb, a trainer/inference drift that grows late in the run, and some rows without inference
logprobs (FATAL-free but untrainable) so every trend of the Run view moves.

    .venv/bin/python tools/make_run.py OUT [--steps 500] [--rollouts 256] [--ranks 4]
"""

from __future__ import annotations

import argparse
import json
import math
import random
from pathlib import Path


def row(step: int, rank: int, idx: int, steps: int, rng: random.Random) -> dict:
    n_prompt, n_reply, n_tool, n_reply2 = 6, 4 + idx % 3, 3, 2 + idx % 2
    ids = [rng.randrange(100, 30000) for _ in range(n_prompt + n_reply + n_tool + n_reply2)]
    mask = [False] * n_prompt + [True] * n_reply + [False] * n_tool + [True] * n_reply2
    inference = [0.0 if not m else -rng.uniform(0.01, 2.0) for m in mask]
    drift = 0.02 + (0.4 if step > steps * 0.8 and idx % 7 == 0 else 0.0)
    trainer = [t - drift if m else 0.0 for t, m in zip(inference, mask, strict=True)]
    reward = 1.0 if rng.random() < 0.2 + 0.6 * step / max(steps, 1) else 0.0
    n = len(ids)
    return {
        "schema_version": 1, "step": step, "rank": rank, "micro_step": 0, "micro_sequence_idx": idx,
        "export_sequence_idx": idx, "env_name": "synthetic", "token_ids": ids, "position_ids": list(range(n)),
        "loss_mask": mask, "advantages": [(reward - 0.5) if m else 0.0 for m in mask], "rewards": [reward] * n,
        "inference_logprobs": inference if idx % 50 else [None] * n, "trainer_logprobs": trainer,
        "mismatch_kl": [math.exp(-drift) + drift - 1 if m else 0.0 for m in mask],
        "is_masked": [False] * n,
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--rollouts", type=int, default=256, help="rollouts per step")
    parser.add_argument("--ranks", type=int, default=4, help="files per step")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    per_rank = max(1, args.rollouts // args.ranks)
    for step in range(1, args.steps + 1):
        folder = args.out / "token_exports" / f"step_{step}"
        folder.mkdir(parents=True, exist_ok=True)
        for rank in range(args.ranks):
            lines = [
                json.dumps(row(step, rank, idx, args.steps, rng), separators=(",", ":")) for idx in range(per_rank)
            ]
            (folder / f"rank_{rank}.jsonl").write_text("\n".join(lines) + "\n")
        (folder / "STABLE").touch()
    print(f"{args.steps} steps x {per_rank * args.ranks} rollouts -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
