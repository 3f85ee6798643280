"""Already-flattened training rows: prime-rl's token export and NeMo-RL's ``train_data_step{N}.jsonl``.

Where it sits: format readers (bytes -> records), registered in rollout_graph.ingest.formats.registry.
The trainer's columns ride on each call as ``claims["signals"]`` and join as training signals
(rollout_graph.signals.embedded).

A row is one training sample with a loss mask; the calls that produced it are gone, so each run of
loss-mask-1 tokens becomes one call (prompt: every token before it). The row's tokens, mask and
logprobs come back exactly (grade ``sequences``); the DAG across rows cannot be rebuilt.

Entry points: :func:`is_prime_rl` / :func:`parse_prime_rl`; :func:`is_nemo_rl` / :func:`parse_nemo_rl`
(:func:`unbatch` takes the one sample of NeMo-RL's batch of one); :func:`is_nemo_rl_messages` /
:func:`parse_nemo_rl_messages` (``val_data_step{N}.jsonl``: one message-level call); :func:`row_calls`
(the cut both share). Each writer, its files and fields: docs/formats.md, "RL frameworks".
"""

from __future__ import annotations

import math
from pathlib import PurePath
from typing import Any

import numpy as np

from rollout_graph.core.records import WARN, Call
from rollout_graph.ingest.formats.fidelity import MESSAGES, SEQUENCES, TEXT, float_array, listed, mask_runs, step_of
from rollout_graph.ingest.formats.fields import RecordError, new_call, record_problems
from rollout_graph.ingest.tokens import Problems, token_ids

PRIME_RL = "prime-rl token export"
NEMO_RL = "NeMo-RL train data"
NEMO_RL_VAL = "NeMo-RL validation data"

# prime-rl's per-token columns kept beside ours (docs/formats.md): theirs, checked against our figures.
PRIME_EXTRA = ("mismatch_kl", "is_masked", "is_masked_high", "is_masked_low", "importance_ratio", "entropy")


def is_prime_rl(record: dict) -> bool:
    """A prime-rl token export line: ``token_ids`` and ``loss_mask`` with its schema or logprob columns."""
    return (
        "token_ids" in record
        and "loss_mask" in record
        and ("schema_version" in record or "inference_logprobs" in record)
    )


def is_nemo_rl(record: dict) -> bool:
    """A NeMo-RL train/val data line: ``token_loss_mask``, or generation logprobs with input lengths."""
    return "token_loss_mask" in record or ("generation_logprobs" in record and "input_lengths" in record)


NEMO_VAL_KEYS = frozenset({"content", "rewards", "idx", "agent_ref", "filtered_rewards"})


def is_nemo_rl_messages(record: dict) -> bool:
    """A NeMo-RL validation line (``val_data_step{N}.jsonl``): ``content`` (message logs) and
    ``rewards`` with the logger's ``idx``, nothing else."""
    return {"content", "rewards", "idx"} <= record.keys() and NEMO_VAL_KEYS.issuperset(record)


def unbatch(record: dict) -> dict:
    """One sample of NeMo-RL's logger (``make_microbatch_iterator(1)``): when every value but
    ``idx`` is a list of exactly one item, each is that item; any other line is as it is."""
    values = [v for k, v in record.items() if k != "idx"]
    if values and all(isinstance(v, list) and len(v) == 1 for v in values):
        return {k: (v if k == "idx" else v[0]) for k, v in record.items()}
    return record


def _first_finite(values: np.ndarray | None, mask: np.ndarray) -> float | None:
    if values is None:
        return None
    picked = values[mask & np.isfinite(values)]
    return float(picked[0]) if picked.size else None


def _bool_mask(values: Any, length: int, what: str) -> np.ndarray:
    if isinstance(values, np.ndarray):
        values = values.tolist()
    if not isinstance(values, list) or len(values) < length:
        raise RecordError(f"{what} is not a list of {length} values (one per token)")
    out = np.zeros(length, dtype=bool)
    for i, v in enumerate(values[:length]):
        if type(v) in (bool, int, float):
            out[i] = bool(v)
        elif v is not None:
            raise RecordError(f"{what}[{i}] is a {type(v).__name__}, not a number or bool")
    return out


