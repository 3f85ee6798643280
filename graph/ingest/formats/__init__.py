"""Record shapes, detected per record: see docs/formats.md for a minimal example of each."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from rollout_graph.core.records import Call
from rollout_graph.ingest.formats import (
    engine_pair,
    openenv_files,
    otel,
    rollout_document,
    text_dumps,
    token_rows,
    trace_entry,
    verifiers_trace,
)
from rollout_graph.ingest.formats.fidelity import stamp_step
from rollout_graph.ingest.formats.fields import RecordError, describe_keys, new_call, record_problems
from rollout_graph.ingest.reading import RawValue
from rollout_graph.ingest.tokens import Problems


@dataclass(slots=True)
class Parsed:
    """The calls one JSON value became, plus document metadata and per-turn skips."""

    calls: list[Call] = field(default_factory=list)
    document: dict | None = None
    skipped: list[str] = field(default_factory=list)


# Every top-level key the shape tests made before the engine pair's look for (rollout documents,
# verifiers traces, OTLP exports, prime-rl and NeMo-RL rows, trace entries): a record with
# "request" and "response" and none of these is an engine pair, whatever else it holds.
_NOT_ENGINE_PAIR_KEYS = frozenset(
    {"turns", "sequences", "nodes", "traces", "resourceSpans", "resource_spans", "token_ids", "loss_mask"}
    | {"token_loss_mask", "generation_logprobs", "input_lengths", *trace_entry.TOKEN_KEYS}
)


def plain_engine_pair(record: dict) -> bool:
    """An engine pair no earlier shape test claims: its shape is known from its keys alone, in one
    pass over them, instead of the tests one by one (tests/ingest/test_engine_pair_fast.py)."""
    return "request" in record and "response" in record and _NOT_ENGINE_PAIR_KEYS.isdisjoint(record)


def parse_value(raw: RawValue, source: str, default_session: str) -> Parsed:
    """Detect the shape of one JSON value and convert it. Raises RecordError when it cannot."""
    record = raw.value
    if not isinstance(record, dict):
        raise RecordError(f"a JSON {type(record).__name__}, not an object")
    if plain_engine_pair(record):
        return _parsed(engine_pair.parse, record, source, raw.line, default_session)
    if rollout_document.is_rollout_document(record):
        doc = rollout_document.parse(record, source, raw.line, default_session)
        return Parsed(doc.calls, doc.meta, doc.skipped)
    framework = _framework(record, source, raw.line, default_session)
    if framework is not None:
        stamp_step(framework, record, source)
        return Parsed(framework)
    parser: Callable[[dict, Call, Problems], list[Call]]
    if trace_entry.is_trace_entry(record):
        parser = trace_entry.parse
    elif engine_pair.is_engine_pair(record):
        parser = engine_pair.parse
    else:
        raise RecordError(f"unknown record shape (keys: {describe_keys(record)})")
    return _parsed(parser, record, source, raw.line, default_session)


def _parsed(
    parser: Callable[[dict, Call, Problems], list[Call]], record: dict, source: str, line: int, default_session: str
) -> Parsed:
    call = new_call(record, source, line, "unknown", default_session)
    problems = Problems()
    calls = parser(record, call, problems)
    for c in calls:
        record_problems(c, problems)
    stamp_step(calls, record, source)
    return Parsed(calls)


def _framework(record: dict, source: str, line: int, default_session: str) -> list[Call] | None:
    """What RL frameworks write (docs/formats.md, "RL frameworks"), or None for another shape."""
    openenv = openenv_files.kind_of(record)
    if openenv is not None:
        return openenv_files.parse(record, openenv, source, line, default_session)
    if verifiers_trace.is_verifiers(record):
        return verifiers_trace.parse(record, source, line, default_session)
    if otel.is_otlp(record):
        calls = otel.parse(record, source, line, default_session)
        if not calls:
            raise RecordError("OTLP export with no GenAI model-call span (gen_ai.operation.name chat/...)")
        return calls
    if token_rows.is_prime_rl(record):
        return token_rows.parse_prime_rl(record, source, line)
    if token_rows.is_nemo_rl(record):
        return token_rows.parse_nemo_rl(record, source, line, default_session)
    if token_rows.is_nemo_rl_messages(record):
        return token_rows.parse_nemo_rl_messages(record, source, line, default_session)
    if trace_entry.is_trace_entry(record) or engine_pair.is_engine_pair(record):
        return None
    kind = text_dumps.kind_of(record)
    if kind is not None:
        return text_dumps.parse(record, kind, source, line, default_session)
    if text_dumps.is_skyrl_metrics(record, source):
        raise RecordError(text_dumps.SKYRL_METRICS)
    return None


__all__ = ["Parsed", "RecordError", "parse_value"]
