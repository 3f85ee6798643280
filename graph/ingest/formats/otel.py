"""OpenTelemetry GenAI spans, as an OTLP JSON export writes them (grade ``messages``).

``{"resourceSpans": [{"resource": ..., "scopeSpans": [{"scope": ..., "spans": [...]}]}]}`` (the
collector's file exporter writes one such object a line). Each span whose ``gen_ai.operation.name``
is a model call (``chat``, ``text_completion``, ``generate_content``) becomes a call, following
the GenAI semantic conventions: ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (JSON of
``{role, parts: [{type: text|tool_call|tool_call_response, ...}]}``), ``gen_ai.request.model``,
``gen_ai.usage.input_tokens`` / ``output_tokens``, ``gen_ai.conversation.id`` (the session; else
the trace id). OpenLLMetry's older ``gen_ai.prompt.{i}.role/content`` and
``gen_ai.completion.{i}.role/content`` attributes are read too. Parent ``invoke_agent`` spans
name the harness (``gen_ai.agent.name``). The conventions carry no token ids.
"""

from __future__ import annotations

import json
from typing import Any

from rollout_graph.core.records import Call
from rollout_graph.ingest.formats.fidelity import MESSAGES
from rollout_graph.ingest.formats.fields import as_dict, new_call, record_problems
from rollout_graph.ingest.tokens import Problems

FORMAT = "OpenTelemetry GenAI spans"
MODEL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "completion"})


def is_otlp(record: dict) -> bool:
    """An OTLP JSON traces export (``resourceSpans``; ``resource_spans`` as protobuf's snake case)."""
    return isinstance(record.get("resourceSpans", record.get("resource_spans")), list)


_SNAKE = {
    "span_id": "spanId", "trace_id": "traceId", "parent_span_id": "parentSpanId",
    "start_time_unix_nano": "startTimeUnixNano", "end_time_unix_nano": "endTimeUnixNano",
}  # fmt: skip


def _camel(span: dict) -> dict:
    """A span with protobuf's snake-case keys renamed to the OTLP JSON ones."""
    return {_SNAKE.get(k, k): v for k, v in span.items()}


def _value(v: Any) -> Any:
    v = as_dict(v)
    v = {"".join(p.title() if i else p for i, p in enumerate(k.split("_"))): x for k, x in v.items()}  # string_value
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in v:
            return v[key]
    if "intValue" in v:
        try:
            return int(v["intValue"])
        except (TypeError, ValueError):
            return None
    if "arrayValue" in v:
        return [_value(x) for x in as_dict(v["arrayValue"]).get("values") or []]
    return None


def _attributes(span: dict) -> dict[str, Any]:
    return {
        a["key"]: _value(a.get("value"))
        for a in span.get("attributes") or []
        if isinstance(a, dict) and isinstance(a.get("key"), str)
    }


def _json_list(value: Any) -> list | None:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, list) else None


def _chat_message(message: Any) -> dict | None:
    """A GenAI message (role + parts) as a chat message."""
    if not isinstance(message, dict):
        return None
    texts, calls = [], []
    out: dict[str, Any] = {"role": str(message.get("role", "user"))}
    for part in message.get("parts") or []:
        part = as_dict(part)
        kind = part.get("type")
        if kind in ("text", "reasoning") and isinstance(part.get("content"), str):
            texts.append(part["content"])
        elif kind == "tool_call":
            args = part.get("arguments")
            calls.append(
                {
                    "id": part.get("id"),
                    "type": "function",
                    "function": {
                        "name": part.get("name"),
                        "arguments": args if isinstance(args, str) else json.dumps(args),
                    },
                }
            )
        elif kind == "tool_call_response":
            out["role"] = "tool"
            out["tool_call_id"] = part.get("id")
            response = part.get("response")
            texts.append(response if isinstance(response, str) else json.dumps(response))
    if "content" in message and not texts:
        texts.append(str(message["content"]))
    out["content"] = "\n".join(texts)
    if calls:
        out["tool_calls"] = calls
    return out


def _indexed(attrs: dict[str, Any], prefix: str) -> list[dict]:
    """OpenLLMetry's ``gen_ai.prompt.{i}.role`` / ``.content`` attributes as messages."""
    out: dict[int, dict] = {}
    for key, value in attrs.items():
        if not key.startswith(prefix):
            continue
        index, _, field = key[len(prefix) :].partition(".")
        if index.isdigit() and field in ("role", "content"):
            out.setdefault(int(index), {})[field] = value
    return [{"role": str(m.get("role", "user")), "content": m.get("content") or ""} for _, m in sorted(out.items())]


