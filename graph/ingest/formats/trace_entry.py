"""Flat trace entries: TRL / OpenEnv ``TraceEntry`` and the older interception log.

OpenEnv 0.10 (``to_trace_entries``, ``TrainingTrace``) names a call in ``metadata.node_id``, keeps
what was submitted to the engine in ``metadata.sampling_params`` and the harness's request in
``metadata.requested_sampling_params``, the manifest's size in ``metadata.n_tools`` and the model
in ``metadata.model``; its ``loss_mask`` covers prompt plus completion (the completion's part is
kept as the call's claim). docs/formats.md, "Trace entries".
"""

from __future__ import annotations

from rollout_graph.core.findings import row_shape
from rollout_graph.core.records import Call
from rollout_graph.ingest.formats.fields import as_dict, message_list, params_of, sampling_params, tool_list
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
    meta = as_dict(record.get("metadata"))
    if "requested_sampling_params" in meta:
        call.requested_params = params_of(meta["requested_sampling_params"], "requested_sampling_params", problems)
    if "sampling_params" in meta:
        call.submitted_params = params_of(meta["sampling_params"], "metadata.sampling_params", problems)
    for key in ("n_tools", "harness_session_id", "index"):
        if meta.get(key) is not None:
            call.claims[key] = meta[key]
    choice = (response.get("choices") or [{}])[0] if isinstance(response.get("choices"), list) else {}
    message = as_dict(choice).get("message")
    if isinstance(message, dict):
        call.response_message = message
    elif isinstance(record.get("completion"), str):
        call.response_message = {"role": "assistant", "content": record["completion"]}
    model = record.get("model", response.get("model", meta.get("model", request.get("model"))))
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
    mask = record.get("loss_mask")
    if isinstance(mask, list):
        # OpenEnv's mask spans prompt plus completion; an older one the completion only
        n_prompt = 0 if call.prompt_ids is None else len(call.prompt_ids)
        if call.prompt_ids is not None:  # the row as sent, for the training-row findings (core.findings)
            call.claims["row"] = row_shape(n_prompt + call.n_sampled, mask, None, n_prompt)
        if n_prompt and len(mask) == n_prompt + call.n_sampled:
            mask = mask[n_prompt:]
        call.claims["loss_mask"] = mask
    return [call]
