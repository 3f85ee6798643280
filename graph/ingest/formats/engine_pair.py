"""``{"request": ..., "response": ...}`` pairs: vLLM and SGLang chat/completions bodies,
SGLang's native ``/generate``, reassembled streams, and message-only eval endpoints.

Entry points: :func:`parse` (one record -> one call per choice) and :func:`is_engine_pair`. A
format reader (``formats/registry.py`` tries it); reads the columns the logprob shortcut decoded
(``shortcuts/logprob_entries.py``) or the generic entries through the same reference functions,
and what ``streaming`` and ``dialect_bodies`` rebuild. docs/formats.md, "Engine pairs".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rollout_graph.core.dialects import CHAT, TRANSLATED, chat_messages, chat_sampling, chat_tools, dialect_of
from rollout_graph.core.records import WARN, Call, TopK
from rollout_graph.ingest.formats.dialect_bodies import as_chat_response
from rollout_graph.ingest.formats.fields import (
    RecordError,
    as_dict,
    describe_keys,
    message_list,
    record_problems,
    sampling_params,
    session_id_of,
    tool_list,
)
from rollout_graph.ingest.formats.streaming import reassemble
from rollout_graph.ingest.shortcuts.logprob_entries import LogprobColumns, column, top_of_entries
from rollout_graph.ingest.tokens import (
    Problems,
    all_token_id_texts,
    logprobs,
    split_tokens,
    token_id_list,
    token_ids,
    top_k,
)


def is_engine_pair(record: dict) -> bool:
    """A ``{"request": ..., "response": ...}`` pair."""
    return "request" in record and "response" in record


@dataclass(slots=True)
class _Sampled:
    """What one choice says about its sampled tokens, before alignment checks."""

    ids: Any = None  # list or array of ids; None when only text was recorded
    logprobs: Any = None  # list; or the ``ready`` array standing for it (read only when ready is None)
    top: TopK | None = None
    texts: list[str] | None = None
    token_strings: bool = False
    numbers: bool = False  # every logprob an int, a float or None (read by the typed decoder)
    ready: Any = None  # the logprobs' array as tokens.logprobs gives it, when the decoder built it
    notes: list[str] = field(default_factory=list)
    invalid_ids: list[str] = field(default_factory=list)


FAILED_SESSION = " (session "  # a failed call's reason ends with its session, so an audit can count it


def failed_session(record: dict) -> str:
    """`` (session ID)`` for a failed call's skip reason (empty when the record names none)."""
    try:
        sid = session_id_of(record)
    except RecordError:
        return ""
    return "" if sid is None else f"{FAILED_SESSION}{sid[:200]})"


def parse(record: dict, template: Call, problems: Problems) -> list[Call]:
    """One call per choice (``n > 1`` samples the same prompt several times)."""
    request = record.get("request")
    if not isinstance(request, dict):
        problems.malformed.append(f"request is a {type(request).__name__}, not an object")
        request = {}
    if record.get("error"):
        # A capture record of a failed call (HTTP error, stream cut, proxy stopped): partial
        # output is not a turn the harness used.
        raise RecordError(f"call failed: {str(record['error'])[:200]}{failed_session(record)}")
    response = _chat_body(record.get("response"))
    shape_suffix = ""
    if isinstance(response, list):
        response = reassemble(response)
        problems.malformed.extend(response.pop("_stream_notes", ()))
        shape_suffix = "-stream"
    if not isinstance(response, dict):
        raise RecordError(f"response is {type(response).__name__}, not an object")
    if "choices" not in response and "meta_info" not in response and "output_ids" not in response:
        error = response.get("error") or record.get("error")
        if error is not None:
            raise RecordError(f"call failed, no model output: {str(error)[:200]}{failed_session(record)}")
        raise RecordError(f"response has none of choices/meta_info/output_ids (keys: {describe_keys(response)})")

    # Anthropic Messages and OpenAI Responses bodies are read as chat (docs/formats.md).
    dialect = record.get("dialect")
    if not isinstance(dialect, str):
        dialect = None
    spoken = dialect_of(request, dialect)  # detected once for the three readings below
    where = next((f"request.{k}" for k in ("messages", "input", "contents") if k in request), "request.messages")
    if spoken == CHAT:  # what chat_messages, chat_tools and chat_sampling give for chat
        messages, tools, sampling = request.get("messages"), request.get("tools"), request
    else:
        messages = chat_messages(request, dialect=spoken)
        tools, sampling = chat_tools(request, dialect=spoken), chat_sampling(request, dialect=spoken)
    template.request_messages = message_list(messages, where, problems)
    template.tools = tool_list(tools, problems)
    template.requested_params = sampling_params(sampling)
    model = response.get("model", request.get("model"))
    template.model = None if model is None else str(model)
    template.usage = response.get("usage") if isinstance(response.get("usage"), dict) else None
    if isinstance(response.get("created"), (int, float)):
        template.timing.setdefault("created", response["created"])

    if "choices" not in response:
        own = Problems()
        call = _sglang_generate(request, response, template, own)
        record_problems(call, own)
        return [call]
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices or not _objects(choices):
        raise RecordError("response.choices is empty or not a list of objects")
    calls = []
    for i, choice in enumerate(choices):
        call = template if i == 0 else _copy_for_choice(template, i)
        # Token problems belong to this choice alone; request-level ones go to every choice.
        own = Problems()
        if "message" in choice or "delta" in choice or str(response.get("object", "")).startswith("chat"):
            _chat_choice(response, choice, call, own, shape_suffix)
        else:
            _completion_choice(request, response, choice, call, own, shape_suffix)
        record_problems(call, own)
        calls.append(call)
    if dialect in TRANSLATED:  # what the harness spoke, translated by the proxy
        for call in calls:
            call.shape = f"{call.shape} via {dialect}"
    for key in CAPTURE_CLAIMS:  # what the capture proxy knew and changed (docs/formats.md, "Capture records")
        if isinstance(record.get(key), dict | list):
            for call in calls:
                call.claims[key] = record[key]
    return calls


