"""OpenEnv 0.10's files besides the rollout document (rollout_document.py) and the flat entry
(trace_entry.py): what its capture server, trainer contract and Harbor integration write.

- ``GET /sessions/{id}/trace_entries``: ``{"session_id", "entries": [TraceEntry, ...]}``;
- ``TrainingTrace.model_dump()``: ``{"schema_version": 1, "turns": [TrainingTurn, ...]}`` (each
  turn a trace entry with its ``node_id`` at the top);
- Harbor's ``export_training_contract``: ``{"schema_version", "session_id", "reward", ...,
  "trace_entries": [...], "turns": [...]}`` (every turn with its tokens, mask, ``discarded`` and
  ``trainable``; the selected ones' messages in ``trace_entries``);
- ``HarborRolloutResult`` (``openenv harbor rollout --out FILE`` writes a list of them; a JSON
  array's items are records): ``turns`` of ``HarborTurn`` (tokens, mask, ``text`` and flat
  ``tool_calls``, ``request_messages``, ``request_tools``), the verifier's ``reward``;
- a Harbor UI run record (``~/.cache/openenv/harbor/runs/<id>.json``): ``{"id", "status", ...,
  "result": HarborRolloutResult | null}``.

:func:`kind_of` detects each by its keys; :func:`parse` gives one rollout per record, named by
its ``session_id``, each call by OpenEnv's node id, the reward (when the file has one) on every
call as a signal. Entry point for ``formats/registry.py``; docs/formats.md, "OpenEnv files".
"""

from __future__ import annotations

import math
from typing import Any

from rollout_graph.core.records import Call
from rollout_graph.ingest.formats import trace_entry
from rollout_graph.ingest.formats.fidelity import MESSAGES, TEXT, TOKENS_LOGPROBS
from rollout_graph.ingest.formats.fields import RecordError, as_dict, new_call, params_of, record_problems
from rollout_graph.ingest.tokens import Problems

ENTRIES = "OpenEnv trace entries"
TRAINING_TRACE = "OpenEnv training trace"
CONTRACT = "OpenEnv Harbor contract"
RESULT = "OpenEnv Harbor result"
RUN = "OpenEnv Harbor run record"
_ENTRY_KEYS = ("prompt_token_ids", "completion_token_ids")


def _turns_like(value: Any, *keys: str) -> bool:
    return isinstance(value, list) and all(isinstance(t, dict) and all(k in t for k in keys) for t in value)


def kind_of(record: dict) -> str | None:
    """Which OpenEnv file a record is, or None."""
    turns = record.get("turns")
    if "entries" in record and "session_id" in record and _turns_like(record["entries"], *_ENTRY_KEYS):
        return ENTRIES
    if "trace_entries" in record and "schema_version" in record and _turns_like(turns, "node_id", *_ENTRY_KEYS):
        return CONTRACT
    if "conversations" in record and "rollout_type" in record and _turns_like(turns, "turn", *_ENTRY_KEYS):
        return RESULT
    if set(record) == {"schema_version", "turns"} and _turns_like(turns, "node_id", *_ENTRY_KEYS):
        return TRAINING_TRACE
    if "result" in record and "status" in record and "id" in record and "harness" in record:
        return RUN
    return None


def parse(record: dict, kind: str, source: str, line: int, default_session: str) -> list[Call]:
    """The calls of one OpenEnv file (module docstring)."""
    if kind == RUN:
        result = record.get("result")
        if not isinstance(result, dict):
            status, error = record.get("status"), record.get("error")
            raise RecordError(
                f"{RUN} with no result (status {status!r}{f': {error}' if error else ''}); nothing to show"
            )
        if kind_of(result) != RESULT:
            raise RecordError(f"{RUN}: its result is not a HarborRolloutResult")
        calls = _result(result, source, line, default_session)
        for call in calls:
            call.claims["format"] = RUN
            call.claims.setdefault("signals", {})["extra"] = {
                k: record[k] for k in ("id", "status", "purpose", "dataset") if isinstance(record.get(k), str)
            }
        return calls
    if kind == ENTRIES:
        session = _session(record, default_session)
        return [_entry(e, source, line, session, ENTRIES) for e in record["entries"]]
    if kind == TRAINING_TRACE:
        return [
            _entry(t, source, line, _session(as_dict(t.get("metadata")), default_session), TRAINING_TRACE)
            for t in record["turns"]
        ]
    if kind == CONTRACT:
        return _contract(record, source, line, default_session)
    return _result(record, source, line, default_session)