def row_calls(
    record: dict,
    ids: np.ndarray,
    mask: np.ndarray,
    inference: np.ndarray | None,
    columns: dict[str, np.ndarray | None],
    reward: float | None,
    *,
    session: str,
    source: str,
    line: int,
    fmt: str,
    extra: dict[str, Any],
) -> list[Call]:
    """One call per loss-mask run of a flattened row, each carrying its span of the trainer's columns."""
    runs = mask_runs(mask)
    if not runs:
        raise RecordError(f"{fmt}: this row has no loss-mask-1 token (nothing was trained); skipped")
    step = step_of(record)
    calls = []
    for k, (start, end) in enumerate(runs):
        call = new_call({"session_id": session, "node_id": f"c{k}"}, source, line, fmt, session)
        call.prompt_ids = ids[:start].copy()
        call.sampled_ids = ids[start:end].copy()
        problems = Problems()
        if inference is not None:
            span = inference[start:end]
            if np.isfinite(span).all():
                if (span > 0).any():
                    problems.positive_logprobs.append(f"inference logprob > 0 in tokens {start}..{end - 1}")
                call.sampled_logprobs = span.astype(np.float64)
            else:
                problems.malformed.append(f"inference logprobs missing (null) in tokens {start}..{end - 1}")
        signals: dict[str, Any] = {"reward": reward, "row_start": start}
        for name, values in columns.items():
            if values is not None:
                signals[name] = listed(values[start:end])
        if k == 0:
            signals["extra"] = extra
        call.claims.update(fidelity=SEQUENCES, format=fmt, signals=signals, row_tokens=int(ids.shape[0]))
        if step is not None:
            call.claims["step"] = step
        record_problems(call, problems)
        calls.append(call)
    return calls


def parse_prime_rl(record: dict, source: str, line: int) -> list[Call]:
    """A prime-rl token export line -> the calls of its row (module docstring)."""
    problems = Problems()
    ids = token_ids(record.get("token_ids"), "token_ids", problems)
    if ids is None or problems.invalid_ids:
        raise RecordError(f"{PRIME_RL}: token_ids " + ("; ".join(problems.invalid_ids) or "missing or not a list"))
    n = int(ids.shape[0])
    mask = _bool_mask(record.get("loss_mask"), n, "loss_mask")
    inference = float_array(record.get("inference_logprobs"), n)
    columns: dict[str, np.ndarray | None] = {
        "trainer_logprobs": float_array(record.get("trainer_logprobs"), n),
        "advantages": float_array(record.get("advantages"), n),
    }
    for name in PRIME_EXTRA:
        columns[name] = float_array(record.get(name), n)
    reward = _first_finite(float_array(record.get("rewards"), n), mask)
    step = step_of(record)
    rank = record.get("rank")
    idx = record.get("export_sequence_idx", record.get("micro_sequence_idx", line))
    run = record.get("run_id")
    prefix = f"{run}/" if isinstance(run, str) and run else ""
    session = f"{prefix}step_{step if step is not None else '?'}/rank_{rank}/seq_{idx}"
    extra = {
        k: record[k]
        for k in ("env_name", "rank", "micro_step", "micro_sequence_idx", "export_sequence_idx", "schema_version")
        if isinstance(record.get(k), (str, int, float, bool))
    }
    return row_calls(
        record, ids, mask, inference, columns, reward, session=session, source=source, line=line, fmt=PRIME_RL,
        extra=extra,
    )  # fmt: skip


def _nemo_text(record: dict) -> str | None:
    content = record.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(c, str) for c in content):
        return "\n".join(content)
    return None


def _nemo_notes(record: dict, n: int) -> list[str]:
    """What a NeMo-RL row holds of the wrong type or size (each a WARN ``malformed_field`` on its calls)."""
    notes = []
    length = record.get("input_lengths")
    if length is not None and not (type(length) is int and 0 < length <= n):
        notes.append(f"input_lengths {_shown(length)} is not a length in 1..{n}; the whole row is read")
    value = record.get("rewards", record.get("reward"))
    if value is not None and not (isinstance(value, int | float) and not isinstance(value, bool)):
        notes.append(f"rewards {_shown(value)} is not a number; the row has no reward")
    cut = length if type(length) is int and 0 < length <= n else n
    for key in ("generation_logprobs", "prev_logprobs", "advantages"):
        if record.get(key) is not None and float_array(record.get(key), cut) is None:
            notes.append(f"{key} is not a list of {cut} numbers (one per token); not used")
    return notes


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:30] + f"… ({len(text):,} characters)"


