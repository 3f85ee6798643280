"""OpenAI Responses (``POST /v1/responses``, codex) <-> chat completions, for the capture proxy.

Where it sits: the proxy (rollout_graph.capture.server) translates each Responses call with it, so the
engine only ever sees chat completions; the loader reads the recorded bodies with the same functions
(rollout_graph.core.dialects).

Entry points: :func:`to_chat` (a Responses request as a chat body: messages by
:func:`~rollout_graph.core.dialects.responses_messages`, tools by :func:`flatten_tools`),
:func:`from_chat` (a chat completion as a ``response`` object), :class:`StreamTranslator` (a chat
stream as the Responses events, ``response.created`` ... ``response.completed``, or
``response.failed``), :func:`error_body`. What a translation changed (a ``namespace`` tool flattened,
a hosted tool not offered) goes under :data:`TRANSLATION`, which the proxy moves into the record.

The rules (reasoning round trips, namespace tools, a length stop): docs/live.md, "What the proxy
changes, and what it does not".
"""

from __future__ import annotations

import secrets
import time
from typing import Any

import orjson

from rollout_graph.core.dialects import custom_tool_names, encode_reasoning, obj, responses_messages, responses_tools

_PASSED = ("model", "temperature", "top_p", "stream", "parallel_tool_calls", "seed", "user")
TRANSLATION = "_rollout_graph_translation"  # notes on what the translation changed (never sent upstream)
NAMESPACE_SEP = "__"


def flatten_tools(tools: Any) -> tuple[list[dict] | None, dict[str, tuple[str, str]], list[str]]:
    """Responses tools as chat tools: (chat tools, chat name -> (namespace, inner name) for tools
    that came from a ``namespace`` tool, notes on every change to what the harness offered)."""
    if not isinstance(tools, list):
        return None, {}, []
    flat: list[dict] = []
    namespaced: dict[str, tuple[str, str]] = {}
    notes: list[str] = []
    taken = {str(t.get("name")) for t in tools if isinstance(t, dict) and t.get("type") in ("function", "custom")}
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        kind = tool.get("type")
        if kind in ("function", "custom"):
            flat.append(tool)
        elif kind == "namespace":
            space = str(tool.get("name", ""))
            names = []
            for inner in tool.get("tools") or ():
                if not isinstance(inner, dict) or inner.get("type", "function") not in ("function", "custom"):
                    kind_inner = inner.get("type") if isinstance(inner, dict) else type(inner).__name__
                    notes.append(f"namespace {space!r}: a {kind_inner!r} tool has no chat equivalent; not offered")
                    continue
                name = str(inner.get("name", ""))
                chat_name = name if name not in taken else f"{space}{NAMESPACE_SEP}{name}"
                taken.add(chat_name)
                namespaced[chat_name] = (space, name)
                names.append(chat_name)
                flat.append({**inner, "type": inner.get("type", "function"), "name": chat_name})
            notes.append(f"namespace tool {space!r} flattened into {len(names)} chat tools: {', '.join(names)}")
        else:
            label = tool.get("name") or kind
            notes.append(
                f"tool {label!r} of type {kind!r} has no chat-completions equivalent: not offered to the engine"
            )
    return responses_tools(flat), namespaced, notes


def _custom_names(tools: Any) -> set[str]:
    """Freeform tool names, inside namespaces too (by their chat name)."""
    names = custom_tool_names(tools)
    _, namespaced, _ = flatten_tools(tools)
    for chat_name, (space, inner) in namespaced.items():
        for tool in tools or ():
            if isinstance(tool, dict) and tool.get("type") == "namespace" and tool.get("name") == space:
                if any(
                    isinstance(t, dict) and t.get("name") == inner and t.get("type") == "custom"
                    for t in tool.get("tools") or ()
                ):
                    names.add(chat_name)
    return names


