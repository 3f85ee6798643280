"""The Google Gemini API (gemini-cli) <-> chat completions, for the capture proxy.

Where it sits: the proxy (rollout_graph.capture.server) translates each Gemini call with it, so the
engine only ever sees chat completions; the loader reads the recorded bodies with the same functions
(rollout_graph.core.dialects).

Entry points: :func:`parse_path` (``/v1beta/models/<model>:generateContent``,
``:streamGenerateContent``, ``:countTokens``; the model is the path's), :func:`to_chat` (a request as a
chat body), :func:`from_chat` (a chat completion as a ``GenerateContentResponse``),
:class:`StreamTranslator` (a chat stream as Gemini's events: bare ``data:`` events with ``?alt=sse``,
else a JSON array streamed element by element; a tool call goes out whole), :func:`count_request` /
:func:`count_body` (``:countTokens``, unrecorded), :func:`error_body`.

The mapping, field by field: docs/live.md, "What the proxy changes, and what it does not";
docs/formats.md, "Anthropic Messages, OpenAI Responses and Gemini bodies".
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from typing import Any

import orjson

from rollout_graph.core.dialects import (
    google_builtin_tools,
    google_generation_config,
    google_messages,
    google_sampling,
    google_schema,
    google_thinking,
    google_thought_signature,
    google_tool_choice,
    google_tools,
    obj,
)

TRANSLATION = "_rollout_graph_translation"  # the same key as the other dialects (responses.TRANSLATION)
_PATH = re.compile(r"^/(v1|v1beta|v1alpha)/(?:models|tunedModels)/(?P<model>.+):(?P<method>[A-Za-z]+)$")
GENERATE = "generatecontent"
STREAM = "streamgeneratecontent"
COUNT = "counttokens"
FINISH = {"stop": "STOP", "length": "MAX_TOKENS", "content_filter": "SAFETY", "tool_calls": "STOP"}
STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    408: "DEADLINE_EXCEEDED",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


@dataclass(frozen=True)
class GooglePath:
    """What a Gemini path names: the model and the method (lower case)."""

    model: str
    method: str

    @property
    def streamed(self) -> bool:
        """Whether the harness asked for a stream (the method says so, not the body)."""
        return self.method == STREAM


def parse_path(path: str) -> GooglePath | None:
    """``/v1beta/models/gemini-2.5-pro:streamGenerateContent`` -> its model and method; None when
    the path is not a Gemini model call (``models/`` inside the model name is kept as sent)."""
    match = _PATH.match(path)
    if match is None:
        return None
    method = match.group("method").lower()
    if method not in (GENERATE, STREAM, COUNT):
        return None
    return GooglePath(match.group("model"), method)


def _response_format(config: dict[str, Any]) -> dict[str, Any] | None:
    mime = config.get("responseMimeType", config.get("response_mime_type"))
    if not isinstance(mime, str) or mime.lower() != "application/json":
        return None
    schema = next(
        (
            config[k]
            for k in ("responseJsonSchema", "response_json_schema", "responseSchema", "response_schema")
            if k in config
        ),
        None,
    )
    if isinstance(schema, dict) and schema:
        return {"type": "json_schema", "json_schema": {"name": "google_response", "schema": google_schema(schema)}}
    return {"type": "json_object"}


def to_chat(body: dict, model: str, streamed: bool = False) -> dict:
    """A Gemini ``generateContent`` request (model from its path) as a chat-completions request."""
    chat: dict[str, Any] = {"model": model, "messages": google_messages(body, upstream=True)}
    chat.update(google_sampling(body))
    if streamed:
        chat["stream"] = True
    config = google_generation_config(body)
    response_format = _response_format(config)
    if response_format is not None:
        chat["response_format"] = response_format
    logprobs = config.get("logprobs")
    if config.get("responseLogprobs") is True:
        chat["logprobs"] = True
        if isinstance(logprobs, int) and not isinstance(logprobs, bool):
            chat["top_logprobs"] = logprobs
    thinking = google_thinking(body)
    if thinking is not None:
        chat["chat_template_kwargs"] = {"enable_thinking": thinking}
    tools = google_tools(body.get("tools"))
    if tools:
        chat["tools"] = tools
        choice = google_tool_choice(body)
        if choice is not None:
            chat["tool_choice"] = choice
    notes = [
        f"built-in tool {name!r} has no function declaration the engine could follow: not offered"
        for name in google_builtin_tools(body.get("tools"))
    ]
    if body.get("cachedContent"):
        notes.append("cachedContent names a server-side cache the engine does not have: ignored")
    if notes:
        chat[TRANSLATION] = notes  # moved into the record by the proxy, never sent upstream
    return chat


def count_request(body: dict, model: str) -> dict:
    """A ``countTokens`` body (``contents``, or a whole ``generateContentRequest``) as the chat
    request whose prompt is counted."""
    inner = body.get("generateContentRequest", body.get("generate_content_request"))
    request = inner if isinstance(inner, dict) else body
    chat = to_chat(request, str(request.get("model") or model).removeprefix("models/"))
    chat.pop(TRANSLATION, None)
    return chat


def count_body(count: int) -> dict:
    """The ``countTokens`` answer."""
    return {"totalTokens": count, "promptTokensDetails": [{"modality": "TEXT", "tokenCount": count}]}


def _usage(usage: Any) -> dict[str, int]:
    usage = obj(usage)
    prompt, completion = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    out = {"promptTokenCount": prompt, "candidatesTokenCount": completion, "totalTokenCount": prompt + completion}
    cached = obj(usage.get("prompt_tokens_details")).get("cached_tokens")
    if isinstance(cached, int) and cached:
        out["cachedContentTokenCount"] = cached
    return out


def _arguments(arguments: Any) -> Any:
    if not isinstance(arguments, str):
        return arguments if arguments is not None else {}
    if not arguments.strip():
        return {}
    try:
        value = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return {"_raw_arguments": arguments}  # what the model wrote was not JSON: keep it visible
    return value if isinstance(value, dict) else {"value": value}


def _call_part(call_id: str | None, name: str, arguments: Any) -> dict:
    call: dict[str, Any] = {"name": name, "args": _arguments(arguments)}
    if call_id:
        call["id"] = call_id
    return {"functionCall": call}


def _thought(text: str) -> dict:
    return {"text": text, "thought": True, "thoughtSignature": google_thought_signature(text)}


def _finish(choice: dict) -> str:
    return FINISH.get(str(choice.get("finish_reason")), "STOP")


def _response_id(chat_id: Any) -> str:
    return str(chat_id) if chat_id else secrets.token_hex(12)


def from_chat(response: dict, request: dict) -> dict:
    """A chat completion as a Gemini ``GenerateContentResponse``."""
    candidates = []
    calls: list[dict] = []
    for position, choice in enumerate(response.get("choices") or ()):
        if not isinstance(choice, dict):
            continue
        message = obj(choice.get("message"))
        parts: list[dict] = []
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            parts.append(_thought(reasoning))
        if isinstance(message.get("content"), str) and message["content"]:
            parts.append({"text": message["content"]})
        for call in message.get("tool_calls") or ():
            fn = obj(obj(call).get("function"))
            part = _call_part(obj(call).get("id"), str(fn.get("name") or ""), fn.get("arguments"))
            parts.append(part)
            calls.append(part["functionCall"])
        candidates.append(
            {
                "content": {"role": "model", "parts": parts},
                "finishReason": _finish(choice),
                "index": choice.get("index", position),
            }
        )
    out: dict[str, Any] = {
        "candidates": candidates,
        "usageMetadata": _usage(response.get("usage")),
        "modelVersion": response.get("model", request.get("model")),
        "responseId": _response_id(response.get("id")),
    }
    return out


def error_body(status: int, message: str, upstream: Any = None) -> dict:
    """A Google API error object."""
    return {"error": {"code": status, "message": message, "status": STATUS.get(status, "UNKNOWN")}}


class StreamTranslator:
    """Chat chunks in, Gemini stream events out: ``data:`` lines (``alt=sse``) or a JSON array."""

    def __init__(self, request: dict, sse: bool = True) -> None:
        self.request = request
        self.sse = sse
        self.sent = 0  # events sent (a JSON array needs "[" before the first, "," between)
        self.calls: dict[int, dict[str, str]] = {}  # tool calls being streamed, by index
        self.finish: str | None = None
        self.usage: dict | None = None
        self.model: Any = None
        self.response_id: str | None = None

    def _event(self, parts: list[dict], finish: str | None = None, usage: dict | None = None) -> bytes:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        if finish is not None:
            candidate["finishReason"] = finish
        event: dict[str, Any] = {"candidates": [candidate]}
        if usage is not None:
            event["usageMetadata"] = usage
        event["modelVersion"] = self.model if self.model is not None else self.request.get("model")
        event["responseId"] = self.response_id or _response_id(None)
        self.response_id = event["responseId"]
        data = orjson.dumps(event)
        self.sent += 1
        if self.sse:
            return b"data: " + data + b"\r\n\r\n"
        return (b"[" if self.sent == 1 else b",\r\n") + data

    def feed(self, chunk: dict) -> list[bytes]:
        """Events for one chat chunk: text and thoughts at once, tool calls when whole."""
        if self.response_id is None and chunk.get("id"):
            self.response_id = str(chunk["id"])
        if chunk.get("model") is not None:
            self.model = chunk["model"]
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        parts: list[dict] = []
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = obj(choice.get("delta"))
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                parts.append(_thought(reasoning))
            text = delta.get("content")
            if isinstance(text, str) and text:
                parts.append({"text": text})
            for call in delta.get("tool_calls") or ():
                if not isinstance(call, dict):
                    continue
                n = call.get("index", 0)
                state = self.calls.setdefault(n if type(n) is int else 0, {"id": "", "name": "", "arguments": ""})
                if call.get("id"):
                    state["id"] = str(call["id"])
                fn = obj(call.get("function"))
                if isinstance(fn.get("name"), str):
                    state["name"] += fn["name"]
                if isinstance(fn.get("arguments"), str):
                    state["arguments"] += fn["arguments"]
            if choice.get("finish_reason") is not None:
                self.finish = _finish(choice)
        return [self._event(parts)] if parts else []

    def close(self) -> list[bytes]:
        """The whole tool calls, then the last event with ``finishReason`` and ``usageMetadata``."""
        parts = [_call_part(s["id"] or None, s["name"], s["arguments"]) for _, s in sorted(self.calls.items())]
        out = [self._event(parts, self.finish or "STOP", _usage(self.usage))]
        if not self.sse:
            out.append(b"]")
        return out

    def fail(self, message: str) -> list[bytes]:
        """An error event (Google ends a broken stream with an error object)."""
        data = orjson.dumps(error_body(500, message))
        if self.sse:
            return [b"data: " + data + b"\r\n\r\n"]
        self.sent += 1
        return [(b"[" if self.sent == 1 else b",\r\n") + data + b"]"]
