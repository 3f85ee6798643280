"""Anthropic Messages (``POST /v1/messages``, Claude Code) <-> chat completions.

Requests: ``system`` (string or text blocks) and ``system``-role entries become system messages,
``tool_use`` / ``tool_result`` blocks become ``tool_calls`` / ``tool`` messages
(:func:`rollout_graph.core.dialects.anthropic_messages`), ``stop_sequences`` becomes ``stop``, tool
definitions and ``tool_choice`` are mapped, ``thinking: {type: enabled | adaptive}`` switches the
template's ``enable_thinking`` on. Responses: a chat completion becomes a ``message`` with
``text`` / ``tool_use`` / ``thinking`` blocks (the engine's ``reasoning_content`` or ``reasoning``,
signed with :func:`~rollout_graph.core.dialects.reasoning_signature`, so a harness that sends the
block back finds a signature); a chat stream becomes the Messages SSE event sequence
(``message_start``, ``content_block_start`` / ``_delta`` / ``_stop`` with a ``signature_delta``
closing a thinking block, ``message_delta``, ``message_stop``), a broken stream an ``error`` event.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

import orjson

from rollout_graph.capture.responses import TRANSLATION
from rollout_graph.core.dialects import anthropic_messages, anthropic_tools, obj, reasoning_signature

STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "function_call": "tool_use"}
_PASSED = ("model", "max_tokens", "temperature", "top_p", "top_k", "stream")
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def _tool_choice(choice: Any) -> Any:
    if not isinstance(choice, dict):
        return None
    kind = choice.get("type")
    if kind == "tool":
        return {"type": "function", "function": {"name": choice.get("name", "")}}
    return {"auto": "auto", "any": "required", "none": "none"}.get(str(kind))


def to_chat(body: dict) -> dict:
    """An Anthropic Messages request as a chat-completions request."""
    chat: dict[str, Any] = {k: body[k] for k in _PASSED if k in body}
    chat["messages"] = anthropic_messages(body, upstream=True)
    if chat["messages"] and chat["messages"][-1].get("role") == "assistant":
        # A prefilled answer: the model continues it (vLLM's options for exactly this).
        chat["continue_final_message"] = True
        chat["add_generation_prompt"] = False
    if isinstance(body.get("stop_sequences"), list) and body["stop_sequences"]:
        chat["stop"] = body["stop_sequences"]
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive", "disabled"):
        chat["chat_template_kwargs"] = {"enable_thinking": thinking["type"] != "disabled"}
    tools = anthropic_tools(body.get("tools"))
    if tools:
        chat["tools"] = tools
        choice = _tool_choice(body.get("tool_choice"))
        if choice is not None:
            chat["tool_choice"] = choice
        if isinstance(body.get("tool_choice"), dict) and body["tool_choice"].get("disable_parallel_tool_use"):
            chat["parallel_tool_calls"] = False
    dropped = [
        f"server tool {t.get('name') or t.get('type')!r} ({t.get('type')}) has no schema the engine could follow: not offered"
        for t in body.get("tools") or ()
        if isinstance(t, dict) and "input_schema" not in t
    ]
    if dropped:
        chat[TRANSLATION] = dropped  # moved into the record by the proxy, never sent upstream
    return chat


def _input(arguments: Any) -> Any:
    if not isinstance(arguments, str):
        return arguments if arguments is not None else {}
    try:
        return json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return {"_raw_arguments": arguments}  # what the model wrote was not JSON: keep it visible


def _stop(choice: dict, request: dict) -> tuple[str, str | None]:
    finish = choice.get("finish_reason")
    matched = choice.get("stop_reason")  # vLLM: the stop string that ended the text, if any
    if finish == "stop" and isinstance(matched, str) and matched in (request.get("stop_sequences") or ()):
        return "stop_sequence", matched
    return STOP_REASONS.get(str(finish), "end_turn"), None


def _usage(usage: Any) -> dict[str, int]:
    usage = usage if isinstance(usage, dict) else {}
    return {
        "input_tokens": int(usage.get("prompt_tokens") or 0),
        "output_tokens": int(usage.get("completion_tokens") or 0),
    }


def _message_id(chat_id: Any) -> str:
    return f"msg_{chat_id}" if chat_id else f"msg_{secrets.token_hex(12)}"


def from_chat(response: dict, request: dict) -> dict:
    """A chat completion as an Anthropic ``message``."""
    choices = response.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], dict) else {}
    message = obj(choice.get("message"))
    content: list[dict] = []
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        content.append({"type": "thinking", "thinking": reasoning, "signature": reasoning_signature(reasoning)})
    if isinstance(message.get("content"), str) and message["content"]:
        content.append({"type": "text", "text": message["content"]})
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        content.append(
            {
                "type": "tool_use",
                "id": call.get("id") or f"toolu_{secrets.token_hex(12)}",
                "name": fn.get("name", ""),
                "input": _input(fn.get("arguments")),
            }
        )
    stop_reason, stop_sequence = _stop(choice, request)
    return {
        "id": _message_id(response.get("id")),
        "type": "message",
        "role": "assistant",
        "model": response.get("model", request.get("model")),
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": stop_sequence,
        "usage": _usage(response.get("usage")),
    }


def error_body(status: int, message: str, upstream: Any = None) -> dict:
    """An Anthropic error object for an upstream failure."""
    kind = ERROR_TYPES.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


def _event(name: str, data: dict) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


class StreamTranslator:
    """Chat chunks in, Anthropic Messages SSE events out."""

    def __init__(self, request: dict) -> None:
        self.request = request
        self.started = False
        self.index = -1
        self.open_kind: str | None = None  # "text", "thinking", or "tool:<n>"
        self.finish: dict = {}
        self.usage: dict = {}
        self.tool_ids: dict[int, str] = {}
        self.thinking: list[str] = []  # the open thinking block's text (its signature is sent at its end)

    def _start(self, chunk: dict) -> list[bytes]:
        if self.started:
            return []
        self.started = True
        message: dict[str, Any] = {
            "id": _message_id(chunk.get("id")),
            "type": "message",
            "role": "assistant",
            "model": chunk.get("model", self.request.get("model")),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            # The engine's prompt ids (a capture field) give the prompt's size up front.
            "usage": {"input_tokens": len(chunk.get("prompt_token_ids") or ()), "output_tokens": 0},
        }
        return [
            _event("message_start", {"type": "message_start", "message": message}),
            _event("ping", {"type": "ping"}),
        ]

    def _open(self, kind: str, block: dict) -> list[bytes]:
        out = self._close_block()
        self.index += 1
        self.open_kind = kind
        out.append(
            _event("content_block_start", {"type": "content_block_start", "index": self.index, "content_block": block})
        )
        return out

    def _close_block(self) -> list[bytes]:
        if self.open_kind is None:
            return []
        out = []
        if self.open_kind == "thinking":
            signature = reasoning_signature("".join(self.thinking))
            out.append(self._delta({"type": "signature_delta", "signature": signature}))
            self.thinking = []
        self.open_kind = None
        out.append(_event("content_block_stop", {"type": "content_block_stop", "index": self.index}))
        return out

    def _delta(self, delta: dict) -> bytes:
        return _event("content_block_delta", {"type": "content_block_delta", "index": self.index, "delta": delta})

    def feed(self, chunk: dict) -> list[bytes]:
        """Events for one chat chunk."""
        out = self._start(chunk)
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = obj(choice.get("delta"))
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                if self.open_kind != "thinking":
                    out += self._open("thinking", {"type": "thinking", "thinking": "", "signature": ""})
                out.append(self._delta({"type": "thinking_delta", "thinking": reasoning}))
                self.thinking.append(reasoning)
            text = delta.get("content")
            if isinstance(text, str) and text:
                if self.open_kind != "text":
                    out += self._open("text", {"type": "text", "text": ""})
                out.append(self._delta({"type": "text_delta", "text": text}))
            for call in delta.get("tool_calls") or ():
                if not isinstance(call, dict):
                    continue
                n = call.get("index", 0)
                fn = obj(call.get("function"))
                if self.open_kind != f"tool:{n}":
                    tool_id = call.get("id") or self.tool_ids.get(n) or f"toolu_{secrets.token_hex(12)}"
                    self.tool_ids[n] = tool_id
                    block: dict[str, Any] = {
                        "type": "tool_use",
                        "id": tool_id,
                        "name": fn.get("name") or "",
                        "input": {},
                    }
                    out += self._open(f"tool:{n}", block)
                if isinstance(fn.get("arguments"), str) and fn["arguments"]:
                    out.append(self._delta({"type": "input_json_delta", "partial_json": fn["arguments"]}))
            if choice.get("finish_reason") is not None:
                self.finish = choice
        return out

    def close(self) -> list[bytes]:
        """Close the open block, then ``message_delta`` (stop reason, usage) and ``message_stop``."""
        out = self._start({})
        out += self._close_block()
        stop_reason, stop_sequence = _stop(self.finish, self.request)
        usage = _usage(self.usage)
        out.append(
            _event(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence},
                    "usage": usage,
                },
            )
        )
        out.append(_event("message_stop", {"type": "message_stop"}))
        return out

    def fail(self, message: str) -> list[bytes]:
        """An ``error`` event, as the Messages API sends when a stream breaks."""
        return [_event("error", error_body(500, message))]
