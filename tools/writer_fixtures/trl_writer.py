"""TRL 1.16's GRPO completions logs, written by TRL's own ``GRPOTrainer`` (``log_completions=True``).

Run: ``python trl_writer.py TOKENIZER_DIR OUT`` with the writers' python (trl==1.16.0, CPU torch);
``tools/make_writer_fixtures.py trl`` does. Two CPU steps of a random one-layer Llama built from a
config (no weights are downloaded) with the bundled SmolLM2 tokenizer; ``trl/trainer/grpo_trainer.py``
(``GRPOTrainer.log``) writes ``OUT/plain/completions/completions_{step:05d}.parquet`` through pandas,
and ``OUT/chat/...`` the same with chat prompts. Seeded: the same run gives the same tables.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

TOKENIZER, OUT = Path(sys.argv[1]), Path(sys.argv[2])
os.environ.setdefault("WANDB_DISABLED", "true")

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402


def text(completion) -> str:
    return completion if isinstance(completion, str) else " ".join(m["content"] for m in completion)


def length_reward(completions, **kwargs):
    return [len(text(c)) / 10 for c in completions]


def has_digit(completions, **kwargs):
    return [1.0 if any(ch.isdigit() for ch in text(c)) else 0.0 for c in completions]


def run(target: Path, conversational: bool) -> None:
    tok = PreTrainedTokenizerFast.from_pretrained(str(TOKENIZER))
    tok.pad_token = tok.pad_token or tok.eos_token
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=256,
    )  # fmt: skip
    questions = ["What is 2+2?", "Spell cat backwards.", "Name a prime.", "Say hi."]
    prompts = [[{"role": "user", "content": q}] for q in questions] if conversational else questions
    with tempfile.TemporaryDirectory() as out:
        args = GRPOConfig(
            output_dir=out, per_device_train_batch_size=2, num_generations=2, max_completion_length=6, max_steps=2,
            logging_steps=1, log_completions=True, report_to=[], use_cpu=True, bf16=False, save_strategy="no", seed=0,
        )  # fmt: skip
        trainer = GRPOTrainer(
            model=LlamaForCausalLM(config), reward_funcs=[length_reward, has_digit], args=args,
            train_dataset=Dataset.from_dict({"prompt": prompts}), processing_class=tok,
        )  # fmt: skip
        trainer.train()
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(Path(out) / "completions", target)
    print(f"wrote {target}")


run(OUT / "plain" / "completions", conversational=False)
run(OUT / "chat" / "completions", conversational=True)
