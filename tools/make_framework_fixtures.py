"""Write tests/fixtures/frameworks/: what each RL framework writes, one small run per framework.

verifiers is run for real when it is installed (``pip install verifiers``: its own ``prepare_turn``
/ ``commit`` build the message graph and its ``write_episode`` saves each episode). The others need a
GPU trainer to run, so their files are written here field by field from the writer's source (each
fixture's README.md names the path). Re-run with ``.venv/bin/python tools/make_framework_fixtures.py``.
"""

from __future__ import annotations

import json
import math
import pickle
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "frameworks"


def _k3(trainer: float, inference: float) -> float:
    d = trainer - inference
    return math.exp(d) - d - 1


def prime_rl(root: Path) -> None:
    """``token_exports/step_{N}/rank_{R}.jsonl`` + ``STABLE`` (src/prime_rl/trainer/rl/token_export.py)."""
    for step in (1, 2):
        for rank in (0, 1):
            folder = root / "token_exports" / f"step_{step}"
            folder.mkdir(parents=True, exist_ok=True)
            lines = []
            for idx in range(2):
                # system+user prompt (mask 0), a reply (mask 1), a tool result (mask 0), a second reply (mask 1)
                ids = [100, 101, 102, 103, 7, 8, 9, 104, 105, 106, 11, 12]
                mask = [False] * 4 + [True] * 3 + [False] * 3 + [True] * 2
                inference = [0.0 if not m else -0.25 - 0.1 * i - 0.05 * idx for i, m in enumerate(mask)]
                shift = 0.3 if (step, rank, idx) == (2, 1, 1) else 0.02  # one row drifts
                trainer = [None if not m else inference[i] - shift for i, m in enumerate(mask)]
                kl = [None if not m else _k3(trainer[i], inference[i]) for i, m in enumerate(mask)]
                advantage = 0.5 if idx == 0 else -0.5
                n = len(ids)
                record = {
                    "schema_version": 1,
                    "step": step,
                    "export_step": step,
                    "rank": rank,
                    "micro_step": 0,
                    "micro_sequence_idx": idx,
                    "export_sequence_idx": idx,
                    "run_id": None,
                    "env_name": "math-tools",
                    "token_ids": ids,
                    "position_ids": list(range(n)),
                    "loss_mask": mask,
                    "advantages": [advantage if m else 0.0 for m in mask],
                    "losses": [{"rl": {"advantage": advantage if m else 0.0, "mask": m}} for m in mask],
                    "rewards": [1.0 if idx == 0 else 0.0] * n,
                    "inference_logprobs": inference,
                    "trainer_logprobs": [0.0 if t is None else t for t in trainer],
                    "entropy": [0.5] * n,
                    "mismatch_kl": [0.0 if k is None else k for k in kl],
                    "log_importance_ratio": [0.0 if t is None else t - inference[i] for i, t in enumerate(trainer)],
                    "importance_ratio": [
                        1.0 if t is None else math.exp(t - inference[i]) for i, t in enumerate(trainer)
                    ],
                    "prob_delta": [0.0] * n,
                    "is_masked": [m and shift > 0.1 for m in mask],
                    "is_masked_high": [False] * n,
                    "is_masked_low": [m and shift > 0.1 for m in mask],
                }
                lines.append(json.dumps(record, separators=(",", ":"), allow_nan=False))
            (folder / f"rank_{rank}.jsonl").write_text("\n".join(lines) + "\n")
            (folder / "STABLE").touch()


