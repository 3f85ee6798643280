"""NeMo Gym's capture records: the training-token ``TokenEntry`` records and the rollout records
that carry ``ng_model_call_capture`` (docs/formats.md, "NeMo Gym"; docs/reconcile.md).

- A **TokenEntry** (one line of ``<rollout_id>.tokens.jsonl``, written by
  ``nemo_gym/token_id_capture/store.py`` ``TokenCaptureStore.append``): ``rollout_id`` (the
  session), ``model_call_id`` (the node id), ``prompt_token_ids``, ``generation_token_ids``,
  ``generation_log_probs``, ``output_items`` (the reply, the token-bearing one at
  ``token_item_index``), ``created_at`` (when it was captured: the call's end).
- A **rollout record** with ``ng_model_call_capture`` (``merge_model_call_capture_into_record``):
  ``{rollout_id, metrics, calls}``, each call a ``ModelCallRecord`` (``model_call_id``,
  ``call_index``, ``started_at``, ``completed_at``, ``finish_reason``, and with
  ``include_payloads`` its chat ``request`` and ``response``, read as an engine pair; the token
  bundle ``prompt_token_ids`` / ``generation_token_ids`` / ``generation_log_probs`` Gym's model
  server puts on the message, when there, gives the ids and logprobs). Without payloads a call has
  nothing to show and is skipped with the reason.

Entry points: :func:`is_token_entry`, :func:`parse_token_entry`, :func:`is_rollout_record`,
:func:`parse_rollout_record`; the format registry tries them before the trace-entry shape.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rollout_graph.core.records import Call
from rollout_graph.ingest.formats import engine_pair
from rollout_graph.ingest.formats.fields import RecordError, as_dict, record_problems
from rollout_graph.ingest.tokens import Problems, logprobs, token_ids

FORMAT = "nemo-gym"
TOKEN_ENTRY = "nemo-gym-token-entry"
CALL_CAPTURE = "nemo-gym-model-call-capture"
NEWEST_SCHEMA = 1  # records.py TOKEN_ENTRY_RECORD_SCHEMA_VERSION


def is_token_entry(record: dict) -> bool:
    """A ``TokenEntry``: its rollout and model call ids and its generation ids."""
    return "rollout_id" in record and "model_call_id" in record and "generation_token_ids" in record


def is_rollout_record(record: dict) -> bool:
    """A NeMo Gym rollout record with the model-call capture attached."""
    return isinstance(record.get("ng_model_call_capture"), dict)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _reply(items: Any, index: Any) -> dict[str, Any] | None:
    """The assistant message among a TokenEntry's output items (the token-bearing one first)."""
    if not isinstance(items, list) or not items:
        return None
    chosen = (
        items[index]
        if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(items)
        else items[-1]
    )
    if not isinstance(chosen, dict):
        return None
    message = {k: v for k, v in chosen.items() if k not in ("type", "id", "status")}
    if chosen.get("type") == "message" and isinstance(chosen.get("content"), list):  # Responses API output text
        message["content"] = "".join(
            str(p.get("text", "")) for p in chosen["content"] if isinstance(p, dict) and "text" in p
        )
    message.setdefault("role", "assistant")
    return message


def _tokens(call: Call, bundle: dict, problems: Problems) -> None:
    prompt = bundle.get("prompt_token_ids")
    if prompt is not None:
        call.prompt_ids = token_ids(prompt, "prompt_token_ids", problems)
    sampled = token_ids(bundle.get("generation_token_ids"), "generation_token_ids", problems)
    if sampled is not None:
        call.sampled_ids = sampled
    lps = bundle.get("generation_log_probs")
    if isinstance(lps, np.ndarray):  # a fast path may have read the list already
        lps = lps.tolist()
    if isinstance(lps, list):
        call.sampled_logprobs = logprobs(lps, "generation_log_probs", problems)
    elif lps is not None:
        problems.malformed.append(f"generation_log_probs is a {type(lps).__name__}, not a list")


