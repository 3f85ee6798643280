"""NeMo-RL's train/val data logs, written by NeMo-RL's own functions executed from its source.

Run: ``PYTHONPATH=NEMO_RL_SRC python nemo_rl_writer.py NEMO_RL_SRC OPENENV_FIXTURE_DIR OUT`` with the
writers' python (torch, transformers; ``tools/make_writer_fixtures.py nemo-rl`` does).

What runs as NeMo-RL wrote it (NVIDIA-NeMo/RL at the commit in NEMO_RL_SRC/COMMIT):
- ``nemo_rl.data.llm_message_utils.batched_message_log_to_flat_message`` and
  ``get_keys_from_message_log`` (imported);
- ``add_grpo_token_loss_masks_and_generation_logprobs`` (nemo_rl/algorithms/grpo.py) and
  ``backfill_missing_routed_experts`` (nemo_rl/experience/rollouts.py), executed from their source
  (their modules import ray);
- ``Logger.log_batched_dict_as_jsonl`` (nemo_rl/utils/logger.py), executed from its source with
  ``self.base_log_dir`` set (the module imports mlflow, wandb, swanlab, ray at the top), which
  writes ``make_microbatch_iterator(1)`` samples: every value a batch of one.

The batch is built as grpo.py builds ``train_data_step{N}.jsonl`` (``log_data``: ``content``,
``rewards``, ``input_lengths``, ``token_ids``, ``token_loss_mask``, ``sample_loss_mask``,
``advantages``, ``generation_logprobs``, ``prev_logprobs``) and ``val_data_step{N}.jsonl``
(``content``: message logs of role and content, ``rewards``), from the message logs of the
OpenEnv fixture's rows (rollout.full.json): per turn, the context it adds (a user or tool
message, mask 0) and its sampled tokens (an assistant message with ``generation_logprobs``).
Padding: ``make_sequence_length_divisible_by=8``, pad id 0. ``prev_logprobs`` (the trainer's) are
the generation logprobs shifted by a fixed small amount on sampled tokens, -1.5 elsewhere.
"""

from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path
from typing import Optional, cast

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from from_source import load  # noqa: E402

SRC, FIXTURE, OUT = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])

from nemo_rl.data.llm_message_utils import (  # noqa: E402
    batched_message_log_to_flat_message,
    get_keys_from_message_log,
)
from nemo_rl.distributed.batched_data_dict import BatchedDataDict  # noqa: E402

ns = {"torch": torch, "cast": cast, "Optional": Optional, "Sequence": list, "LLMMessageLogType": list}
ns["VLMMessageLogType"] = list
ns["ROUTED_EXPERTS_MISSING_ROUTE_SENTINEL"] = -1
load(
    SRC / "nemo_rl/experience/rollouts.py",
    ("backfill_missing_routed_experts", "_find_routed_experts_template"),
    ns,
)
load(SRC / "nemo_rl/algorithms/grpo.py", ("add_grpo_token_loss_masks_and_generation_logprobs",), ns)
logger_ns = load(
    SRC / "nemo_rl/utils/logger.py",
    ("log_batched_dict_as_jsonl",),
    {"BatchedDataDict": BatchedDataDict, "torch": torch, "np": np, "json": json, "os": os, "Any": object},
    cls="Logger",
)
logger = types.SimpleNamespace(base_log_dir=str(OUT))


def log_batched_dict_as_jsonl(to_log, filename):
    return logger_ns["log_batched_dict_as_jsonl"](logger, to_log, filename)


def text(ids: list[int]) -> str:
    return bytes(i - 256 for i in ids if i >= 256).decode(errors="replace")


document = json.loads((FIXTURE / "rollout.full.json").read_text())
turns = {t["node_id"]: t for t in document["turns"]}
rows = [s for s in document["sequences"] if s["role"] in ("agent", "discarded")]


def message_log(row: dict) -> list[dict]:
    """The row as NeMo-RL's message log: per turn its context (user / tool) and its sample (assistant)."""
    log, at = [], 0
    ids, lps = row["input_ids"], row["logprobs"]
    for k, node in enumerate(row["node_ids"]):
        turn = turns[node]
        start, end = turn["n_prompt"], turn["n_prompt"] + turn["n_sampled"]
        context = ids[at:start]
        log.append({"role": "user" if k == 0 else "tool", "content": text(context), "token_ids": torch.tensor(context)})
        log.append(
            {
                "role": "assistant",
                "content": text(ids[start:end]),
                "token_ids": torch.tensor(ids[start:end]),
                "generation_logprobs": torch.tensor(lps[start:end], dtype=torch.float32),
            }
        )
        at = end
    return log


logs = [message_log(r) for r in rows]
rewards = torch.tensor([1.0 if r["role"] == "agent" else 0.0 for r in rows])
add = ns["add_grpo_token_loss_masks_and_generation_logprobs"]
add(logs)
flat, input_lengths = batched_message_log_to_flat_message(
    logs, pad_value_dict={"token_ids": 0}, make_sequence_length_divisible_by=8
)
mask = flat["token_loss_mask"]
advantages = ((rewards - rewards.mean()).unsqueeze(-1) * mask).to(torch.float32)
generation = flat["generation_logprobs"]
shift = 0.01 * (torch.arange(generation.shape[1]) % 3)
prev = torch.where(mask.bool(), generation - shift, torch.full_like(generation, -1.5))
prev[:, 0] = 0.0
train_data = BatchedDataDict(
    {
        "input_ids": flat["token_ids"],
        "input_lengths": input_lengths,
        "generation_logprobs": generation,
        "token_mask": mask,
        "sample_mask": torch.ones(len(rows)),
        "advantages": advantages,
        "prev_logprobs": prev,
    }
)
# grpo.py, "Log training data" (log_data, then logger.log_batched_dict_as_jsonl)
log_data = {}
log_data["content"] = flat["content"]
log_data["rewards"] = rewards.tolist()
log_data["input_lengths"] = input_lengths.tolist()
log_data["token_ids"] = train_data["input_ids"].tolist()
log_data["token_loss_mask"] = train_data["token_mask"].tolist()
log_data["sample_loss_mask"] = train_data["sample_mask"].tolist()
log_data["advantages"] = train_data["advantages"].tolist()
log_data["generation_logprobs"] = train_data["generation_logprobs"].tolist()
log_data["prev_logprobs"] = train_data["prev_logprobs"].tolist()
log_batched_dict_as_jsonl(log_data, "train_data_step1.jsonl")

# grpo.py, validate(): the message logs' role and content, and the rewards
all_message_logs = [get_keys_from_message_log(log, ["role", "content"]) for log in logs]
val_log_data = {"content": all_message_logs, "rewards": rewards.tolist()}
log_batched_dict_as_jsonl(val_log_data, "val_data_step1.jsonl")