def _nemo_session(record: dict, source: str, line: int, default_session: str) -> str:
    folder = PurePath(source).parent.name  # experiments (exp_001, exp_002) log the same file names
    idx = record.get("idx")
    sample = idx if isinstance(idx, str | int) and not isinstance(idx, bool) else line  # never a Python repr
    return f"{folder + '/' if folder else ''}{default_session}/sample_{sample}"


def parse_nemo_rl_messages(record: dict, source: str, line: int, default_session: str) -> list[Call]:
    """A NeMo-RL validation line -> one message-level call: the message log's last assistant
    message is the response, the messages before it the request; ``rewards`` its reward."""
    record = unbatch(record)
    session = _nemo_session(record, source, line, default_session)
    log = record.get("content")
    if not (isinstance(log, list) and log and all(isinstance(m, dict) for m in log)):
        raise RecordError(f"{NEMO_RL}: content is not a message log (a list of role/content objects)")
    call = new_call({"session_id": session, "node_id": "c0"}, source, line, NEMO_RL_VAL, session)
    last = max((k for k, m in enumerate(log) if m.get("role") == "assistant"), default=None)
    call.request_messages = [dict(m) for m in (log if last is None else log[:last])]
    call.response_message = None if last is None else dict(log[last])
    value = record.get("rewards")
    reward = float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
    if reward is not None and not math.isfinite(reward):
        reward = None
    call.claims.update(fidelity=MESSAGES, format=NEMO_RL_VAL, signals={"reward": reward})
    return [call]


def parse_nemo_rl(record: dict, source: str, line: int, default_session: str) -> list[Call]:
    """A NeMo-RL train/val data line -> the calls of its row; without ``token_ids``, one text call.
    A field of the wrong type or size is a WARN ``malformed_field`` on each call (docs/formats.md)."""
    record = unbatch(record)
    folder = PurePath(source).parent.name  # experiments (exp_001, exp_002) log the same file names
    idx = record.get("idx")
    sample = idx if isinstance(idx, str | int) and not isinstance(idx, bool) else line  # never a Python repr
    session = f"{folder + '/' if folder else ''}{default_session}/sample_{sample}"
    value = record.get("rewards", record.get("reward"))
    reward = None
    if isinstance(value, int | float) and not isinstance(value, bool) and abs(value) < 2**1023:
        reward = float(value)
    if reward is not None and not math.isfinite(reward):
        reward = None
    raw_ids = record.get("token_ids", record.get("input_ids"))
    if raw_ids is None:
        text = _nemo_text(record)
        if text is None:
            raise RecordError(f"{NEMO_RL}: neither token_ids nor content; nothing to show")
        call = new_call({"session_id": session, "node_id": "c0"}, source, line, NEMO_RL, session)
        call.response_message = {"role": "assistant", "content": text}
        call.claims.update(fidelity=TEXT, format=NEMO_RL, signals={"reward": reward})
        return [call]
    problems = Problems()
    ids = token_ids(raw_ids, "token_ids", problems)
    if ids is None or problems.invalid_ids:
        raise RecordError(f"{NEMO_RL}: token_ids " + ("; ".join(problems.invalid_ids) or "not a list"))
    length = record.get("input_lengths")
    n = ids_all = int(ids.shape[0])
    if type(length) is int and 0 < length <= n:
        n = length
    ids = ids[:n]
    mask = _bool_mask(record.get("token_loss_mask"), n, "token_loss_mask")
    columns: dict[str, np.ndarray | None] = {
        "trainer_logprobs": float_array(record.get("prev_logprobs"), n),
        "advantages": float_array(record.get("advantages"), n),
    }
    extra = {k: record[k] for k in ("sample_loss_mask", "idx") if type(record.get(k)) in (int, float, bool, str)}
    calls = row_calls(
        record, ids, mask, float_array(record.get("generation_logprobs"), n), columns, reward,
        session=session, source=source, line=line, fmt=NEMO_RL, extra=extra,
    )  # fmt: skip
    for note in _nemo_notes(record, int(ids_all)):
        for call in calls:
            call.add_issue(WARN, "malformed_field", note)
    return calls