def verifiers(root: Path) -> bool:
    """``rollouts/step_{N}/train/default/traces.jsonl``: verifiers Episodes saved by verifiers' own ``write_episode``."""
    try:
        from verifiers.v1 import graph
        from verifiers.v1.configs.agent import WireAgentConfig
        from verifiers.v1.episode import Episode
        from verifiers.v1.task import WireTaskData
        from verifiers.v1.trace import AgentInfo, TraceTask, WireTrace
        from verifiers.v1.types import AssistantMessage, Response, SystemMessage, TurnTokens, UserMessage
        from verifiers.v1.utils.trace_store import TRACES_FILE, write_episode
    except ImportError:
        print("verifiers is not installed: verifiers fixture kept as it is", file=sys.stderr)
        return False

    def respond(text: str, prompt: list[int], completion: list[int], lps: list[float], spans) -> Response:
        tokens = TurnTokens(prompt_ids=prompt, completion_ids=completion, completion_logprobs=lps, message_spans=spans)
        return Response(
            id=text, created=0, model="Qwen/Qwen3-0.6B", message=AssistantMessage(content=text),
            finish_reason="stop", tokens=tokens,
        )  # fmt: skip

    for step in (3, 4):
        episodes = []
        for k in range(2):
            task = TraceTask(type="MathRow", data=WireTaskData(question=f"q{k}: 2+{k}"))
            trace = WireTrace(task=task, agent=AgentInfo(config=WireAgentConfig(), name="solver"))
            system, user = SystemMessage(content="Answer briefly."), UserMessage(content=f"What is 2+{k}?")
            first = graph.prepare_turn(trace, [system, user])
            first.commit(respond(f"{2 + k}", [1, 2, 3, 4, 5], [60 + k, 61], [-0.1, -0.2], [(0, 2), (2, 4)]))
            follow = UserMessage(content="Times 3?")
            second = graph.prepare_turn(trace, [system, user, AssistantMessage(content=f"{2 + k}"), follow])
            prompt = [1, 2, 3, 4, 5, 60 + k, 61, 8, 9, 10, 11]
            second.commit(
                respond(f"{3 * (2 + k)}", prompt, [70 + k, 71], [-0.3, -0.4], [(0, 2), (2, 4), (4, 7), (7, 10)])
            )
            if k == 1:  # a branch: the second question re-asked from the first answer (two leaves)
                other = UserMessage(content="Plus 1?")
                third = graph.prepare_turn(trace, [system, user, AssistantMessage(content=f"{2 + k}"), other])
                third.commit(respond("4", prompt, [80, 81], [-0.5, -0.6], [(0, 2), (2, 4), (4, 7), (7, 10)]))
            for node in trace.nodes:
                if node.sampled:
                    n = sum(node.mask)
                    node.advantages = [0.25 * (1 if k == 0 else -1)] * n
                    node.trainer_logprobs = [lp - 0.01 for lp in node.logprobs]
            trace.record_reward("correct", 1.0 if k == 0 else 0.0)
            trace.ok = True
            episodes.append(Episode(task=task, traces=[trace], ok=True))
        folder = root / "rollouts" / f"step_{step}" / "train" / "default"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / TRACES_FILE).unlink(missing_ok=True)
        for episode in episodes:  # verifiers' own saved-traces writer (verifiers/v1/utils/trace_store.py)
            write_episode(folder, episode)
    return True


def nemo_rl(root: Path) -> None:
    """``logs/exp_001/train_data_step{N}.jsonl`` (nemo_rl/algorithms/grpo.py, log_batched_dict_as_jsonl)."""
    folder = root / "logs" / "exp_001"
    folder.mkdir(parents=True, exist_ok=True)
    for step in (1, 2):
        batch = {
            "rewards": [1.0, 0.0],
            "input_lengths": [7, 9],
            "token_loss_mask": [[0, 0, 0, 1, 1, 1, 1, 0, 0], [0, 0, 0, 0, 1, 1, 0, 1, 1]],
            "sample_loss_mask": [1, 1],
            "advantages": [[0.0, 0.0, 0.0, 0.7, 0.7, 0.7, 0.7, 0, 0], [0.0] * 4 + [-0.7, -0.7, 0.0, -0.7, -0.7]],
            "generation_logprobs": [[0, 0, 0, -0.1, -0.2, -0.3, -0.4, 0, 0], [0, 0, 0, 0, -0.5, -0.6, 0, -0.7, -0.8]],
            "prev_logprobs": [[0, 0, 0, -0.11, -0.2, -0.3, -0.41, 0, 0], [0, 0, 0, 0, -0.5, -0.62, 0, -0.7, -0.8]],
            "token_ids": [[1, 2, 3, 40, 41, 42, 2, 0, 0], [1, 2, 5, 6, 50, 51, 7, 52, 2]],
            "content": [["What is 1+1?", "2"], ["Name a prime.", "7"]],
        }
        n = len(batch["rewards"])
        lines = [json.dumps({k: v[i] for k, v in batch.items()}) for i in range(n)]
        (folder / f"train_data_step{step}.jsonl").write_text("\n".join(lines) + "\n")


