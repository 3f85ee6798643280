"""Fields shared by every record shape: ids, session, sampling params, timing, messages."""

from __future__ import annotations

from typing import Any

from rollout_graph.core.records import FATAL, WARN, Call, Finding
from rollout_graph.ingest.tokens import Problems


class RecordError(ValueError):
    """The record cannot become a call; the message is the reason shown in the load report."""


# Keys that change the sampling distribution or its length; logprob options are capture plumbing.
SAMPLING_KEYS = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "seed",
    "max_tokens",
    "max_completion_tokens",
    "max_new_tokens",
    "stop",
    "n",
)
TIMING_KEYS = (
    "timestamp",
    "started_at",
    "ended_at",
    "start_time",
    "end_time",
    "latency_s",
    "latency_ms",
    "duration_s",
    "ttft_s",
)
_TIMING_SET = frozenset(TIMING_KEYS)
_SAMPLING_SET = frozenset(SAMPLING_KEYS)
_ONLY_DICT = {dict}


def describe_keys(record: dict, limit: int = 8) -> str:
    """The first keys of an object, for a load-report reason."""
    return ", ".join(sorted(map(str, record))[:limit]) or "no keys"


def as_dict(value: Any) -> dict:
    """The value if it is a JSON object, else an empty dict (tolerant field access)."""
    return value if isinstance(value, dict) else {}


def session_id_of(record: dict) -> str | None:
    """The record's session id, at top level or in its metadata.

    Raises:
        RecordError: the id is a list, an object or a boolean (its text would be a Python repr,
            a session nobody named): the record is skipped, saying so.
    """
    where = "session_id"
    sid = record.get("session_id")
    if sid is None:
        where = "metadata.session_id"
        sid = as_dict(record.get("metadata")).get("session_id")
    if sid is None or isinstance(sid, str):
        return sid
    if isinstance(sid, int | float) and not isinstance(sid, bool):
        return str(sid)
    raise RecordError(f"{where} is a {type(sid).__name__}, not text: the record's session is unknown")


def node_id_of(record: dict) -> str | None:
    """The record's call id (``call_id``, ``id`` or ``node_id``, else OpenEnv's
    ``metadata.node_id``), as text."""
    for key in ("call_id", "id", "node_id"):
        value = record.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            return str(value)
    meta = record.get("metadata")
    if isinstance(meta, dict):
        value = meta.get("node_id")
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            return str(value)
    return None


def sampling_params(body: dict) -> dict[str, Any]:
    """The sampling parameters a request set, including SGLang's nested ``sampling_params``."""
    present = _SAMPLING_SET.intersection(body)  # one pass over the body's keys; the order below
    if len(present) == 1:  # one key set (a chat request's temperature): no order to keep
        (key,) = present
        params = {key: body[key]}
    else:
        params = {k: body[k] for k in SAMPLING_KEYS if k in present} if present else {}
    nested = body.get("sampling_params")
    if isinstance(nested, dict):  # SGLang native /generate
        params.update({k: nested[k] for k in SAMPLING_KEYS if k in nested})
    return params


def params_of(value: Any, what: str, problems: Problems) -> dict[str, Any]:
    """A writer's own sampling-params object (OpenEnv's ``sampling_params``), kept whole; a value
    that is not an object is reported in ``problems`` and read as none."""
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if isinstance(k, str)}
    if value is not None:
        problems.malformed.append(f"{what} is a {type(value).__name__}, not an object")
    return {}


def submitted_params_of(record: dict) -> dict[str, Any] | None:
    """What the capture proxy actually forwarded, when it recorded that separately."""
    body = record.get("submitted_request")
    if isinstance(body, dict):
        return sampling_params(body)
    params = as_dict(record.get("metadata")).get("submitted_params")
    if isinstance(params, dict):
        return {k: params[k] for k in SAMPLING_KEYS if k in params}
    return None


def timing_of(record: dict, response: dict | None = None) -> dict[str, Any]:
    """Timing fields of a call, from metadata, a timing object, the record and the response."""
    timing: dict[str, Any] = {}
    for scope in (record.get("metadata"), record.get("timing"), record):
        # Most scopes hold none of the keys (or are absent): one pass over theirs.
        if isinstance(scope, dict) and not _TIMING_SET.isdisjoint(scope):
            timing.update({k: scope[k] for k in TIMING_KEYS if k in scope and scope[k] is not None})
    if response and isinstance(response.get("created"), (int, float)):
        timing.setdefault("created", response["created"])
    return timing


def harness_of(record: dict) -> str | None:
    """The harness that recorded the call, if named."""
    value = record.get("harness", as_dict(record.get("metadata")).get("harness"))
    return None if value is None else str(value)


def message_list(value: Any, what: str, problems: Problems) -> list[dict] | None:
    """A message list, or None; a value that is not a list of objects is reported in ``problems``."""
    if value is None:
        return None
    if not isinstance(value, list):
        problems.malformed.append(f"{what} is a {type(value).__name__}, not a list")
        return None
    # A copy either way (the call's list is written to; the record's may be another line's too).
    kept = value.copy() if set(map(type, value)) == _ONLY_DICT else [m for m in value if isinstance(m, dict)]
    if len(kept) != len(value):
        problems.malformed.append(f"{what}: {len(value) - len(kept)} entries are not objects (dropped)")
    return kept


def tool_list(value: Any, problems: Problems) -> list | None:
    """The request's tool list, or None; a value that is not a list is reported in ``problems``."""
    if value is None:
        return None
    if not isinstance(value, list):
        problems.malformed.append(f"tools is a {type(value).__name__}, not a list")
        return None
    return value


def new_call(record: dict, source: str, line: int, shape: str, default_session: str) -> Call:
    """An empty call for a record: ids, session, source position and shape; tokens are filled by the parser."""
    return Call(
        node_id=node_id_of(record) or str(line),
        session_id=session_id_of(record) or default_session,
        source=source,
        line=line,
        shape=shape,
        submitted_params=submitted_params_of(record),
        timing=timing_of(record),
        harness=harness_of(record),
    )


def problem_findings(problems: Problems, node_id: str | None) -> list[Finding]:
    """What conversion found, as graded findings."""
    graded = (
        (FATAL, "invalid_token_id", problems.invalid_ids, ""),
        (FATAL, "invalid_logprob", problems.invalid_logprobs, ""),
        (FATAL, "positive_logprob", problems.positive_logprobs, "logprob > 0: "),
        (WARN, "malformed_field", problems.malformed, ""),
    )
    return [
        Finding(level, code, prefix + detail, node_id=node_id)
        for level, code, details, prefix in graded
        for detail in details
    ]


def record_problems(call: Call, problems: Problems) -> None:
    """Attach the problems found while reading a record to its call as findings."""
    if problems.invalid_ids or problems.invalid_logprobs or problems.positive_logprobs or problems.malformed:
        call.issues.extend(problem_findings(problems, call.node_id))
