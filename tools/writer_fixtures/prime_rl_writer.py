"""prime-rl's token export, written by prime-rl's own ``TokenExporter`` imported from its source.

Run: ``python prime_rl_writer.py PRIME_RL_SRC OPENENV_FIXTURE_DIR OUT`` with the writers' python
(torch, pydantic); ``tools/make_writer_fixtures.py prime-rl`` does. PRIME_RL_SRC is a checkout of
PrimeIntellect-ai/prime-rl (the commit in its COMMIT file): ``src/`` and
``packages/prime-rl-configs/src/`` go on the path; ``prime_rl.configs.trainer.DefaultLossConfig``
is imported; ``src/prime_rl/trainer/rl/token_export.py`` is executed whole from its source, its
``compute_importance_ratio_and_mismatch_kl`` executed from loss.py (whose module imports wandb
through prime_rl.utils).

``TokenExporter(OUT, rank).export(step, micro_step, micro_batch, model_output, sequence_lengths,
loss_config)`` writes ``OUT/token_exports/step_{N}/rank_{R}.jsonl``; ``mark_stable()`` the
``STABLE`` marker. Micro batches pack the OpenEnv fixture's rows (rollout.full.json) the way
prime-rl's packer does (one row of concatenated samples, trailing padding with an empty env name
and mask 0); the trainer's logprobs are the inference logprobs shifted by a fixed amount (one
sample by 0.3, so its tokens are masked by DPPO), entropy 0.5.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SRC, FIXTURE, OUT = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
sys.path[:0] = [str(SRC / "src"), str(SRC / "packages" / "prime-rl-configs" / "src")]
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from from_source import load, load_module  # noqa: E402
from prime_rl.configs.trainer import DefaultLossConfig, TrainerConfig  # noqa: E402

RL = SRC / "src" / "prime_rl" / "trainer" / "rl"
loss = load(RL / "loss.py", ("compute_importance_ratio_and_mismatch_kl",), {"torch": torch, "Tensor": torch.Tensor})
module = load_module(
    RL / "token_export.py",
    {
        "__name__": "prime_rl.trainer.rl.token_export",
        "DefaultLossConfig": DefaultLossConfig,
        "TrainerConfig": TrainerConfig,
        "compute_importance_ratio_and_mismatch_kl": loss["compute_importance_ratio_and_mismatch_kl"],
    },
    drop_imports_from="prime_rl",
)
TokenExporter = module["TokenExporter"]

document = json.loads((FIXTURE / "rollout.full.json").read_text())
rows = [s for s in document["sequences"] if s["role"] != "auxiliary"]


def micro_batch(samples: list[dict], shifts: list[float], pad: int) -> tuple[dict, dict, list[int]]:
    ids, pos, mask, adv, inf, trainer, env = [], [], [], [], [], [], []
    for sample, shift in zip(samples, shifts, strict=True):
        n = len(sample["input_ids"])
        ids += sample["input_ids"]
        pos += list(range(n))
        mask += [bool(m) for m in sample["loss_mask"]]
        advantage = 0.5 if sample["role"] == "agent" else -0.5
        adv += [advantage] * n
        inf += sample["logprobs"]
        trainer += [lp - shift if m else -1.5 for lp, m in zip(sample["logprobs"], sample["loss_mask"], strict=True)]
        env += ["calc-fix"] * n
    ids += [0] * pad
    pos += list(range(pad))
    mask += [False] * pad
    adv += [0.0] * pad
    inf += [0.0] * pad
    trainer += [0.0] * pad
    env += [""] * pad
    lengths = [len(s["input_ids"]) for s in samples]
    lengths[-1] += pad  # the packer's last sample runs to the end of the row
    batch = {
        "input_ids": torch.tensor([ids]),
        "position_ids": torch.tensor([pos]),
        "loss_mask": torch.tensor([mask]),
        "advantages": torch.tensor([adv]),
        "inference_logprobs": torch.tensor([inf]),
        "env_names": env,
    }
    output = {"logprobs": torch.tensor([trainer]), "entropy": torch.full((1, len(ids)), 0.5)}
    return batch, output, lengths


exporter = TokenExporter(OUT, rank=0)
loss_config = DefaultLossConfig()
for micro_step, (samples, shifts, pad) in enumerate([(rows[:2], [0.02, 0.02], 0), (rows[2:], [0.02, 0.3], 16)]):
    batch, output, lengths = micro_batch(samples, shifts, pad)
    exporter.export(1, micro_step, batch, output, lengths, loss_config)
exporter.mark_stable()
exporter.close()
print(f"wrote {OUT / 'token_exports'}")
