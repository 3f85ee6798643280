"""verl's rollout dumps and SkyRL's eval dumps, written by their own functions executed from source.

Run: ``python verl_skyrl_writer.py SOURCES OPENENV_FIXTURE_DIR OUT`` with any Python 3.11 (no
third-party packages); ``tools/make_writer_fixtures.py verl skyrl`` does. SOURCES holds checkouts
of volcengine/verl (``verl/``) and NovaSky-AI/SkyRL (``skyrl/``), each with its commit in COMMIT.

- verl: ``RayPPOTrainer._dump_generations(self, inputs, outputs, gts, scores,
  reward_extra_infos_dict, dump_path)`` (verl/trainer/ppo/ray_trainer.py), executed from its
  source (the module imports ray and torch) with ``self.global_steps`` set, called as
  ``_log_rollout_data`` calls it: texts decoded with special tokens skipped, ``scores`` the summed
  token-level scores, ``reward_extra_infos_dict`` with an ``acc`` column and a ``request_id`` per
  sample (verl's agent loop mints a uuid4 hex; here from a seeded generator).
  Steps 1 and 2: ``OUT/verl/rollout_data/{1,2}.jsonl``.
- SkyRL: ``dump_per_dataset_eval_results`` and ``sanitize_data_source``
  (skyrl/train/utils/trainer_utils.py) executed from source, with a ``logging`` logger for loguru's:
  ``OUT/skyrl/dumped_evals/global_step_{N}_evals/{data_source}.jsonl`` and
  ``aggregated_results.jsonl``. One sample's reward is a per-token list (SkyRL's token-level
  rewards); two data sources.

The samples are the OpenEnv fixture's rows (rollout.full.json), split at ``prompt_len``; the toy
tokenizer decodes an id >= 256 as the byte id - 256 and drops the control ids (special tokens).
"""

from __future__ import annotations

import json
import logging
import os
import random
import sys
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from from_source import load  # noqa: E402

SOURCES, FIXTURE, OUT = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
SEED = random.Random(38)  # verl's request ids are uuid4 hex per sample: seeded here
document = json.loads((FIXTURE / "rollout.full.json").read_text())
rows = document["sequences"]


def decode(ids: list[int], skip_special_tokens: bool = True) -> str:
    if skip_special_tokens:
        return bytes(i - 256 for i in ids if i >= 256).decode(errors="replace")
    return "".join(f"<|{i}|>" if i < 256 else chr(i - 256) for i in ids)


prompts = [r["input_ids"][: r["prompt_len"]] for r in rows]
responses = [r["input_ids"][r["prompt_len"] :] for r in rows]

# --- verl ---------------------------------------------------------------------------------------
verl = load(
    SOURCES / "verl/verl/trainer/ppo/ray_trainer.py",
    ("_dump_generations",),
    {"json": json, "os": os},
    cls="RayPPOTrainer",
)
for step in (1, 2):
    scores = [1.0 if r["role"] == "agent" and step == 2 else 0.0 for r in rows]
    verl["_dump_generations"](
        types.SimpleNamespace(global_steps=step),
        inputs=[decode(p) for p in prompts],
        outputs=[decode(r) for r in responses],
        gts=["return a + b"] * len(rows),
        scores=scores,
        reward_extra_infos_dict={
            "acc": [s > 0 for s in scores],
            "request_id": [SEED.randbytes(16).hex() for _ in rows],
        },
        dump_path=str(OUT / "verl" / "rollout_data"),
    )

# --- SkyRL --------------------------------------------------------------------------------------
sky = load(
    SOURCES / "skyrl/skyrl/train/utils/trainer_utils.py",
    ("dump_per_dataset_eval_results", "sanitize_data_source"),
    {"json": json, "logger": logging.getLogger("skyrl")},
)
tokenizer = types.SimpleNamespace(decode=lambda ids: decode(ids, skip_special_tokens=False))
for step in (0, 5):
    rewards: list = [1.0 if r["role"] == "agent" and step else 0.0 for r in rows]
    rewards[-1] = [0.0] * (len(responses[-1]) - 1) + [float(bool(step))]  # token-level rewards
    generator_output = {
        "prompt_token_ids": prompts,
        "response_ids": responses,
        "rewards": rewards,
        "loss_masks": [r["loss_mask"][r["prompt_len"] :] for r in rows],
        "stop_reasons": ["stop"] * len(rows),
        "rollout_logprobs": [r["logprobs"][r["prompt_len"] :] for r in rows],
    }
    folder = OUT / "skyrl" / "dumped_evals" / f"global_step_{step}_evals"
    folder.mkdir(parents=True, exist_ok=True)
    sources = ["toy/calc" if i % 2 == 0 else "toy/calc-hard" for i in range(len(rows))]
    sky["dump_per_dataset_eval_results"](
        folder,
        tokenizer,
        generator_output,
        sources,
        ["calc_env"] * len(rows),
        [{"task": "calc-fix", "reward_spec": {"ground_truth": "a + b"}}] * len(rows),
        {"eval/toy/calc/avg_score": 0.5 if step else 0.0, "eval/all/avg_score": 0.5 if step else 0.0},
    )
print(f"wrote {OUT / 'verl'} and {OUT / 'skyrl'}")