def _tool_choice(choice: Any) -> Any:
    if isinstance(choice, str):
        return choice if choice in ("auto", "none", "required") else None
    if isinstance(choice, dict) and choice.get("type") == "function":
        return {"type": "function", "function": {"name": choice.get("name", "")}}
    return None


def to_chat(body: dict) -> dict:
    """A Responses request as a chat-completions request."""
    chat: dict[str, Any] = {k: body[k] for k in _PASSED if k in body}
    chat["messages"] = responses_messages(body, upstream=True)
    if body.get("max_output_tokens") is not None:
        chat["max_tokens"] = body["max_output_tokens"]
    reasoning = body.get("reasoning")
    if isinstance(reasoning, dict) and reasoning:
        effort = reasoning.get("effort")
        chat["chat_template_kwargs"] = {"enable_thinking": not (isinstance(effort, str) and effort.lower() == "none")}
    tools, _, notes = flatten_tools(body.get("tools"))
    if tools:
        chat["tools"] = tools
        choice = _tool_choice(body.get("tool_choice"))
        if choice is not None:
            chat["tool_choice"] = choice
    if notes:
        chat[TRANSLATION] = notes
    return chat


def _new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def _usage(usage: Any) -> dict[str, Any]:
    usage = usage if isinstance(usage, dict) else {}
    i, o = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    return {
        "input_tokens": i,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": o,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": i + o,
    }


def _shell(request: dict, response_id: str, model: Any, created: float) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response",
        "created_at": int(created),
        "status": "in_progress",
        "model": model if model is not None else request.get("model"),
        "output": [],
        "parallel_tool_calls": request.get("parallel_tool_calls", True),
        "tool_choice": request.get("tool_choice", "auto"),
        "tools": request.get("tools") or [],
        "instructions": request.get("instructions"),
        "error": None,
        "incomplete_details": None,
        "usage": None,
    }


def _finish(response: dict[str, Any], finish_reason: Any, usage: Any, request: dict) -> dict[str, Any]:
    """Final status: ``incomplete`` at a length stop only when the request set ``max_output_tokens``."""
    if finish_reason == "length" and request.get("max_output_tokens") is not None:
        response["status"] = "incomplete"
        response["incomplete_details"] = {"reason": "max_output_tokens"}
    else:
        response["status"] = "completed"
    response["usage"] = _usage(usage)
    return response


def _text_item(item_id: str, text: str, status: str = "completed") -> dict:
    return {
        "type": "message",
        "id": item_id,
        "status": status,
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}] if status == "completed" else [],
    }


def _call_item(
    item_id: str, call_id: str, name: str, arguments: str, status: str = "completed", namespace: str | None = None
) -> dict:
    item = {
        "type": "function_call",
        "id": item_id,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": status,
    }
    if namespace is not None:
        item["namespace"] = namespace
    return item


def _named(name: str, request: dict) -> tuple[str, str | None]:
    """A chat tool name as the harness offered it: (inner name, namespace or None)."""
    _, namespaced, _ = flatten_tools(request.get("tools"))
    if name in namespaced:
        space, inner = namespaced[name]
        return inner, space
    return name, None


def custom_input(arguments: str) -> str:
    """A freeform tool's input from the one-field arguments the engine wrote (kept whole if not that)."""
    try:
        value = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return arguments
    return value["input"] if isinstance(value, dict) and isinstance(value.get("input"), str) else arguments


def _custom_item(item_id: str, call_id: str, name: str, text: str, status: str = "completed") -> dict:
    return {
        "type": "custom_tool_call",
        "id": item_id,
        "call_id": call_id,
        "name": name,
        "input": text,
        "status": status,
    }


def _reasoning_item(item_id: str, text: str) -> dict:
    # encrypted_content carries the text back when a harness returns the item without its content
    # (codex with store=false keeps only it); the proxy reads it back (responses_reasoning_text).
    return {
        "type": "reasoning",
        "id": item_id,
        "summary": [],
        "content": [{"type": "reasoning_text", "text": text}],
        "encrypted_content": encode_reasoning(text),
    }