# Capture record keys kept on the call for the findings (rollout_graph.core.engine, core.findings).
CAPTURE_CLAIMS = ("engine", "capture_options", "behaviour_changed")


def _chat_body(response: Any) -> Any:
    """:func:`as_chat_response`, which leaves an object that is neither an Anthropic message nor
    a Responses object as it is: such a body (a chat one) is not handed to it."""
    if (
        type(response) is dict
        and response.get("type") != "message"
        and response.get("object") != "response"
        and "candidates" not in response
    ):
        return response
    return as_chat_response(response)


def _objects(items: list) -> bool:
    """Every item a JSON object (one exact dict, the common case, without a generator)."""
    return (len(items) == 1 and type(items[0]) is dict) or all(isinstance(c, dict) for c in items)


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


def _chat_choice(response, choice, call, problems, suffix) -> None:
    prompt = response.get("prompt_token_ids")
    on_choice = prompt is None and "prompt_token_ids" in choice
    if on_choice:
        prompt = choice.get("prompt_token_ids")
    meta = as_dict(choice.get("meta_info")) or as_dict(response.get("meta_info"))
    ids = choice.get("token_ids", choice.get("output_ids"))
    sampled = _from_chat_logprobs(as_dict(choice.get("logprobs")).get("content"), ids is not None)
    if sampled.logprobs is None and meta:
        sampled = _from_sglang_meta(meta)
    if ids is None:
        ids = sampled.ids
    engine = "sglang" if on_choice or meta else "vllm"
    call.shape = f"{engine}-chat{suffix}" if _has_tokens(prompt, ids) else "messages-only"
    message = choice.get("message")
    call.response_message = message if isinstance(message, dict) else None
    call.finish_reason = _finish_reason(choice.get("finish_reason", meta.get("finish_reason")))
    _fill_tokens(call, prompt, ids, sampled, problems)


def _completion_choice(request, response, choice, call, problems, suffix) -> None:
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
    _fill_tokens(call, prompt, ids, sampled, problems)


def _sglang_generate(request, response, call, problems) -> Call:
    meta = as_dict(response.get("meta_info"))
    sampled = _from_sglang_meta(meta)
    ids = response.get("output_ids", sampled.ids)
    prompt = request.get("input_ids")
    call.shape = "sglang-generate" if _has_tokens(prompt, ids) else "messages-only"
    text = response.get("text")
    call.response_message = {"role": "assistant", "content": text} if isinstance(text, str) else None
    call.finish_reason = _finish_reason(meta.get("finish_reason"))
    _fill_tokens(call, prompt, ids, sampled, problems)
    return call


def _has_tokens(prompt, ids) -> bool:
    return prompt is not None or ids is not None


def _completion_tokens(response: dict) -> int | None:
    n = as_dict(response.get("usage")).get("completion_tokens")
    return n if type(n) is int and n >= 0 else None


def _tail(sampled: _Sampled, n: int) -> _Sampled:
    def cut(xs):
        return None if xs is None else xs[len(xs) - n :]

    top = sampled.top
    if top is not None:
        top = TopK(
            cut(top.ids),
            cut(top.logprobs),
            None if top.texts is None else top.texts[(top.ids.shape[0] - n) * top.ids.shape[1] :],
        )
    return _Sampled(
        ids=cut(sampled.ids),
        logprobs=cut(sampled.logprobs),
        top=top,
        texts=cut(sampled.texts),
        token_strings=sampled.token_strings,
        notes=sampled.notes,
    )