def _session(record: dict, default: str) -> str:
    sid = record.get("session_id")
    return sid if isinstance(sid, str) and sid else default


def _entry(entry: dict, source: str, line: int, session: str, fmt: str) -> Call:
    call = new_call({**entry, "session_id": session}, source, line, fmt, session)
    problems = Problems()
    (call,) = trace_entry.parse(entry, call, problems)
    call.shape = fmt
    call.claims["format"] = fmt
    record_problems(call, problems)
    return call


def _grade(record: dict) -> str | None:
    level = record.get("capture_level")
    if level == "tokens":
        return TOKENS_LOGPROBS
    return None if level is None else MESSAGES


def _reward(record: dict) -> dict[str, Any]:
    reward = record.get("reward")
    value = float(reward) if isinstance(reward, int | float) and not isinstance(reward, bool) else None
    extra = {k: record[k] for k in ("task_name", "dataset", "harness", "trial_name") if isinstance(record.get(k), str)}
    return {"reward": value if value is not None and math.isfinite(value) else None, "extra": extra}


def _contract(record: dict, source: str, line: int, default_session: str) -> list[Call]:
    """Harbor's training contract: every turn (its tokens and mask), with the selected turns'
    request and response from ``trace_entries`` (matched by node id)."""
    session = _session(record, default_session)
    selected = {
        as_dict(e.get("metadata")).get("node_id"): e for e in record.get("trace_entries") or [] if isinstance(e, dict)
    }
    calls = []
    for turn in record["turns"]:
        entry = selected.get(turn.get("node_id"), {})
        merged = {
            **turn,
            "request": entry.get("request"),
            "response": entry.get("response"),
            "metadata": {**as_dict(entry.get("metadata")), **_turn_meta(turn)},
        }
        call = _entry(merged, source, line, session, CONTRACT)
        _turn_claims(turn, call)
        calls.append(call)
    return _finish(calls, record)


def _result(record: dict, source: str, line: int, default_session: str) -> list[Call]:
    """A HarborRolloutResult: its turns, each with the assistant message OpenEnv kept (``text``
    and flat ``tool_calls``, nested back into the OpenAI shape) and what the harness asked."""
    session = _session(record, default_session)
    calls = []
    for turn in record["turns"]:
        calls_made = [
            {
                "id": f"call_{k}",
                "type": "function",
                "function": {"name": c.get("name"), "arguments": c.get("arguments", "")},
            }
            for k, c in enumerate(turn.get("tool_calls") or [])
            if isinstance(c, dict) and c.get("name")
        ]
        message = {"role": "assistant", "content": turn.get("text") or ""}
        if calls_made:
            message["tool_calls"] = calls_made
        merged = {
            **turn,
            "request": {"messages": turn.get("request_messages"), "tools": turn.get("request_tools")},
            "response": {"choices": [{"message": message, "finish_reason": turn.get("finish_reason")}]},
            "metadata": _turn_meta(turn),
        }
        call = _entry(merged, source, line, session, RESULT)
        _turn_claims(turn, call)
        calls.append(call)
    return _finish(calls, record)


def _turn_meta(turn: dict) -> dict[str, Any]:
    meta = {k: turn[k] for k in ("node_id", "n_tools", "sampling_params", "requested_sampling_params") if k in turn}
    if not meta.get("node_id") and isinstance(turn.get("turn"), int):
        meta["node_id"] = f"turn{turn['turn']}"
    return meta


def _turn_claims(turn: dict, call: Call) -> None:
    for key in ("discarded", "trainable", "role", "turn"):
        if key in turn:
            call.claims[key] = turn[key]
    problems = Problems()
    if "requested_sampling_params" in turn:
        call.requested_params = params_of(turn["requested_sampling_params"], "requested_sampling_params", problems)
    if "sampling_params" in turn:
        call.submitted_params = params_of(turn["sampling_params"], "sampling_params", problems)
    record_problems(call, problems)


def _finish(calls: list[Call], record: dict) -> list[Call]:
    grade = _grade(record)
    signals = _reward(record)
    for call in calls:
        if call.prompt_ids is not None and len(call.prompt_ids) == 0:  # an eval result: no ids, by construction
            call.prompt_ids = None
            if call.n_sampled == 0:
                call.sampled_logprobs = None
        if grade is not None:
            call.claims["fidelity"] = grade if call.prompt_ids is not None or grade != TOKENS_LOGPROBS else TEXT
        call.claims["signals"] = {"reward": signals["reward"], "extra": signals["extra"]}
    return calls