def from_chat(response: dict, request: dict) -> dict:
    """A chat completion as a Responses ``response`` object."""
    choices = response.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], dict) else {}
    message = obj(choice.get("message"))
    out = _shell(request, f"resp_{response.get('id') or secrets.token_hex(12)}", response.get("model"), time.time())
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        out["output"].append(_reasoning_item(_new_id("rs"), reasoning))
    if isinstance(message.get("content"), str) and message["content"]:
        out["output"].append(_text_item(_new_id("msg"), message["content"]))
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        arguments = fn.get("arguments")
        arguments = arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode()
        name, call_id = fn.get("name", ""), call.get("id") or _new_id("call")
        if name in _custom_names(request.get("tools")):
            inner, _space = _named(name, request)
            out["output"].append(_custom_item(_new_id("ctc"), call_id, inner, custom_input(arguments)))
        else:
            inner, space = _named(name, request)
            out["output"].append(_call_item(_new_id("fc"), call_id, inner, arguments, namespace=space))
    return _finish(out, choice.get("finish_reason"), response.get("usage"), request)


def error_body(status: int, message: str, upstream: Any = None) -> dict:
    """An OpenAI error object for an upstream failure."""
    return {"error": {"message": message, "type": "upstream_error", "param": None, "code": str(status)}}


