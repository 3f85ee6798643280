"""Anthropic Messages, OpenAI Responses and Gemini response bodies, read as chat completions.

Entry point: :func:`as_chat_response` (a dialect body, or the list of its SSE events, as a
chat-completions body; anything else unchanged). A capture proxy that records what the harness
received (not the engine's chat body) leaves an Anthropic ``message``, a Responses ``response``
object, a Gemini ``GenerateContentResponse``, or the list of their SSE events: they carry no token
ids, so each becomes a message-only call that links by the message fallback. Used by the
engine-pair reader; reads the stream's events with ``streaming.chunk_bodies``. docs/formats.md,
"Anthropic Messages and OpenAI Responses bodies".
"""

from __future__ import annotations

import json
from typing import Any

from rollout_graph.core.dialects import (
    ANTHROPIC_STOP,
    anthropic_response_message,
    google_chat_response,
    is_google_response,
    obj,
    responses_response_message,
)
from rollout_graph.ingest.formats.streaming import chunk_bodies

_RESPONSE_DONE = ("response.completed", "response.incomplete", "response.failed")


def is_anthropic_message(body: Any) -> bool:
    """An Anthropic ``message`` response body."""
    return isinstance(body, dict) and body.get("type") == "message" and isinstance(body.get("content"), list)


def is_responses_object(body: Any) -> bool:
    """An OpenAI Responses ``response`` object."""
    return isinstance(body, dict) and body.get("object") == "response" and isinstance(body.get("output"), list)


def _event_types(chunks: list) -> set[str]:
    return {str(c.get("type")) for c in chunk_bodies(chunks) if isinstance(c.get("type"), str)}


def is_dialect_stream(chunks: list) -> bool:
    """A list of Anthropic or Responses SSE event bodies (not chat chunks)."""
    kinds = _event_types(chunks)
    return "message_start" in kinds or any(k.startswith("response.") for k in kinds)


def anthropic_from_events(chunks: list) -> dict:
    """Reassemble Anthropic Messages SSE events into one ``message`` body."""
    message: dict[str, Any] = {"type": "message", "role": "assistant", "content": []}
    blocks: dict[int, dict] = {}
    partial: dict[int, str] = {}
    for event in chunk_bodies(chunks):
        kind = event.get("type")
        if kind == "message_start" and isinstance(event.get("message"), dict):
            message.update({k: v for k, v in event["message"].items() if k != "content"})
        elif kind == "content_block_start" and isinstance(event.get("content_block"), dict):
            blocks[int(event.get("index", len(blocks)))] = dict(event["content_block"])
        elif kind == "content_block_delta" and isinstance(event.get("delta"), dict):
            index = int(event.get("index", 0))
            block = blocks.setdefault(index, {"type": "text", "text": ""})
            delta = event["delta"]
            if delta.get("type") == "text_delta":
                block["text"] = block.get("text", "") + str(delta.get("text", ""))
            elif delta.get("type") == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + str(delta.get("thinking", ""))
            elif delta.get("type") == "input_json_delta":
                partial[index] = partial.get(index, "") + str(delta.get("partial_json", ""))
        elif kind == "message_delta":
            delta = obj(event.get("delta"))
            message.update({k: v for k, v in delta.items() if v is not None})
            if isinstance(event.get("usage"), dict):
                message["usage"] = {**(message.get("usage") or {}), **event["usage"]}
    for index, text in partial.items():
        try:
            blocks[index]["input"] = json.loads(text) if text.strip() else {}
        except ValueError:
            blocks[index]["input"] = text
    message["content"] = [blocks[i] for i in sorted(blocks)]
    return message


def responses_from_events(chunks: list) -> dict:
    """The final ``response`` object of a Responses SSE stream (rebuilt from items when cut)."""
    items: dict[int, dict] = {}
    final: dict | None = None
    for event in chunk_bodies(chunks):
        kind = event.get("type")
        if kind in _RESPONSE_DONE and isinstance(event.get("response"), dict):
            final = event["response"]
        elif kind == "response.output_item.done" and isinstance(event.get("item"), dict):
            items[int(event.get("output_index", len(items)))] = event["item"]
    if final is not None and final.get("output"):
        return final
    body = dict(final or {"object": "response"})
    body["output"] = [items[i] for i in sorted(items)]
    return body


def as_chat_response(response: Any) -> Any:
    """A dialect response (body or event list) as a chat-completions body; anything else unchanged."""
    if is_google_response(response):  # a Gemini answer (core.dialects reads it)
        return google_chat_response([response])
    if isinstance(response, list) and any(is_google_response(c) for c in chunk_bodies(response[:3])):
        return google_chat_response(chunk_bodies(response))
    if isinstance(response, list) and is_dialect_stream(response):
        kinds = _event_types(response)
        response = anthropic_from_events(response) if "message_start" in kinds else responses_from_events(response)
    if is_anthropic_message(response):
        usage = obj(response.get("usage"))
        finish = ANTHROPIC_STOP.get(str(response.get("stop_reason")), response.get("stop_reason"))
        return {
            "object": "chat.completion",
            "id": response.get("id"),
            "model": response.get("model"),
            "choices": [{"index": 0, "message": anthropic_response_message(response), "finish_reason": finish}],
            "usage": {"prompt_tokens": usage.get("input_tokens"), "completion_tokens": usage.get("output_tokens")},
        }
    if is_responses_object(response):
        usage = obj(response.get("usage"))
        details = obj(response.get("incomplete_details"))
        message = responses_response_message(response)
        if details.get("reason") == "max_output_tokens":
            finish = "length"
        else:
            finish = "tool_calls" if message.get("tool_calls") else "stop"
        return {
            "object": "chat.completion",
            "id": response.get("id"),
            "model": response.get("model"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": usage.get("input_tokens"), "completion_tokens": usage.get("output_tokens")},
        }
    return response
