"""Flat trace entries: TRL / OpenEnv ``TraceEntry`` and the older interception log."""

from __future__ import annotations

from rollout_graph.core.records import Call
from rollout_graph.ingest.formats.fields import as_dict, message_list, sampling_params, tool_list
from rollout_graph.ingest.tokens import Problems, logprobs, split_tokens, token_ids

TOKEN_KEYS = ("prompt_token_ids", "completion_token_ids", "per_token_logps", "completion_tokens")


def is_trace_entry(record: dict) -> bool:
    """Whether the record is a TRL/OpenEnv trace entry (carries token id keys)."""
    return any(key in record for key in TOKEN_KEYS)


def _ids_from_token_strings(tokens, problems: Problems):
    """The interception log's ``completion_tokens`` (``"token_id:N"``) when ids are missing."""
    if not isinstance(tokens, list) or not tokens:
        return None
    split = split_tokens(tokens)
    invalid = split.describe_invalid(tokens, "completion_tokens")
    if invalid:
        problems.invalid_ids.append(invalid)
    if not split.all_ids:
        problems.malformed.append("completion_tokens are not all token_id:N strings; ids not recovered")
        return None
    return split.ids


def parse(record: dict, call: Call, problems: Problems) -> list[Call]:
    """Fill ``call`` from a trace entry (or a legacy interception log) and return it."""
    legacy = "turn" in record or "completion_tokens" in record or "latency_s" in record
    call.shape = "interception-log" if legacy else "trace-entry"
    request = as_dict(record.get("request"))
    response = as_dict(record.get("response"))
    call.request_messages = message_list(record.get("messages", request.get("messages")), "messages", problems)
    call.tools = tool_list(record.get("tools", request.get("tools")), problems)
    call.requested_params = sampling_params(request)
    choice = (response.get("choices") or [{}])[0] if isinstance(response.get("choices"), list) else {}
    message = as_dict(choice).get("message")
    if isinstance(message, dict):
        call.response_message = message
    elif isinstance(record.get("completion"), str):
        call.response_message = {"role": "assistant", "content": record["completion"]}
    model = record.get("model", response.get("model", request.get("model")))
    call.model = None if model is None else str(model)
    finish = record.get("finish_reason", as_dict(choice).get("finish_reason"))
    call.finish_reason = None if finish is None else str(finish)
    if isinstance(response.get("usage"), dict):
        call.usage = response["usage"]

    call.prompt_ids = token_ids(record.get("prompt_token_ids"), "prompt_token_ids", problems)
    completion = record.get("completion_token_ids")
    if not completion:
        recovered = _ids_from_token_strings(record.get("completion_tokens"), problems)
        completion = completion if recovered is None else recovered
    sampled = token_ids(completion, "completion_token_ids", problems)
    if sampled is not None:
        call.sampled_ids = sampled
    per_token = record.get("per_token_logps")
    if isinstance(per_token, list):
        call.sampled_logprobs = logprobs(per_token, "per_token_logps", problems)
    elif per_token is not None:
        problems.malformed.append(f"per_token_logps is a {type(per_token).__name__}, not a list")
    if isinstance(record.get("loss_mask"), list):
        call.claims["loss_mask"] = record["loss_mask"]
    return [call]