class StreamTranslator:
    """Chat chunks in, Responses SSE events out (each with its ``sequence_number``)."""

    def __init__(self, request: dict) -> None:
        self.request = request
        self.response: dict[str, Any] | None = None
        self.sequence = 0
        self.items: list[dict] = []  # finished and open output items, in order
        self.open: dict | None = None  # the item being streamed
        self.open_key: str | None = None  # "text", "reasoning", "tool:<n>"
        self.finish_reason: Any = None
        self.usage: Any = None
        self.custom = _custom_names(request.get("tools"))

    def _event(self, kind: str, **data: Any) -> bytes:
        payload = {"type": kind, "sequence_number": self.sequence, **data}
        self.sequence += 1
        return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"

    def _start(self, chunk: dict) -> list[bytes]:
        if self.response is not None:
            return []
        stamp = chunk.get("created")
        created = float(stamp) if isinstance(stamp, (int, float)) else time.time()
        self.response = _shell(
            self.request, f"resp_{chunk.get('id') or secrets.token_hex(12)}", chunk.get("model"), created
        )
        snapshot = dict(self.response)
        return [
            self._event("response.created", response=snapshot),
            self._event("response.in_progress", response=snapshot),
        ]

    def _open_item(self, key: str, item: dict) -> list[bytes]:
        out = self._close_item()
        self.open, self.open_key = item, key
        self.items.append(item)
        index = len(self.items) - 1
        out.append(self._event("response.output_item.added", output_index=index, item=dict(item)))
        if item["type"] == "message":
            part = {"type": "output_text", "text": "", "annotations": []}
            out.append(
                self._event(
                    "response.content_part.added", item_id=item["id"], output_index=index, content_index=0, part=part
                )
            )
        return out

    def _close_item(self) -> list[bytes]:
        item = self.open
        if item is None:
            return []
        self.open, self.open_key = None, None
        index = len(self.items) - 1
        out = []
        if item["type"] == "message":
            text = item.pop("_text", "")
            part = {"type": "output_text", "text": text, "annotations": []}
            out.append(
                self._event(
                    "response.output_text.done", item_id=item["id"], output_index=index, content_index=0, text=text
                )
            )
            out.append(
                self._event(
                    "response.content_part.done", item_id=item["id"], output_index=index, content_index=0, part=part
                )
            )
            item.update(_text_item(item["id"], text))
        elif item["type"] == "reasoning":
            text = item.pop("_text", "")
            out.append(
                self._event(
                    "response.reasoning_text.done", item_id=item["id"], output_index=index, content_index=0, text=text
                )
            )
            item.update(_reasoning_item(item["id"], text))
        elif item["type"] == "custom_tool_call":
            # The engine wrote JSON arguments; the freeform input is known only once they are whole.
            text = custom_input(item.pop("_arguments", ""))
            item["input"] = text
            out.append(
                self._event("response.custom_tool_call_input.delta", item_id=item["id"], output_index=index, delta=text)
            )
            out.append(
                self._event("response.custom_tool_call_input.done", item_id=item["id"], output_index=index, input=text)
            )
            item["status"] = "completed"
        else:
            out.append(
                self._event(
                    "response.function_call_arguments.done",
                    item_id=item["id"],
                    output_index=index,
                    arguments=item["arguments"],
                )
            )
            item["status"] = "completed"
        out.append(self._event("response.output_item.done", output_index=index, item=dict(item)))
        return out

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
                if self.open_key != "reasoning":
                    out += self._open_item("reasoning", {"type": "reasoning", "id": _new_id("rs"), "summary": []})
                assert self.open is not None
                self.open["_text"] = self.open.get("_text", "") + reasoning
                index = len(self.items) - 1
                out.append(
                    self._event(
                        "response.reasoning_text.delta",
                        item_id=self.open["id"],
                        output_index=index,
                        content_index=0,
                        delta=reasoning,
                    )
                )
            text = delta.get("content")
            if isinstance(text, str) and text:
                if self.open_key != "text":
                    out += self._open_item("text", _text_item(_new_id("msg"), "", status="in_progress"))
                assert self.open is not None
                self.open["_text"] = self.open.get("_text", "") + text
                index = len(self.items) - 1
                out.append(
                    self._event(
                        "response.output_text.delta",
                        item_id=self.open["id"],
                        output_index=index,
                        content_index=0,
                        delta=text,
                        logprobs=[],
                    )
                )
            for call in delta.get("tool_calls") or ():
                if not isinstance(call, dict):
                    continue
                n = call.get("index", 0)
                fn = obj(call.get("function"))
                if self.open_key != f"tool:{n}":
                    name, call_id = fn.get("name") or "", call.get("id") or _new_id("call")
                    inner, space = _named(name, self.request)
                    if name in self.custom:
                        item = _custom_item(_new_id("ctc"), call_id, inner, "", "in_progress")
                    else:
                        item = _call_item(_new_id("fc"), call_id, inner, "", "in_progress", namespace=space)
                    out += self._open_item(f"tool:{n}", item)
                assert self.open is not None
                piece = fn.get("arguments")
                if isinstance(piece, str) and piece and self.open["type"] == "custom_tool_call":
                    self.open["_arguments"] = self.open.get("_arguments", "") + piece
                elif isinstance(piece, str) and piece:
                    self.open["arguments"] += piece
                    out.append(
                        self._event(
                            "response.function_call_arguments.delta",
                            item_id=self.open["id"],
                            output_index=len(self.items) - 1,
                            delta=piece,
                        )
                    )
            if choice.get("finish_reason") is not None:
                self.finish_reason = choice["finish_reason"]
        return out

    def close(self) -> list[bytes]:
        """Close the open item, then ``response.completed`` (or ``response.incomplete`` at the length cap)."""
        out = self._start({})
        out += self._close_item()
        assert self.response is not None
        final = _finish(dict(self.response), self.finish_reason, self.usage, self.request)
        final["output"] = [dict(item) for item in self.items]
        kind = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
        out.append(self._event(kind, response=final))
        return out

    def fail(self, message: str) -> list[bytes]:
        """A ``response.failed`` event carrying the error."""
        out = self._start({})
        assert self.response is not None
        failed = dict(self.response)
        failed["status"] = "failed"
        failed["error"] = {"code": "server_error", "message": message}
        out.append(self._event("response.failed", response=failed))
        return out