def _problems_to_issues(call: Call, problems: Problems) -> None:
    record_problems(call, problems)


def parse_token_entry(record: dict, source: str, line: int, default_session: str) -> list[Call]:
    """One ``TokenEntry`` -> one call (tokens and logprobs; the reply from its output items).

    Raises:
        RecordError: a record of a newer schema than this reader knows (as NeMo Gym's own reader
            refuses it), or without a model call id.
    """
    version = record.get("schema_version", 1)
    if type(version) is not int or version > NEWEST_SCHEMA:
        raise RecordError(f"NeMo Gym TokenEntry schema_version {version!r}: this reader knows up to {NEWEST_SCHEMA}")
    node = _text(record.get("model_call_id"))
    if not node:
        raise RecordError("NeMo Gym TokenEntry without a model_call_id")
    call = Call(
        node_id=node,
        session_id=_text(record.get("rollout_id")) or default_session,
        source=source,
        line=line,
        shape=TOKEN_ENTRY,
    )
    problems = Problems()
    _tokens(call, record, problems)
    call.response_message = _reply(record.get("output_items"), record.get("token_item_index"))
    model = record.get("model")
    call.model = model if isinstance(model, str) and model else None
    created = record.get("created_at")
    if isinstance(created, int | float) and not isinstance(created, bool) and created > 0:
        call.timing["ended_at"] = float(created)
    call.claims["format"] = FORMAT
    _problems_to_issues(call, problems)
    return [call]


def parse_rollout_record(record: dict, source: str, line: int, default_session: str) -> list[Call]:
    """A rollout record's ``ng_model_call_capture`` -> its calls, in ``call_index`` order.

    Each call's payloads are read as the engine pair they are (the chat request and the response
    the model server returned: rollout_graph.ingest.formats.engine_pair); the token bundle Gym puts
    on the message, when there, is its ids and logprobs.

    Raises:
        RecordError: the capture holds no call with a request or response payload (written without
            ``include_payloads``: counts and timings only, nothing to show).
    """
    capture = as_dict(record.get("ng_model_call_capture"))
    session = _text(capture.get("rollout_id")) or _text(record.get("_ng_rollout_id")) or default_session
    raw_calls = capture.get("calls")
    entries = [c for c in raw_calls if isinstance(c, dict)] if isinstance(raw_calls, list) else []
    entries.sort(key=lambda c: c["call_index"] if type(c.get("call_index")) is int else 0)
    calls: list[Call] = []
    for position, entry in enumerate(entries):
        request, response = as_dict(entry.get("request")), as_dict(entry.get("response"))
        if not request and not response:
            continue
        node = _text(entry.get("model_call_id")) or f"call-{position}"
        template = Call(node_id=node, session_id=session, source=source, line=line, shape=CALL_CAPTURE)
        problems = Problems()
        try:
            read = engine_pair.parse({"request": request, "response": response}, template, problems)
        except RecordError:
            read = [template]
        for call in read:
            call.shape = CALL_CAPTURE
            message = as_dict(call.response_message)
            if any(key in message for key in _BUNDLE):
                _tokens(call, message, problems)
                call.response_message = {k: v for k, v in message.items() if k not in _BUNDLE}
            finish = entry.get("finish_reason")
            if isinstance(finish, str):
                call.finish_reason = finish
            for key, name in (("started_at", "started_at"), ("completed_at", "ended_at")):
                value = entry.get(key)
                if isinstance(value, int | float) and not isinstance(value, bool):
                    call.timing[name] = float(value)
            call.claims["format"] = FORMAT
            _problems_to_issues(call, problems)
        calls.extend(read)
    if not calls:
        raise RecordError(
            "NeMo Gym ng_model_call_capture without request or response payloads (merged without include_payloads): "
            "no messages or token ids to show"
        )
    return calls


_BUNDLE = frozenset({"prompt_token_ids", "generation_token_ids", "generation_log_probs", "routed_experts"})
