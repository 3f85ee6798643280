"""The rLLM model gateway's trace records (``pip install rllm-model-gateway``; docs/formats.md,
"rLLM model gateway").

One ``TraceRecord`` per model call (``rllm_model_gateway/models.py``, built by
``data_process.build_trace_record`` and stored by its trace stores; its API's session traces are a
list of them): ``trace_id`` (the node id), ``session_id``, ``messages`` (the request's),
``prompt_token_ids``, ``response_message``, ``completion_token_ids``, ``logprobs`` (one per
completion id, or null), ``finish_reason``, ``latency_ms``, ``timestamp`` (when the record was
built: the call's end), ``raw_request`` (tools and sampling parameters) and ``raw_response``.
Entry points: :func:`is_trace_record`, :func:`parse`; the format registry tries them before the
trace-entry shape (both carry ``prompt_token_ids``).
"""

from __future__ import annotations

import numpy as np

from rollout_graph.core.records import Call
from rollout_graph.ingest.formats.fields import (
    RecordError,
    as_dict,
    message_list,
    record_problems,
    sampling_params,
    tool_list,
)
from rollout_graph.ingest.tokens import Problems, logprobs, token_ids

FORMAT = "rllm-gateway"


def is_trace_record(record: dict) -> bool:
    """A gateway ``TraceRecord``: its trace and session ids and its completion ids."""
    return "trace_id" in record and "session_id" in record and "completion_token_ids" in record


def parse(record: dict, source: str, line: int, default_session: str) -> list[Call]:
    """One trace record -> one call.

    Raises:
        RecordError: a record without a trace id.
    """
    node = record.get("trace_id")
    if not isinstance(node, str) or not node:
        raise RecordError("rLLM gateway trace record without a trace_id")
    session = record.get("session_id")
    call = Call(
        node_id=node,
        session_id=session if isinstance(session, str) and session else default_session,
        source=source,
        line=line,
        shape=FORMAT,
    )
    problems = Problems()
    request = as_dict(record.get("raw_request"))
    call.request_messages = message_list(record.get("messages", request.get("messages")), "messages", problems)
    call.tools = tool_list(request.get("tools"), problems)
    call.requested_params = sampling_params(request)
    prompt = record.get("prompt_token_ids")
    if not isinstance(prompt, list | np.ndarray) or len(prompt):  # the gateway writes [] when the engine returned none
        call.prompt_ids = token_ids(prompt, "prompt_token_ids", problems)
    completion = record.get("completion_token_ids")
    sampled = token_ids([] if completion is None else completion, "completion_token_ids", problems)
    if sampled is not None:
        call.sampled_ids = sampled
    lps = record.get("logprobs")
    if isinstance(lps, np.ndarray):  # a fast path may have read the list already
        lps = lps.tolist()
    if isinstance(lps, list):
        call.sampled_logprobs = logprobs(lps, "logprobs", problems)
    elif lps is not None:
        problems.malformed.append(f"logprobs is a {type(lps).__name__}, not a list")
    message = record.get("response_message")
    if isinstance(message, dict) and message:
        call.response_message = message
    finish = record.get("finish_reason")
    call.finish_reason = finish if isinstance(finish, str) else None
    model = record.get("model")
    call.model = model if isinstance(model, str) and model else None
    stamp, latency = record.get("timestamp"), record.get("latency_ms")
    if isinstance(stamp, int | float) and not isinstance(stamp, bool) and stamp > 0:
        call.timing["ended_at"] = float(stamp)
        if isinstance(latency, int | float) and not isinstance(latency, bool) and latency >= 0:
            call.timing["started_at"] = float(stamp) - float(latency) / 1000.0
    usage = as_dict(record.get("raw_response")).get("usage")
    if isinstance(usage, dict):
        call.usage = usage
    call.claims["format"] = FORMAT
    record_problems(call, problems)
    return [call]
