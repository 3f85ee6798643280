"""Decoded-text rollout dumps: verl, SkyRL and TRL write prompt/completion strings (grade ``text``).

- verl, ``verl/trainer/ppo/ray_trainer.py`` ``_dump_generations``: ``{rollout_data_dir}/{step}.jsonl``,
  one sample a line: ``input, output, gts, score, step`` plus every reward-extra key (decoded with
  special tokens skipped).
- SkyRL, ``skyrl_train/utils/trainer_utils.py`` ``dump_per_dataset_eval_results``:
  ``{export_path}/dumped_evals/global_step_{N}_evals/{data_source}.jsonl``: ``input_prompt,
  output_response, score, stop_reason, env_class, env_extras, data_source`` (and one
  ``aggregated_results.jsonl`` of metrics, skipped by name).
- TRL, ``trl/trainer/grpo_trainer.py`` (``log_completions``):
  ``{output_dir}/completions/completions_{step:05d}.parquet``: ``step, prompt, completion``, one
  column per reward function, ``advantage``.

Each row is one call with no ids (TRL's conversational prompts keep their messages: grade
``messages``); its score joins as the rollout's reward.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

from rollout_graph.core.records import Call
from rollout_graph.ingest.formats.fidelity import MESSAGES, TEXT, step_from_path, step_of
from rollout_graph.ingest.formats.fields import RecordError, new_call

VERL = "verl rollout dump"
SKYRL = "SkyRL eval dump"
TRL = "TRL completions"
SKYRL_METRICS = "SkyRL aggregated eval metrics (eval/... keys), not rollouts; the per-dataset files beside it are read"


def kind_of(record: dict) -> str | None:
    """Which text dump a record is, or None."""
    if "input_prompt" in record and "output_response" in record:
        return SKYRL
    if "input" in record and "output" in record and ("score" in record or "step" in record or "gts" in record):
        return VERL
    if "prompt" in record and "completion" in record and ("advantage" in record or "step" in record):
        return TRL
    return None


def is_skyrl_metrics(record: dict, source: str) -> bool:
    """SkyRL's ``aggregated_results.jsonl`` line: every key an ``eval/...`` metric."""
    return source.rsplit("/", 1)[-1].startswith("aggregated_results") or (
        bool(record) and all(isinstance(k, str) and k.startswith("eval/") for k in record)
    )


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # a conversational prompt
        parts = [m.get("content") for m in value if isinstance(m, dict)]
        return "\n".join(p for p in parts if isinstance(p, str))
    return "" if value is None else str(value)


def _messages(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(m, dict) and "role" in m for m in value)


def _number(value: Any) -> float | None:
    if type(value) in (int, float, bool):
        return float(value)
    return None


_KEYS = {
    VERL: ("input", "output", "score"),
    SKYRL: ("input_prompt", "output_response", "score"),
    TRL: ("prompt", "completion", None),
}


def parse(record: dict, kind: str, source: str, line: int, default_session: str) -> list[Call]:
    """One text call for a dump row; its score (verl, SkyRL) or reward columns (TRL) as signals."""
    prompt_key, output_key, score_key = _KEYS[kind]
    step = step_of(record)
    if step is None:
        step = step_from_path(source)
    rid = record.get("request_id", record.get("uid", record.get("index")))
    row = rid if isinstance(rid, (str, int)) and not isinstance(rid, bool) else line
    # the folder keeps two dumps of one step apart (verl's rollout and validation dirs, SkyRL's data sources)
    folder = PurePath(source).parent.name
    prefix = f"{folder}/" if folder else ""
    if folder and step_from_path(folder) is not None:
        session = f"{prefix}{default_session}/{row}"
    else:
        session = f"{prefix}{f'step_{step}' if step is not None else default_session}/{row}"
    call = new_call({"session_id": session, "node_id": "c0"}, source, line, kind, session)
    if not isinstance(record.get(output_key), (str, list)):
        raise RecordError(f"{kind}: {output_key} is not text")
    prompt, output = record.get(prompt_key), record.get(output_key)
    grade = TEXT
    if isinstance(prompt, list) and _messages(prompt) and (_messages(output) or isinstance(output, str)):
        # TRL's conversational prompts: the chat messages themselves (still no ids)
        grade = MESSAGES
        call.request_messages = [dict(m) for m in prompt]
        replies = [dict(m) for m in output] if isinstance(output, list) else [{"role": "assistant", "content": output}]
        call.response_message = replies[-1] if replies else None
    else:
        call.request_messages = [{"role": "user", "content": _text(prompt)}]
        call.response_message = {"role": "assistant", "content": _text(output)}
    if isinstance(record.get("stop_reason"), str):
        call.finish_reason = record["stop_reason"]
    extra: dict[str, Any] = {}
    for key, value in record.items():
        if key in (prompt_key, output_key, score_key, "step"):
            continue
        if isinstance(value, (str, int, float, bool)) and not (isinstance(value, str) and len(value) > 200):
            extra[key] = value
    reward = _number(record.get(score_key)) if score_key else None
    if kind == TRL:
        # TRL logs one column per reward function; their sum is the (unweighted) reward.
        parts = [v for k, v in extra.items() if k not in ("advantage",) and type(v) in (int, float)]
        reward = float(sum(parts)) if parts else None
    if kind == SKYRL and isinstance(record.get("score"), list):  # per-token rewards
        numbers = [v for v in record["score"] if type(v) in (int, float)]
        reward = float(sum(numbers)) if numbers else None
    call.claims.update(fidelity=grade, format=kind, signals={"reward": reward, "extra": extra})
    if step is not None:
        call.claims["step"] = step
    return [call]