def verl(root: Path) -> None:
    """``rollout_data_dir/{step}.jsonl`` (verl/trainer/ppo/ray_trainer.py, _dump_generations)."""
    folder = root / "rollout_data_dir"
    folder.mkdir(parents=True, exist_ok=True)
    for step in (1, 2):
        rows = [
            {"input": "user\nWhat is 3*4?\nassistant\n", "output": "12", "gts": "12", "score": 1.0, "step": step, "acc": True},
            {"input": "user\nWhat is 5-7?\nassistant\n", "output": "2", "gts": "-2", "score": 0.0, "step": step, "acc": False},
        ]  # fmt: skip
        (folder / f"{step}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def skyrl(root: Path) -> None:
    """``dumped_evals/global_step_{N}_evals/{data_source}.jsonl`` (skyrl_train/utils/trainer_utils.py)."""
    for step in (0, 5):
        folder = root / "dumped_evals" / f"global_step_{step}_evals"
        folder.mkdir(parents=True, exist_ok=True)
        rows = [
            {
                "input_prompt": "<|im_start|>user\nSolve 2x=6<|im_end|>\n<|im_start|>assistant\n",
                "output_response": "x = 3<|im_end|>",
                "score": 1.0 if step else 0.0,
                "stop_reason": "stop",
                "env_class": "gsm8k",
                "env_extras": {"reward_spec": {"ground_truth": "3"}},
                "data_source": "openai/gsm8k",
            }
        ]
        (folder / "openai_gsm8k.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        metrics = {"eval/openai_gsm8k/avg_score": 1.0 if step else 0.0, "eval/all/avg_score": 1.0 if step else 0.0}
        (folder / "aggregated_results.jsonl").write_text(json.dumps(metrics) + "\n")
    dumps = root / "training_dumps"
    dumps.mkdir(parents=True, exist_ok=True)
    (dumps / "global_step_5.pkl").write_bytes(pickle.dumps({"note": "never unpickled by rollout-graph"}))


def trl(root: Path, conversational: bool = False) -> bool:
    """``completions/completions_{step:05d}.parquet`` written by TRL's own ``GRPOTrainer`` (trl/trainer/grpo_trainer.py,
    ``log_completions=True``): two CPU steps of a random 1-layer model built from a config (no weights are
    downloaded) with the bundled SmolLM2 tokenizer; ``conversational`` uses chat prompts."""
    try:
        import torch
        from datasets import Dataset
        from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
        from trl import GRPOConfig, GRPOTrainer
    except ImportError:
        print("trl (and torch) are not installed: TRL fixture kept as it is", file=sys.stderr)
        return False
    import os
    import shutil
    import tempfile

    os.environ.setdefault("WANDB_DISABLED", "true")
    tokenizer_dir = Path(__file__).resolve().parent.parent / "sample_traces" / "SmolLM2-135M-Instruct"
    tok = PreTrainedTokenizerFast.from_pretrained(str(tokenizer_dir))
    tok.pad_token = tok.pad_token or tok.eos_token
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=256,
    )  # fmt: skip
    questions = ["What is 2+2?", "Spell cat backwards.", "Name a prime.", "Say hi."]
    prompts = [[{"role": "user", "content": q}] for q in questions] if conversational else questions

    def text(completion) -> str:
        return completion if isinstance(completion, str) else " ".join(m["content"] for m in completion)

    def length_reward(completions, **kwargs):
        return [len(text(c)) / 10 for c in completions]

    def has_digit(completions, **kwargs):
        return [1.0 if any(ch.isdigit() for ch in text(c)) else 0.0 for c in completions]

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
        target = root / "completions"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(Path(out) / "completions", target)
    return True


def otel(root: Path) -> None:
    """An OTLP JSON export (collector file exporter) of GenAI spans (OpenTelemetry semantic conventions)."""
    root.mkdir(parents=True, exist_ok=True)

    def attr(key: str, value) -> dict:
        if isinstance(value, bool):
            return {"key": key, "value": {"boolValue": value}}
        if isinstance(value, int):
            return {"key": key, "value": {"intValue": str(value)}}
        if isinstance(value, float):
            return {"key": key, "value": {"doubleValue": value}}
        return {"key": key, "value": {"stringValue": value}}

    user = [{"role": "user", "parts": [{"type": "text", "content": "List the files."}]}]
    call = [{"role": "assistant", "parts": [{"type": "tool_call", "id": "t1", "name": "ls", "arguments": {"path": "."}}], "finish_reason": "tool_call"}]  # fmt: skip
    result = [{"role": "tool", "parts": [{"type": "tool_call_response", "id": "t1", "response": "a.py b.py"}]}]
    final = [{"role": "assistant", "parts": [{"type": "text", "content": "a.py and b.py"}], "finish_reason": "stop"}]
    base = 1_760_000_000_000_000_000

    def chat(span: str, start: int, inputs: list, outputs: list, tokens: tuple[int, int]) -> dict:
        return {
            "traceId": "5b8efff798038103d269b633813fc60c", "spanId": span, "parentSpanId": "a1",
            "name": "chat gpt-4o-mini", "kind": 3,
            "startTimeUnixNano": str(base + start), "endTimeUnixNano": str(base + start + 500_000_000),
            "attributes": [
                attr("gen_ai.operation.name", "chat"), attr("gen_ai.provider.name", "openai"),
                attr("gen_ai.request.model", "gpt-4o-mini"), attr("gen_ai.response.model", "gpt-4o-mini-2024-07-18"),
                attr("gen_ai.conversation.id", "conv-42"), attr("gen_ai.request.temperature", 0.0),
                attr("gen_ai.usage.input_tokens", tokens[0]), attr("gen_ai.usage.output_tokens", tokens[1]),
                attr("gen_ai.input.messages", json.dumps(inputs)), attr("gen_ai.output.messages", json.dumps(outputs)),
            ],
        }  # fmt: skip

    agent = {
        "traceId": "5b8efff798038103d269b633813fc60c", "spanId": "a1", "name": "invoke_agent files-bot",
        "startTimeUnixNano": str(base), "endTimeUnixNano": str(base + 2_000_000_000),
        "attributes": [attr("gen_ai.operation.name", "invoke_agent"), attr("gen_ai.agent.name", "files-bot")],
    }  # fmt: skip
    spans = [
        agent,
        chat("c1", 1000, user, call, (12, 8)),
        chat("c2", 900_000_000, user + call + result, final, (30, 6)),
    ]
    export = {
        "resourceSpans": [
            {
                "resource": {"attributes": [attr("service.name", "files-bot")]},
                "scopeSpans": [{"scope": {"name": "opentelemetry.instrumentation.openai_v2"}, "spans": spans}],
            }
        ]
    }
    (root / "traces.json").write_text(json.dumps(export) + "\n")


def main() -> int:
    prime_rl(OUT / "prime-rl")
    verifiers(OUT / "verifiers")
    nemo_rl(OUT / "nemo-rl")
    verl(OUT / "verl")
    skyrl(OUT / "skyrl")
    trl(OUT / "trl")
    trl(OUT / "trl-chat", conversational=True)
    otel(OUT / "otel")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
