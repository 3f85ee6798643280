"""``{"request": ..., "response": ...}`` pairs: vLLM and SGLang chat/completions bodies,
SGLang's native ``/generate``, reassembled streams, and message-only eval endpoints."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from graph.formats.fields import (
    RecordError,
    as_dict,
    message_list,
    record_problems,
    sampling_params,
    tool_list,
)
from graph.formats.streaming import reassemble
from graph.records import WARN, Call
from graph.tokens import Problems, id_or_text, logprobs, token_ids, top_k


def is_engine_pair(record: dict) -> bool:
    return "request" in record and "response" in record


@dataclass(slots=True)
class _Sampled:
    """What one choice says about its sampled tokens, before alignment checks."""

    ids: list | None = None
    logprobs: list | None = None
    alternatives: list | None = None
    texts: list[str] | None = None
    token_strings: bool = False
    notes: list[str] = field(default_factory=list)


def parse(record: dict, template: Call, may_hold_bools: bool, problems: Problems) -> list[Call]:
    """One call per choice (``n > 1`` samples the same prompt several times)."""
    request = record.get("request")
    if not isinstance(request, dict):
        problems.malformed.append(f"request is a {type(request).__name__}, not an object")
        request = {}
    response = record.get("response")
    shape_suffix = ""
    if isinstance(response, list):
        response = reassemble(response)
        shape_suffix = "-stream"
    if not isinstance(response, dict):
        raise RecordError(f"response is {type(response).__name__}, not an object")
    if "choices" not in response and "meta_info" not in response and "output_ids" not in response:
        error = response.get("error") or record.get("error")
        if error is not None:
            raise RecordError(f"call failed, no model output: {str(error)[:200]}")
        raise RecordError(f"response has none of choices/meta_info/output_ids (keys: {_keys(response)})")

    template.request_messages = message_list(request.get("messages"), "request.messages", problems)
    template.tools = tool_list(request.get("tools"), problems)
    template.requested_params = sampling_params(request)
    model = response.get("model", request.get("model"))
    template.model = None if model is None else str(model)
    template.usage = response.get("usage") if isinstance(response.get("usage"), dict) else None
    if isinstance(response.get("created"), (int, float)):
        template.timing.setdefault("created", response["created"])

    if "choices" not in response:
        own = Problems()
        call = _sglang_generate(request, response, template, may_hold_bools, own)
        record_problems(call, own)
        return [call]
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices or not all(isinstance(c, dict) for c in choices):
        raise RecordError("response.choices is empty or not a list of objects")
    calls = []
    for i, choice in enumerate(choices):
        call = template if i == 0 else _copy_for_choice(template, i)
        # Token problems belong to this choice alone; request-level ones go to every choice.
        own = Problems()
        if "message" in choice or "delta" in choice or str(response.get("object", "")).startswith("chat"):
            _chat_choice(request, response, choice, call, may_hold_bools, own, shape_suffix)
        else:
            _completion_choice(request, response, choice, call, may_hold_bools, own, shape_suffix)
        record_problems(call, own)
        calls.append(call)
    return calls


def _keys(d: dict) -> str:
    return ", ".join(sorted(map(str, d))[:8]) or "none"


def _copy_for_choice(template: Call, index: int) -> Call:
    call = Call(
        node_id=f"{template.node_id}#{index}",
        session_id=template.session_id,
        source=template.source,
        line=template.line,
        shape=template.shape,
    )
    for name in ("request_messages", "tools", "requested_params", "submitted_params", "model", "usage", "harness"):
        setattr(call, name, getattr(template, name))
    call.timing = dict(template.timing)
    return call


def _finish_reason(value: Any) -> str | None:
    if isinstance(value, dict):  # SGLang: {"type": "length", "length": 128}
        value = value.get("type")
    return None if value is None else str(value)


def _chat_choice(request, response, choice, call, may_hold_bools, problems, suffix) -> None:
    prompt = response.get("prompt_token_ids")
    on_choice = prompt is None and "prompt_token_ids" in choice
    if on_choice:
        prompt = choice.get("prompt_token_ids")
    meta = as_dict(choice.get("meta_info")) or as_dict(response.get("meta_info"))
    sampled = _from_chat_logprobs(as_dict(choice.get("logprobs")).get("content"))
    if sampled.logprobs is None and meta:
        sampled = _from_sglang_meta(meta)
    ids = choice.get("token_ids", choice.get("output_ids"))
    if ids is None:
        ids = sampled.ids
    engine = "sglang" if on_choice or meta else "vllm"
    call.shape = f"{engine}-chat{suffix}" if _has_tokens(prompt, ids) else "messages-only"
    message = choice.get("message")
    call.response_message = message if isinstance(message, dict) else None
    call.finish_reason = _finish_reason(choice.get("finish_reason", meta.get("finish_reason")))
    _fill_tokens(call, prompt, ids, sampled, may_hold_bools, problems)


def _completion_choice(request, response, choice, call, may_hold_bools, problems, suffix) -> None:
    prompt = choice.get("prompt_token_ids", response.get("prompt_token_ids"))
    request_prompt = request.get("prompt")
    if prompt is None and isinstance(request_prompt, list) and all(type(t) is int for t in request_prompt):
        prompt = request_prompt
    raw_lp = as_dict(choice.get("logprobs"))
    sampled = _from_completion_logprobs(raw_lp)
    ids = choice.get("token_ids")
    if request.get("echo") and sampled.logprobs is not None:
        # With echo the logprobs cover prompt + completion; keep the completion's tail.
        n = len(ids) if isinstance(ids, list) else _completion_tokens(response)
        sampled = _tail(sampled, n) if n is not None else sampled
        if n is None:
            sampled.notes.append("echo=true but the completion length is unknown; logprobs kept whole")
    if ids is None:
        ids = sampled.ids
    call.shape = f"completions{suffix}" if _has_tokens(prompt, ids) else "messages-only"
    text = choice.get("text")
    call.response_message = {"role": "assistant", "content": text} if isinstance(text, str) else None
    call.finish_reason = _finish_reason(choice.get("finish_reason"))
    _fill_tokens(call, prompt, ids, sampled, may_hold_bools, problems)


def _sglang_generate(request, response, call, may_hold_bools, problems) -> Call:
    meta = as_dict(response.get("meta_info"))
    sampled = _from_sglang_meta(meta)
    ids = response.get("output_ids", sampled.ids)
    prompt = request.get("input_ids")
    call.shape = "sglang-generate" if _has_tokens(prompt, ids) else "messages-only"
    text = response.get("text")
    call.response_message = {"role": "assistant", "content": text} if isinstance(text, str) else None
    call.finish_reason = _finish_reason(meta.get("finish_reason"))
    _fill_tokens(call, prompt, ids, sampled, may_hold_bools, problems)
    return call


def _has_tokens(prompt, ids) -> bool:
    return prompt is not None or ids is not None


def _completion_tokens(response: dict) -> int | None:
    n = as_dict(response.get("usage")).get("completion_tokens")
    return n if type(n) is int and n >= 0 else None


def _tail(sampled: _Sampled, n: int) -> _Sampled:
    def cut(xs):
        return None if xs is None else xs[len(xs) - n :]

    return _Sampled(
        ids=cut(sampled.ids),
        logprobs=cut(sampled.logprobs),
        alternatives=cut(sampled.alternatives),
        texts=cut(sampled.texts),
        token_strings=sampled.token_strings,
        notes=sampled.notes,
    )


def _from_chat_logprobs(content: Any) -> _Sampled:
    """vLLM / OpenAI ``choices[0].logprobs.content``: one entry per sampled token."""
    if not isinstance(content, list):
        return _Sampled()
    ids: list = []
    lps: list = []
    alternatives: list = []
    texts: list[str] = []
    strings = False
    for entry in content:
        entry = as_dict(entry)
        token_id, text = id_or_text(entry.get("token"))
        strings = strings or text is not None
        ids.append(token_id)
        texts.append(text if text is not None else "")
        lps.append(entry.get("logprob"))
        alts = entry.get("top_logprobs")
        alternatives.append(
            [(*id_or_text(a.get("token")), a.get("logprob")) for a in alts if isinstance(a, dict)]
            if isinstance(alts, list)
            else None
        )
    return _Sampled(
        ids=ids if not strings else None,
        logprobs=lps,
        alternatives=alternatives,
        texts=texts if strings else None,
        token_strings=strings,
    )


def _from_completion_logprobs(raw: dict) -> _Sampled:
    """``/v1/completions`` logprobs: parallel ``tokens`` / ``token_logprobs`` / ``top_logprobs``."""
    lps = raw.get("token_logprobs")
    if not isinstance(lps, list):
        return _Sampled()
    tokens = raw.get("tokens") if isinstance(raw.get("tokens"), list) else []
    split = [id_or_text(t) for t in tokens]
    strings = any(text is not None for _, text in split)
    tops = raw.get("top_logprobs") if isinstance(raw.get("top_logprobs"), list) else []
    alternatives = [
        [(*id_or_text(tok), lp) for tok, lp in top.items()] if isinstance(top, dict) else None for top in tops
    ]
    return _Sampled(
        ids=[i for i, _ in split] if split and not strings else None,
        logprobs=lps,
        alternatives=alternatives or None,
        texts=[t or "" for _, t in split] if strings else None,
        token_strings=strings,
    )


def _from_sglang_meta(meta: dict) -> _Sampled:
    """SGLang ``meta_info.output_token_logprobs``: ``[logprob, token_id, text]`` tuples."""
    entries = meta.get("output_token_logprobs")
    if not isinstance(entries, list):
        return _Sampled()
    ids, lps, texts = [], [], []
    for entry in entries:
        entry = entry if isinstance(entry, list) else [None, None, None]
        entry = entry + [None] * (3 - len(entry))
        lps.append(entry[0])
        ids.append(entry[1])
        texts.append(entry[2] if isinstance(entry[2], str) else "")
    tops = meta.get("output_top_logprobs")
    alternatives = None
    if isinstance(tops, list):
        alternatives = [
            [(a[1], a[2] if len(a) > 2 else None, a[0]) for a in top if isinstance(a, list) and len(a) >= 2]
            if isinstance(top, list)
            else None
            for top in tops
        ]
    return _Sampled(
        ids=ids, logprobs=lps, alternatives=alternatives, texts=texts if any(texts) else None
    )


def _fill_tokens(call: Call, prompt, ids, sampled: _Sampled, may_hold_bools: bool, problems: Problems) -> None:
    call.prompt_ids = token_ids(prompt, "prompt_token_ids", problems, may_hold_bools)
    sampled_ids = token_ids(ids, "token_ids", problems, may_hold_bools)
    if sampled_ids is not None:
        call.sampled_ids = sampled_ids
    if sampled.logprobs is not None:
        call.sampled_logprobs = logprobs(sampled.logprobs, "logprobs", problems)
    if sampled.alternatives:
        call.top_k = top_k(sampled.alternatives)
    if sampled.texts is not None:
        call.token_texts = sampled.texts
    if sampled.token_strings:
        call.add_issue(
            WARN,
            "token_strings",
            "logprob tokens arrived as text, not token_id:N; the logprobs are probably raw "
            "pre-temperature values (vLLM: return_tokens_as_token_ids)",
        )
    problems.malformed.extend(sampled.notes)

