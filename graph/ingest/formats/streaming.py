"""Reassemble a captured SSE stream (a list of chunk bodies) into one non-streaming body.

Entry points: :func:`reassemble` (chat and completions chunks -> one body, with notes on what
could not be merged) and :func:`chunk_bodies` (the chunks' JSON objects, shared with
``dialect_bodies``). Used by the engine-pair reader. docs/formats.md, "Reassembled streams".
"""

from __future__ import annotations

from typing import Any

from rollout_graph.ingest import limits
from rollout_graph.ingest.files.json_values import parse_json

DONE = "[DONE]"
UNFINISHED = (
    "the stream ends without a finish_reason or [DONE]: it may have been cut, so its sampled tokens may be incomplete"
)


def chunk_bodies(chunks: list, done: list[bool] | None = None) -> list[dict]:
    """The JSON objects of a stream's chunks (``data:`` lines parsed; ``[DONE]`` noted in ``done``)."""
    bodies = []
    for chunk in chunks:
        if isinstance(chunk, (str, bytes)):
            text = chunk.decode("utf-8", "replace") if isinstance(chunk, bytes) else chunk
            text = text.strip().removeprefix("data:").strip()
            if text == DONE and done is not None:
                done.append(True)
            if not text or text == DONE:
                continue
            try:
                chunk = parse_json(text.encode("utf-8", "replace"))
            except (ValueError, RecursionError):
                continue
        if isinstance(chunk, dict):
            bodies.append(chunk)
    return bodies


def _merge_tool_calls(acc: list[dict], deltas: list, notes: list[str]) -> None:
    max_index = limits.active().max_tool_index
    for delta in deltas:
        if not isinstance(delta, dict):
            continue
        index = delta.get("index", len(acc))
        if type(index) is not int or not 0 <= index <= max_index:
            notes.append(
                f"stream tool_calls index {str(index)[:40]!r} is not an integer in 0..{max_index} "
                "(limit max_tool_index); that delta is dropped"
            )
            continue
        while len(acc) <= index:
            acc.append({"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
        call = acc[index]
        if delta.get("id"):
            call["id"] = str(delta["id"])
        fn = delta["function"] if isinstance(delta.get("function"), dict) else {}
        name = fn.get("name")
        if isinstance(name, str):
            call["function"]["name"] += name
        elif name is not None:
            notes.append(f"stream tool name is a {type(name).__name__}, not text; dropped")
        if isinstance(fn.get("arguments"), str):
            call["function"]["arguments"] += fn["arguments"]


def _merge_choice(acc: dict, choice: dict, notes: list[str]) -> None:
    for key in ("token_ids", "output_ids"):
        if isinstance(choice.get(key), list):
            acc.setdefault(key, []).extend(choice[key])
    if choice.get("prompt_token_ids") is not None:
        acc.setdefault("prompt_token_ids", choice["prompt_token_ids"])
    if choice.get("finish_reason") is not None:
        acc["finish_reason"] = choice["finish_reason"]
    if isinstance(choice.get("text"), str):
        acc["text"] = acc.get("text", "") + choice["text"]
    delta = choice.get("delta")
    if isinstance(delta, dict):
        message = acc.setdefault("message", {"role": "assistant"})
        if delta.get("role"):
            message["role"] = delta["role"]
        for key in ("content", "reasoning_content", "reasoning"):  # vLLM 0.32 streams reasoning as "reasoning"
            if isinstance(delta.get(key), str):
                message[key] = (message.get(key) or "") + delta[key]
        if isinstance(delta.get("tool_calls"), list):
            _merge_tool_calls(message.setdefault("tool_calls", []), delta["tool_calls"], notes)
    logprobs = choice.get("logprobs")
    if isinstance(logprobs, dict):
        merged = acc.setdefault("logprobs", {})
        for key in ("content", "tokens", "token_logprobs", "top_logprobs"):
            if isinstance(logprobs.get(key), list):
                merged.setdefault(key, []).extend(logprobs[key])


def reassemble(chunks: list) -> dict[str, Any]:
    """Chunk bodies -> a body shaped like the non-streaming response.

    Prompt ids come from the first chunk that has them; ``token_ids``, text, tool-call
    arguments and logprob entries are concatenated in order; the last finish reason and usage win.
    Deltas that cannot be merged (a tool-call index that is not a small integer, a tool name that
    is not text) are dropped and described under ``_stream_notes``, and so is a stream that ends
    with no finish reason and no ``[DONE]`` (a cut stream must not load as silently trainable).
    """
    body: dict[str, Any] = {}
    choices: dict[int, dict] = {}
    notes: list[str] = []
    done: list[bool] = []
    for chunk in chunk_bodies(chunks, done):
        for key in ("id", "model", "created", "usage", "meta_info"):
            if chunk.get(key) is not None:
                body[key] = chunk[key]
        if chunk.get("prompt_token_ids") is not None:
            body.setdefault("prompt_token_ids", chunk["prompt_token_ids"])
        if str(chunk.get("object", "")).startswith("chat"):
            body["object"] = "chat.completion"
        chunk_choices = chunk.get("choices")
        if chunk_choices is not None and not isinstance(chunk_choices, list):
            notes.append(f"a stream chunk's choices is a {type(chunk_choices).__name__}, not a list; ignored")
            continue
        for choice in chunk_choices or ():
            if isinstance(choice, dict):
                index = choice.get("index", 0)
                if type(index) is not int or not 0 <= index <= limits.active().max_tool_index:
                    notes.append(f"a stream choice index {str(index)[:40]!r} is not a small integer; read as 0")
                    index = 0
                _merge_choice(choices.setdefault(index, {}), choice, notes)
    body["choices"] = [choices[i] for i in sorted(choices)]
    if choices and not done and not any(c.get("finish_reason") is not None for c in choices.values()):
        notes.append(UNFINISHED)
    if notes:
        body["_stream_notes"] = notes
    return body