def _from_chat_logprobs(content: Any, ids_given: bool = False) -> _Sampled:
    """vLLM / OpenAI ``choices[0].logprobs.content``: one entry per sampled token.

    ``ids_given``: the choice holds its sampled ids (``token_ids``), read instead of the ids of
    the tokens' ``token_id:N`` texts; when every token is such a text only that is checked
    (:func:`~rollout_graph.ingest.tokens.all_token_id_texts`), and the ids are left unread.
    """
    numbers = False  # every logprob an int, a float or None: the typed decoder's types
    ready = None
    if isinstance(content, LogprobColumns):  # decoded by the shortcut (graph/ingest/shortcuts/logprob_entries.py)
        numbers, ready = True, content.logprob_array
        # Left in the file (deferred) when the line came from a plain file on disk.
        top = (
            content.top
            if content.top is not None
            else top_k(content.lengths, content.alt_tokens, content.alt_logprobs, numbers=True)  # the typed types
        )
        # The list only when the array does not stand for it (a chat choice's ``logprobs`` is
        # read only when ``ready`` is None: the list is then built when read, here).
        values = content.logprobs if ready is None else ready
        # The tokens joined once, by the decoder (and matched by the C scanner when it read them).
        if ids_given and (content.id_texts if content.id_texts is not None else token_id_list(content.joined)):
            return _Sampled(logprobs=values, top=top, numbers=numbers, ready=ready)
        tokens = content.tokens
    elif isinstance(content, list):
        tokens, values = column(content, "token"), column(content, "logprob")
        top = top_of_entries(content)
    else:
        return _Sampled()
    if ids_given and tokens and type(tokens[0]) is str and all_token_id_texts(tokens):
        # What split_tokens says of them (every token a valid id: no texts, nothing invalid).
        return _Sampled(logprobs=values, top=top, numbers=numbers, ready=ready)
    split = split_tokens(tokens)
    invalid = split.describe_invalid(tokens, "logprobs.content[].token")
    return _Sampled(
        ids=split.ids if split.all_ids else None,
        logprobs=values,
        top=top,
        texts=split.texts,
        token_strings=split.texts is not None,
        numbers=numbers,
        ready=ready,
        invalid_ids=[invalid] if invalid else [],
    )


def _from_completion_logprobs(raw: dict) -> _Sampled:
    """``/v1/completions`` logprobs: parallel ``tokens`` / ``token_logprobs`` / ``top_logprobs``."""
    lps = raw.get("token_logprobs")
    if not isinstance(lps, list):
        return _Sampled()
    tokens: list = raw["tokens"] if isinstance(raw.get("tokens"), list) else []
    split = split_tokens(tokens)
    raw_tops = raw.get("top_logprobs")
    notes = []
    if raw_tops is not None and not isinstance(raw_tops, list):
        notes.append(f"logprobs.top_logprobs is a {type(raw_tops).__name__}, not a list; ignored")
    tops = [t if isinstance(t, dict) else {} for t in (raw_tops if isinstance(raw_tops, list) else ())]
    top = top_k([len(t) for t in tops], [k for t in tops for k in t], [v for t in tops for v in t.values()])
    invalid = split.describe_invalid(tokens, "logprobs.tokens")
    return _Sampled(
        ids=split.ids if tokens and split.all_ids else None,
        logprobs=lps,
        top=top,
        texts=split.texts,
        token_strings=split.texts is not None,
        notes=notes,
        invalid_ids=[invalid] if invalid else [],
    )


def _triples(value: Any) -> list[list]:
    """SGLang's ``[logprob, token_id, text]`` entries, padded to three fields."""
    return [
        (e + [None] * 3)[:3] if isinstance(e, list) else [None, None, None]
        for e in (value if isinstance(value, list) else [])
    ]


def _from_sglang_meta(meta: dict) -> _Sampled:
    """SGLang ``meta_info.output_token_logprobs``: ``[logprob, token_id, text]`` tuples."""
    if not isinstance(meta.get("output_token_logprobs"), list):
        return _Sampled()
    entries = _triples(meta["output_token_logprobs"])
    texts = [e[2] if isinstance(e[2], str) else "" for e in entries]
    rows = [_triples(r) for r in meta.get("output_top_logprobs") or ()]
    flat = [a for r in rows for a in r]
    top = top_k([len(r) for r in rows], [a[1] for a in flat], [a[0] for a in flat], [a[2] or "" for a in flat])
    return _Sampled(
        ids=[e[1] for e in entries], logprobs=[e[0] for e in entries], top=top, texts=texts if any(texts) else None
    )


def _fill_tokens(call: Call, prompt, ids, sampled: _Sampled, problems: Problems) -> None:
    call.prompt_ids = token_ids(prompt, "prompt_token_ids", problems)
    sampled_ids = token_ids(ids, "token_ids", problems)
    if sampled_ids is not None:
        call.sampled_ids = sampled_ids
    if sampled.ready is not None:  # built and checked by the decoder (logprob_entries.exact_floats)
        call.sampled_logprobs = sampled.ready
    elif sampled.logprobs is not None:
        call.sampled_logprobs = logprobs(sampled.logprobs, "logprobs", problems, sampled.numbers)
    call.top_k = sampled.top
    if sampled.texts is not None:
        call.token_texts = sampled.texts
    if sampled.token_strings:
        call.add_issue(
            WARN,
            "token_strings",
            "logprob tokens arrived as text, not token_id:N, so they name tokens only by their text "
            "(vLLM: --return-tokens-as-token-ids names them by id); whether the logprobs are raw or "
            "processed is a separate setting (--logprobs-mode), measured by the capture probe",
        )
    problems.malformed.extend(sampled.notes)
    problems.invalid_ids.extend(sampled.invalid_ids)
