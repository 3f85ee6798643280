"""The record readers, in the order they are tried, and :func:`parse_value`: one JSON value ->
its calls, or a :class:`RecordError` saying why not; the value's notes (values/line.py: an id its
``metadata`` names twice) become a WARN ``malformed_field`` on each call.

Each reader is a :class:`Format`: ``detect(record, source)`` says whether it takes the record,
``parse(record, source, line, default_session)`` converts it (docs/formats.md: a minimal example
of each shape). A new reader is one entry in :data:`FORMATS`, where its detect says it is tried
(before the shapes it could be mistaken for). Called by the loaders (``load/``); imports the
reader modules and ``values``' :class:`~rollout_graph.ingest.files.json_values.RawValue` only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from rollout_graph.core.records import WARN, Call
from rollout_graph.ingest.files.json_values import RawValue
from rollout_graph.ingest.formats import (
    engine_pair,
    nemo_gym,
    openenv_files,
    otel,
    rllm_gateway,
    rollout_document,
    text_dumps,
    token_rows,
    trace_entry,
    verifiers_trace,
)
from rollout_graph.ingest.formats.fidelity import stamp_step
from rollout_graph.ingest.formats.fields import RecordError, describe_keys, new_call, record_problems
from rollout_graph.ingest.tokens import Problems


@dataclass(slots=True)
class Parsed:
    """The calls one JSON value became, plus document metadata and per-turn skips."""

    calls: list[Call] = field(default_factory=list)
    document: dict | None = None
    skipped: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Format:
    """One record reader: whether it takes a record, and what the record becomes."""

    name: str
    detect: Callable[[dict, str], bool]  # (record, source name)
    parse: Callable[[dict, str, int, str], Parsed]  # (record, source name, line, default session)


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


def _call_reader(reader: Callable[[dict, Call, Problems], list[Call]]) -> Callable[[dict, str, int, str], Parsed]:
    """A reader that fills a template call (engine pairs, trace entries) as a Format's parse."""

    def parse(record: dict, source: str, line: int, default_session: str) -> Parsed:
        call = new_call(record, source, line, "unknown", default_session)
        problems = Problems()
        calls = reader(record, call, problems)
        for c in calls:
            record_problems(c, problems)
        stamp_step(calls, record, source)
        return Parsed(calls)

    return parse


def _framework(reader: Callable[[dict, str, int, str], list[Call]]) -> Callable[[dict, str, int, str], Parsed]:
    """What an RL framework writes (docs/formats.md, "RL frameworks"), its step stamped."""

    def parse(record: dict, source: str, line: int, default_session: str) -> Parsed:
        calls = reader(record, source, line, default_session)
        stamp_step(calls, record, source)
        return Parsed(calls)

    return parse


def _document(record: dict, source: str, line: int, default_session: str) -> Parsed:
    doc = rollout_document.parse(record, source, line, default_session)
    return Parsed(doc.calls, doc.meta, doc.skipped)


def _openenv(record: dict, source: str, line: int, default_session: str) -> list[Call]:
    kind = openenv_files.kind_of(record)
    assert kind is not None  # detected
    return openenv_files.parse(record, kind, source, line, default_session)


def _otlp(record: dict, source: str, line: int, default_session: str) -> list[Call]:
    calls = otel.parse(record, source, line, default_session)
    if not calls:
        raise RecordError("OTLP export with no GenAI model-call span (gen_ai.operation.name chat/...)")
    return calls


def _text_dump(record: dict, source: str, line: int, default_session: str) -> list[Call]:
    kind = text_dumps.kind_of(record)
    assert kind is not None  # detected
    return text_dumps.parse(record, kind, source, line, default_session)


def _skyrl_metrics(record: dict, source: str, line: int, default_session: str) -> Parsed:
    raise RecordError(text_dumps.SKYRL_METRICS)


_ENGINE_PAIR = _call_reader(engine_pair.parse)
FORMATS: tuple[Format, ...] = (
    Format("engine pair", lambda record, source: plain_engine_pair(record), _ENGINE_PAIR),
    Format("rollout document", lambda record, source: rollout_document.is_rollout_document(record), _document),
    Format("OpenEnv file", lambda record, source: openenv_files.kind_of(record) is not None, _framework(_openenv)),
    Format("verifiers", lambda record, source: verifiers_trace.is_verifiers(record), _framework(verifiers_trace.parse)),
    Format("OTLP", lambda record, source: otel.is_otlp(record), _framework(_otlp)),
    Format(
        "prime-rl",
        lambda record, source: token_rows.is_prime_rl(record),
        _framework(lambda record, source, line, default_session: token_rows.parse_prime_rl(record, source, line)),
    ),
    Format("NeMo-RL", lambda record, source: token_rows.is_nemo_rl(record), _framework(token_rows.parse_nemo_rl)),
    Format(
        "NeMo-RL validation",
        lambda record, source: token_rows.is_nemo_rl_messages(record),
        _framework(token_rows.parse_nemo_rl_messages),
    ),
    # the capture layers of NeMo Gym and the rLLM gateway (docs/formats.md): before the trace-entry
    # shape, which their token keys would otherwise match
    Format(
        "NeMo Gym token entry",
        lambda record, source: nemo_gym.is_token_entry(record),
        _framework(nemo_gym.parse_token_entry),
    ),
    Format(
        "NeMo Gym rollout record",
        lambda record, source: nemo_gym.is_rollout_record(record),
        _framework(nemo_gym.parse_rollout_record),
    ),
    Format("rLLM gateway", lambda record, source: rllm_gateway.is_trace_record(record), _framework(rllm_gateway.parse)),
    Format("trace entry", lambda record, source: trace_entry.is_trace_entry(record), _call_reader(trace_entry.parse)),
    Format(
        "engine pair with more keys",
        lambda record, source: engine_pair.is_engine_pair(record),
        _call_reader(engine_pair.parse),
    ),
    Format("text dump", lambda record, source: text_dumps.kind_of(record) is not None, _framework(_text_dump)),
    Format("SkyRL metrics", text_dumps.is_skyrl_metrics, _skyrl_metrics),
)


def parse_value(raw: RawValue, source: str, default_session: str) -> Parsed:
    """Detect the shape of one JSON value and convert it. Raises RecordError when it cannot."""
    record = raw.value
    if not isinstance(record, dict):
        raise RecordError(f"a JSON {type(record).__name__}, not an object")
    if plain_engine_pair(record):  # FORMATS' first, nearly every record of a capture: no loop for it
        parsed = _ENGINE_PAIR(record, source, raw.line, default_session)
    else:
        parsed = _detected(record, source, raw.line, default_session)
    for note in raw.notes:  # the line's own problems (values/line.py), on each call it became
        for call in parsed.calls:
            call.add_issue(WARN, "malformed_field", note)
    return parsed


def _detected(record: dict, source: str, line: int, default_session: str) -> Parsed:
    for reader in FORMATS:
        if reader.detect(record, source):
            return reader.parse(record, source, line, default_session)
    raise RecordError(f"unknown record shape (keys: {describe_keys(record)})")


__all__ = ["FORMATS", "Format", "Parsed", "RecordError", "parse_value"]