def parse(record: dict, source: str, line: int, default_session: str) -> list[Call]:
    """Every model-call span of one OTLP export object, in start-time order."""
    spans: list[dict] = []
    for resource in record.get("resourceSpans", record.get("resource_spans")) or []:
        resource = as_dict(resource)
        # scopeSpans; instrumentationLibrarySpans in exports older than OTLP 0.15
        scopes = (
            resource.get("scopeSpans") or resource.get("scope_spans") or resource.get("instrumentationLibrarySpans")
        )
        for scope in scopes or []:
            spans += [_camel(s) for s in as_dict(scope).get("spans") or [] if isinstance(s, dict)]
    agents = {}
    for span in spans:
        attrs = _attributes(span)
        if attrs.get("gen_ai.operation.name") == "invoke_agent":
            agents[span.get("spanId")] = attrs.get("gen_ai.agent.name")
    calls: list[Call] = []
    for span in sorted(spans, key=_start):
        attrs = _attributes(span)
        operation = attrs.get("gen_ai.operation.name")
        inputs = _json_list(attrs.get("gen_ai.input.messages"))
        legacy = _indexed(attrs, "gen_ai.prompt.")
        if operation not in MODEL_OPERATIONS and inputs is None and not legacy:
            continue
        problems = Problems()
        session = _conversation(attrs, problems) or _text(span.get("traceId")) or default_session
        call = new_call(
            {"session_id": session, "node_id": _text(span.get("spanId")) or str(len(calls))},
            source,
            line,
            FORMAT,
            session,
        )
        messages = (
            [m for m in (_chat_message(x) for x in inputs or []) if m is not None] if inputs is not None else legacy
        )
        system = _json_list(attrs.get("gen_ai.system_instructions"))
        if system:
            text = "\n".join(str(as_dict(p).get("content", "")) for p in system)
            messages = [{"role": "system", "content": text}, *messages]
        call.request_messages = messages
        outputs = _json_list(attrs.get("gen_ai.output.messages"))
        replies = (
            [m for m in (_chat_message(x) for x in outputs or []) if m is not None]
            if outputs is not None
            else _indexed(attrs, "gen_ai.completion.")
        )
        call.response_message = replies[0] if replies else None
        if outputs:
            finish = as_dict(outputs[0]).get("finish_reason")
            call.finish_reason = None if finish is None else str(finish)
        reasons = attrs.get("gen_ai.response.finish_reasons")
        if call.finish_reason is None and isinstance(reasons, list) and reasons:
            call.finish_reason = str(reasons[0])
        model = attrs.get("gen_ai.response.model") or attrs.get("gen_ai.request.model")
        call.model = None if model is None else str(model)
        usage = {
            "prompt_tokens": attrs.get("gen_ai.usage.input_tokens"),
            "completion_tokens": attrs.get("gen_ai.usage.output_tokens"),
        }
        if any(v is not None for v in usage.values()):
            call.usage = usage
        for key, field in (("startTimeUnixNano", "started_at"), ("endTimeUnixNano", "ended_at")):
            nanos = _nanos(span.get(key))
            if nanos is not None:
                call.timing[field] = nanos / 1e9
            elif span.get(key) not in (None, "", 0, "0"):
                problems.malformed.append(f"{key} {_shown(span.get(key))} is not a time in nanoseconds; not used")
        agent = agents.get(span.get("parentSpanId"))
        call.harness = str(agent) if agent else call.harness
        for key in ("gen_ai.request.temperature", "gen_ai.request.top_p", "gen_ai.request.max_tokens"):
            if attrs.get(key) is not None:
                call.requested_params[key.rsplit(".", 1)[-1]] = attrs[key]
        call.claims.update(fidelity=MESSAGES, format=FORMAT)
        record_problems(call, problems)
        calls.append(call)
    return calls


_MAX_NANOS = 2**64  # OTLP's fixed64


def _nanos(value: Any) -> int | None:
    """A span time (OTLP JSON writes fixed64 as a string of digits) in nanoseconds, or None when it
    is not one ("NaN", a float, a negative or a 5,000-digit number): one bad span time never costs
    the other spans of the file."""
    if type(value) is int:
        return value if 0 <= value < _MAX_NANOS else None
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 20:
        nanos = int(value)
        return nanos if nanos < _MAX_NANOS else None
    return None


def _start(span: dict) -> int:
    """The sort key of a span: its start time, 0 when it has none that can be read."""
    return _nanos(span.get("startTimeUnixNano")) or 0


def _text(value: Any) -> str | None:
    """An id as text: a string or an integer; None for anything else (never a Python repr)."""
    if isinstance(value, str):
        return value or None
    if type(value) is int:
        return str(value)
    return None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:30] + f"… ({len(text):,} characters)"


def _conversation(attrs: dict[str, Any], problems: Problems) -> str | None:
    """``gen_ai.conversation.id`` as the session: a string or an integer. A list of one scalar is
    that scalar; any other list, a boolean or a number that is not whole is skipped with a warning
    (the session is then the trace id) rather than becoming the session ``"['x']"``."""
    value = attrs.get("gen_ai.conversation.id")
    if value is None or value == "":
        return None
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str | int) and value[0] != "":
        value = value[0]
    text = None if isinstance(value, bool) else _text(value)
    if text is None:
        problems.malformed.append(
            f"gen_ai.conversation.id is {_shown(value)}, not one text; the session is the span's trace id"
        )
    return text
