"""The four API dialects a harness may speak, read as chat-completions messages (pure).

Where it sits: records -> graph. The loader's message fallback and the chat view read every request
through it, and the capture proxy's translations (rollout_graph.capture.anthropic, .responses,
.google) build on it, so both share one reading.

Entry points: :func:`request_dialect` / :func:`dialect_of` (which dialect a body speaks);
:func:`chat_messages`, :func:`chat_tools`, :func:`chat_sampling` (any dialect as chat); per dialect
the ``anthropic_*``, ``responses_*`` and ``google_*`` readers (:func:`google_chat_response`: a Gemini
answer or stream as a chat completion); the deterministic reasoning markers
(:func:`reasoning_signature`, :func:`encode_reasoning` / :func:`decode_reasoning`,
:func:`google_thought_signature`). ``upstream=True`` gives what a chat template accepts
(``developer`` becomes ``system``); without it the roles stay as sent, for display and linking.

Each dialect's shapes: docs/formats.md, "Anthropic Messages, OpenAI Responses and Gemini bodies";
reasoning round trips: docs/live.md, "What the proxy changes, and what it does not".
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from operator import itemgetter
from typing import Any

CHAT = "chat"
ANTHROPIC = "anthropic"
RESPONSES = "responses"
GOOGLE = "google"
# The dialects the capture proxy translates to chat completions for the engine.
TRANSLATED = (ANTHROPIC, RESPONSES, GOOGLE)


def request_dialect(body: dict[str, Any]) -> str:
    """Which dialect a request body is written in (chat when nothing else fits)."""
    if "input" in body and "messages" not in body:
        return RESPONSES
    if "contents" in body and "messages" not in body:
        return GOOGLE
    if "messages" in body and ("system" in body or _has_blocks(body.get("messages"), ANTHROPIC_BLOCKS)):
        return ANTHROPIC
    if "messages" in body and "max_tokens" in body and "anthropic_version" in body:
        return ANTHROPIC
    return CHAT


def dialect_of(body: dict[str, Any], recorded: str | None) -> str:
    """The dialect a record names (a capture record's ``dialect``), else the detected one.

    Pass the result as ``dialect`` to :func:`chat_messages`, :func:`chat_tools` and
    :func:`chat_sampling` to detect it once (the detection scans the messages for blocks).
    """
    if recorded in TRANSLATED:
        return recorded
    if recorded in (CHAT, "completions"):
        return CHAT
    return request_dialect(body)


ANTHROPIC_BLOCKS = ("tool_use", "tool_result", "thinking", "redacted_thinking")


_NOT_BLOCKS = frozenset({str, type(None)})  # content types that hold no block
_CONTENT = itemgetter("content")


def _has_blocks(messages: Any, kinds: tuple[str, ...]) -> bool:
    if not isinstance(messages, list):
        return False
    try:  # every message an object holding a text (or null) content, checked in one pass
        if _NOT_BLOCKS.issuperset(map(type, map(_CONTENT, messages))):
            return False
    except (KeyError, TypeError):  # a message without content, or not an object: one by one
        pass
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and any(isinstance(b, dict) and b.get("type") in kinds for b in content):
            return True
    return False


def obj(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (records are untrusted)."""
    return value if isinstance(value, dict) else {}


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# --- reasoning markers ---------------------------------------------------------------------------

REASONING_PREFIX = "rg1:"  # encrypted_content the proxy gave out: the reasoning text, base64url
_UPSTREAM_REASONING_PREFIX = "oe:"  # OpenEnv's capture proxy spells it so; read back the same way


def reasoning_signature(text: str) -> str:
    """The signature the proxy gives an Anthropic ``thinking`` block: deterministic, opaque to the
    harness, never checked (the proxy is the API on both ends)."""
    if not text:
        return ""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return "rg_" + base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


def google_thought_signature(text: str) -> str:
    """A Gemini ``thoughtSignature`` (a bytes field: standard padded base64) for proxy-made thoughts."""
    return base64.b64encode(reasoning_signature(text).encode("ascii")).decode("ascii") if text else ""


def encode_reasoning(text: str) -> str:
    """Reasoning as a Responses ``encrypted_content`` the proxy reads back (:func:`decode_reasoning`)."""
    return REASONING_PREFIX + base64.urlsafe_b64encode(text.encode("utf-8")).decode("ascii") if text else ""


def decode_reasoning(encrypted: Any) -> str:
    """The text of an ``encrypted_content`` the proxy (or OpenEnv's) gave out; "" for any other."""
    if not isinstance(encrypted, str):
        return ""
    for prefix in (REASONING_PREFIX, _UPSTREAM_REASONING_PREFIX):
        if encrypted.startswith(prefix):
            try:
                return base64.urlsafe_b64decode(encrypted[len(prefix) :].encode("ascii")).decode("utf-8")
            except (ValueError, binascii.Error, UnicodeDecodeError):
                return ""
    return ""


def responses_reasoning_text(item: dict[str, Any]) -> str:
    """A Responses ``reasoning`` item's text: its content, else its summary, else its
    ``encrypted_content`` when the proxy made it."""
    for key in ("content", "summary"):
        text = "\n".join(
            b["text"]
            for b in item.get(key) or ()
            if isinstance(b, dict) and isinstance(b.get("text"), str) and b["text"]
        )
        if text:
            return text
    return decode_reasoning(item.get("encrypted_content"))


def block_text(content: Any, sep: str = "\n") -> str:
    """The text of a string or of a list of text blocks (``text``, ``input_text``, ``output_text``)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
        return sep.join(parts)
    return _dumps(content)


def _image_part(block: dict[str, Any]) -> dict[str, Any] | None:
    source = obj(block.get("source"))
    if source.get("type") == "base64" and isinstance(source.get("data"), str):
        url = f"data:{source.get('media_type', 'image/png')};base64,{source['data']}"
    elif isinstance(source.get("url"), str):
        url = source["url"]
    elif isinstance(block.get("image_url"), str):  # Responses input_image
        url = block["image_url"]
    else:
        return None
    return {"type": "image_url", "image_url": {"url": url}}


def _content_parts(blocks: list[Any]) -> str | list[dict[str, Any]]:
    """Text and image blocks as chat content: a plain string when it is only text."""
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, str):
            parts.append({"type": "text", "text": block})
        elif not isinstance(block, dict):
            continue
        elif isinstance(block.get("text"), str) and block.get("type", "text") in ("text", "input_text", "output_text"):
            parts.append({"type": "text", "text": block["text"]})
        elif block.get("type") in ("image", "input_image"):
            image = _image_part(block)
            if image is not None:
                parts.append(image)
    if all(p["type"] == "text" for p in parts):
        return "".join(p["text"] for p in parts)
    return parts


# --- Anthropic Messages ------------------------------------------------------------------------


def anthropic_system(system: Any) -> str | None:
    """The ``system`` field (string or text blocks) as one string; None when absent."""
    if system is None:
        return None
    return block_text(system, sep="\n")


def anthropic_messages(body: dict[str, Any], upstream: bool = False) -> list[dict[str, Any]]:
    """An Anthropic Messages request (``system`` + ``messages``) as chat messages.

    ``tool_use`` blocks become the assistant's ``tool_calls`` (input as JSON text);
    ``tool_result`` blocks become ``tool`` messages, placed before the user's own text as the
    chat dialect requires; ``thinking`` becomes ``reasoning_content``; ``system``-role entries
    inside ``messages`` stay system messages where they are.
    """
    out: list[dict[str, Any]] = []
    system = anthropic_system(body.get("system"))
    if system is not None:
        out.append({"role": "system", "content": system})
    for message in body.get("messages") or ():
        if not isinstance(message, dict):
            continue
        role = str(message.get("role") or "user")
        content = message.get("content")
        if not isinstance(content, list):
            out.append({"role": role, "content": "" if content is None else content})
            continue
        if role == "assistant":
            out.append(_anthropic_assistant(content))
            continue
        plain: list[Any] = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                if plain:
                    out.append({"role": role, "content": _content_parts(plain)})
                    plain = []
                out.append(_anthropic_tool_result(block))
            else:
                plain.append(block)
        if plain or not content:
            out.append({"role": role, "content": _content_parts(plain)})
    return out


def _anthropic_assistant(blocks: list[Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant"}
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    reasoning: list[str] = []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind in ("tool_use", "server_tool_use"):
            arguments = block.get("input", {})
            calls.append(
                {
                    "id": block.get("id"),
                    "type": "function",
                    "function": {"name": block.get("name", ""), "arguments": _dumps(arguments)},
                }
            )
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            reasoning.append(block["thinking"])
    message["content"] = "".join(texts) if texts or not calls else None
    if calls:
        message["tool_calls"] = calls
    if reasoning:
        message["reasoning_content"] = "".join(reasoning)
    return message


def _anthropic_tool_result(block: dict[str, Any]) -> dict[str, Any]:
    content = block.get("content")
    text = block_text(content) if content is not None else ""
    if block.get("is_error"):
        text = text or "error"
    return {"role": "tool", "tool_call_id": block.get("tool_use_id"), "content": text}


def anthropic_tools(tools: Any) -> list[dict[str, Any]] | None:
    """Anthropic tool definitions (``name``, ``description``, ``input_schema``) as chat tools.

    Server tools (web search, ...) have no schema the engine could follow and are left out.
    """
    if not isinstance(tools, list):
        return None
    out = []
    for tool in tools:
        if not isinstance(tool, dict) or "input_schema" not in tool:
            continue
        function = {"name": tool.get("name", ""), "parameters": tool.get("input_schema") or {}}
        if tool.get("description") is not None:
            function["description"] = tool["description"]
        out.append({"type": "function", "function": function})
    return out


def anthropic_response_message(body: dict[str, Any]) -> dict[str, Any]:
    """A non-streamed Anthropic ``message`` response as a chat assistant message."""
    content = body.get("content")
    return _anthropic_assistant(content if isinstance(content, list) else [])


ANTHROPIC_STOP = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls"}


# --- OpenAI Responses --------------------------------------------------------------------------


def responses_messages(body: dict[str, Any], upstream: bool = False) -> list[dict[str, Any]]:
    """An OpenAI Responses request (``instructions`` + ``input``) as chat messages.

    Consecutive ``function_call`` items join the assistant message before them (one model turn);
    ``function_call_output`` items become ``tool`` messages; a ``reasoning`` item's text
    (:func:`responses_reasoning_text`) becomes the ``reasoning_content`` of the assistant message
    that follows it (the turn it was thought for). With ``upstream`` a ``developer`` message
    becomes ``system``, which every chat template knows.
    """
    out: list[dict[str, Any]] = []
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        out.append({"role": "system" if upstream else "developer", "content": instructions})
    items = body.get("input")
    if isinstance(items, str):
        return [*out, {"role": "user", "content": items}]
    thought: list[str] = []  # reasoning items waiting for the assistant message they belong to
    for item in items if isinstance(items, list) else ():
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "reasoning":
            text = responses_reasoning_text(item)
            if text:
                thought.append(text)
            continue
        if kind == "message" or (kind is None and "role" in item):
            role = str(item.get("role") or "user")
            if upstream and role == "developer":
                role = "system"
            content = item.get("content")
            value = _content_parts(content) if isinstance(content, list) else ("" if content is None else content)
            message: dict[str, Any] = {"role": role, "content": value}
            if role == "assistant" and thought:
                message["reasoning_content"], thought = "\n".join(thought), []
            out.append(message)
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            if kind == "function_call":
                name, arguments = item.get("name", ""), item.get("arguments", "")
            elif kind == "custom_tool_call":  # freeform input: a one-field function for the engine
                name, arguments = item.get("name", ""), {"input": item.get("input", "")}
            else:
                name, arguments = "local_shell", _dumps(item.get("action", {}))
            call = {
                "id": item.get("call_id") or item.get("id"),
                "type": "function",
                "function": {"name": name, "arguments": arguments if isinstance(arguments, str) else _dumps(arguments)},
            }
            last = out[-1] if out else None
            if last is not None and last.get("role") == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                last = {"role": "assistant", "content": None, "tool_calls": [call]}
                out.append(last)
            if thought:
                last["reasoning_content"] = "\n".join(filter(None, (last.get("reasoning_content"), *thought)))
                thought = []
        elif kind in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
            output = item.get("output")
            text = output if isinstance(output, str) else block_text(output)
            out.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": text})
    return out


# A freeform (``custom``) tool, e.g. codex's apply_patch, offered to a chat engine: one string field.
CUSTOM_TOOL_PARAMETERS = {
    "type": "object",
    "properties": {"input": {"type": "string", "description": "the tool's whole input, as free text"}},
    "required": ["input"],
}


def custom_tool_names(tools: Any) -> set[str]:
    """Names of the freeform (``custom``) tools of a Responses request."""
    if not isinstance(tools, list):
        return set()
    return {str(t.get("name", "")) for t in tools if isinstance(t, dict) and t.get("type") == "custom"}


def responses_tools(tools: Any) -> list[dict[str, Any]] | None:
    """Responses function tools (flat ``name`` / ``parameters``) as chat tools.

    A freeform ``custom`` tool becomes a function taking one string, ``input``; built-in tools
    (web search, ...) are left out.
    """
    if not isinstance(tools, list):
        return None
    out = []
    for tool in tools:
        if isinstance(tool, dict) and tool.get("type") == "custom":
            function = {"name": tool.get("name", ""), "parameters": CUSTOM_TOOL_PARAMETERS}
            if tool.get("description") is not None:
                function["description"] = tool["description"]
            out.append({"type": "function", "function": function})
            continue
        if not isinstance(tool, dict) or tool.get("type") != "function":
            continue
        function = {"name": tool.get("name", ""), "parameters": tool.get("parameters") or {}}
        if tool.get("description") is not None:
            function["description"] = tool["description"]
        if "strict" in tool:
            function["strict"] = tool["strict"]
        out.append({"type": "function", "function": function})
    return out


def responses_response_message(body: dict[str, Any]) -> dict[str, Any]:
    """A non-streamed Responses ``response`` object's output items as a chat assistant message."""
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    reasoning: list[str] = []
    for item in body.get("output") or ():
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "message":
            texts.append(block_text(item.get("content"), sep=""))
        elif kind in ("function_call", "custom_tool_call"):
            arguments = item.get("arguments", "") if kind == "function_call" else {"input": item.get("input", "")}
            calls.append(
                {
                    "id": item.get("call_id"),
                    "type": "function",
                    "function": {
                        "name": item.get("name", ""),
                        "arguments": arguments if isinstance(arguments, str) else _dumps(arguments),
                    },
                }
            )
        elif kind == "reasoning":
            reasoning.append(responses_reasoning_text(item))
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts or not calls else None}
    if calls:
        message["tool_calls"] = calls
    if any(reasoning):
        message["reasoning_content"] = "".join(reasoning)
    return message


# --- Google Gemini ------------------------------------------------------------------------------

GOOGLE_ROLES = {"user": "user", "model": "assistant", "function": "user", "tool": "user", "system": "system"}
# Gemini finish reasons as chat finish reasons (tool calls are told apart by their parts).
GOOGLE_STOP = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "MALFORMED_FUNCTION_CALL": "stop",
    "UNEXPECTED_TOOL_CALL": "stop",
    "OTHER": "stop",
    "LANGUAGE": "stop",
}
# generationConfig keys under their chat names.
GOOGLE_SAMPLING = {
    "temperature": "temperature",
    "topP": "top_p",
    "topK": "top_k",
    "maxOutputTokens": "max_tokens",
    "stopSequences": "stop",
    "candidateCount": "n",
    "presencePenalty": "presence_penalty",
    "frequencyPenalty": "frequency_penalty",
    "seed": "seed",
}


def _g(value: dict[str, Any], camel: str) -> Any:
    """A Gemini field under its camelCase name or its snake_case spelling (both are accepted)."""
    if camel in value:
        return value[camel]
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)
    return value.get(snake)


def google_system(body: dict[str, Any]) -> str | None:
    """``systemInstruction`` (a string, a content with ``parts``, or a list of parts) as text."""
    instruction = _g(body, "systemInstruction")
    if instruction is None:
        return None
    if isinstance(instruction, dict):
        return "\n".join(
            p["text"] for p in instruction.get("parts") or () if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    if isinstance(instruction, list):
        return "\n".join(p if isinstance(p, str) else str(obj(p).get("text", "")) for p in instruction)
    return str(instruction)


def google_image_part(part: dict[str, Any]) -> dict[str, Any] | None:
    """An ``inlineData`` / ``fileData`` image part as a chat ``image_url`` part (None for other media)."""
    inline = _g(part, "inlineData")
    if isinstance(inline, dict):
        mime, data = _g(inline, "mimeType"), inline.get("data")
        if isinstance(mime, str) and mime.lower().startswith("image/") and isinstance(data, str) and data:
            url = data if data.startswith("data:") else f"data:{mime};base64,{data}"
            return {"type": "image_url", "image_url": {"url": url}}
    file = _g(part, "fileData")
    if isinstance(file, dict):
        mime, uri = _g(file, "mimeType"), _g(file, "fileUri")
        if isinstance(uri, str) and uri and (not isinstance(mime, str) or mime.lower().startswith("image/")):
            return {"type": "image_url", "image_url": {"url": uri}}
    return None


def _google_arguments(args: Any) -> str:
    return _dumps(args if args is not None else {})


def google_messages(body: dict[str, Any], upstream: bool = False) -> list[dict[str, Any]]:
    """A Gemini ``generateContent`` request (``systemInstruction`` + ``contents``) as chat messages.

    ``model`` contents become assistant messages (``text`` parts the content, ``thought`` parts
    the ``reasoning_content``, ``functionCall`` parts the ``tool_calls``, arguments as JSON text);
    ``functionResponse`` parts become ``tool`` messages (placed before the user's own text, as
    chat templates require) answering the call with the same id, else the latest unanswered call
    of that name; ``inlineData`` / ``fileData`` images become ``image_url`` parts. A function call
    without an id gets ``call_<n>`` (its position among the request's calls), stable across turns.
    """
    out: list[dict[str, Any]] = []
    system = google_system(body)
    if system is not None:
        out.append({"role": "system", "content": system})
    n_calls = 0
    unanswered: list[tuple[str, str]] = []  # (name, id) of calls with no response yet, oldest first
    for content in body.get("contents") or ():
        if isinstance(content, str):
            out.append({"role": "user", "content": content})
            continue
        if not isinstance(content, dict):
            continue
        role = GOOGLE_ROLES.get(str(content.get("role") or "user"), "user")
        parts = content.get("parts")
        parts = parts if isinstance(parts, list) else ([parts] if isinstance(parts, dict | str) else [])
        if role == "assistant":
            message: dict[str, Any] = {"role": "assistant"}
            thoughts, calls, plain = [], [], []
            for part in parts:
                if isinstance(part, dict) and part.get("thought") is True and isinstance(part.get("text"), str):
                    thoughts.append(part["text"])
                elif isinstance(part, dict) and isinstance(_g(part, "functionCall"), dict):
                    call = _g(part, "functionCall")
                    n_calls += 1
                    call_id = str(call.get("id") or f"call_{n_calls}")
                    name = str(call.get("name") or "")
                    unanswered.append((name, call_id))
                    calls.append(
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": _google_arguments(call.get("args"))},
                        }
                    )
                else:
                    plain.append(part)
            content_value = _google_content(plain)
            message["content"] = content_value if content_value or not calls else None
            if calls:
                message["tool_calls"] = calls
            if thoughts:
                message["reasoning_content"] = "".join(thoughts)
            out.append(message)
            continue
        plain = []
        for part in parts:
            response = _g(part, "functionResponse") if isinstance(part, dict) else None
            if isinstance(response, dict):
                out.append(_google_tool_message(response, unanswered))
            elif not (isinstance(part, dict) and part.get("thought") is True):
                plain.append(part)
        if plain or not parts:
            text = _google_content(plain)
            if role == "system":
                text = block_text(text) if isinstance(text, list) else text
            out.append({"role": role, "content": text})
    return out


def _google_content(parts: list[Any]) -> str | list[dict[str, Any]]:
    """Text and image parts as chat content: a plain string when it is only text."""
    chat_parts: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, str):
            chat_parts.append({"type": "text", "text": part})
        elif not isinstance(part, dict):
            continue
        elif isinstance(part.get("text"), str):
            chat_parts.append({"type": "text", "text": part["text"]})
        elif (image := google_image_part(part)) is not None:
            chat_parts.append(image)
        elif isinstance(_g(part, "executableCode"), dict):
            code = _g(part, "executableCode")
            chat_parts.append(
                {"type": "text", "text": f"```{str(code.get('language', '')).lower()}\n{code.get('code', '')}\n```"}
            )
        elif isinstance(_g(part, "codeExecutionResult"), dict):
            chat_parts.append({"type": "text", "text": str(_g(part, "codeExecutionResult").get("output", ""))})
    if all(p["type"] == "text" for p in chat_parts):
        return "".join(p["text"] for p in chat_parts)
    return chat_parts


def _google_tool_message(response: dict[str, Any], unanswered: list[tuple[str, str]]) -> dict[str, Any]:
    name = str(response.get("name") or "")
    call_id = response.get("id")
    if call_id:
        unanswered[:] = [u for u in unanswered if u[1] != call_id]
    else:
        match = next((u for u in unanswered if u[0] == name), None)
        if match is not None:
            unanswered.remove(match)
            call_id = match[1]
    payload = response.get("response")
    text = payload if isinstance(payload, str) else _dumps(payload if payload is not None else {})
    return {"role": "tool", "tool_call_id": str(call_id or name), "name": name, "content": text}


def google_schema(schema: Any) -> Any:
    """A Gemini (OpenAPI subset) schema as JSON schema: type names in lower case, nested too."""
    if isinstance(schema, list):
        return [google_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type" and isinstance(value, str):
            out[key] = value.lower()
        elif key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            out[key] = {name: google_schema(sub) for name, sub in value.items()}
        elif key in ("items", "anyOf", "oneOf", "allOf", "not", "additionalProperties"):
            out[key] = google_schema(value)
        else:
            out[key] = value
    return out


def google_tools(tools: Any) -> list[dict[str, Any]] | None:
    """Gemini ``tools`` (``functionDeclarations`` with ``parameters`` or ``parametersJsonSchema``)
    as chat tools; built-in tools (``googleSearch``, ``codeExecution``, ...) are left out."""
    if not isinstance(tools, list):
        return None
    out = []
    for tool in tools:
        declarations = _g(tool, "functionDeclarations") if isinstance(tool, dict) else None
        for declaration in declarations if isinstance(declarations, list) else ():
            if not isinstance(declaration, dict) or not declaration.get("name"):
                continue
            parameters = _g(declaration, "parametersJsonSchema")
            if not isinstance(parameters, dict):
                parameters = google_schema(declaration.get("parameters"))
            if not isinstance(parameters, dict) or not parameters:
                parameters = {"type": "object", "properties": {}}
            function: dict[str, Any] = {"name": str(declaration["name"]), "parameters": parameters}
            if isinstance(declaration.get("description"), str):
                function["description"] = declaration["description"]
            out.append({"type": "function", "function": function})
    return out


def google_builtin_tools(tools: Any) -> list[str]:
    """The names of Gemini built-in tools (no function declarations), which no engine can be offered."""
    names = []
    for tool in tools if isinstance(tools, list) else ():
        if isinstance(tool, dict):
            names += [k for k in tool if k not in ("functionDeclarations", "function_declarations")]
    return names


def google_tool_choice(body: dict[str, Any]) -> Any:
    """``toolConfig.functionCallingConfig`` as a chat ``tool_choice`` (None: the engine's default)."""
    config = _g(body, "toolConfig")
    calling = _g(config, "functionCallingConfig") if isinstance(config, dict) else None
    if not isinstance(calling, dict):
        return None
    mode = str(calling.get("mode", "")).upper()
    allowed = _g(calling, "allowedFunctionNames")
    if mode == "NONE":
        return "none"
    if mode in ("ANY", "VALIDATED"):
        if isinstance(allowed, list) and len(allowed) == 1 and isinstance(allowed[0], str):
            return {"type": "function", "function": {"name": allowed[0]}}
        return "required"
    if mode == "AUTO":
        return "auto"
    return None


def google_generation_config(body: dict[str, Any]) -> dict[str, Any]:
    """The request's ``generationConfig`` (an empty dict when it has none)."""
    config = _g(body, "generationConfig")
    return config if isinstance(config, dict) else {}


def google_sampling(body: dict[str, Any]) -> dict[str, Any]:
    """``generationConfig`` under the chat names (``topP`` -> ``top_p``, ``maxOutputTokens`` ->
    ``max_tokens``, ``stopSequences`` -> ``stop``, ...), snake_case spellings read too."""
    config = google_generation_config(body)
    out: dict[str, Any] = {}
    for camel, chat in GOOGLE_SAMPLING.items():
        value = _g(config, camel)
        if value is not None:
            out[chat] = value
    return out


def google_thinking(body: dict[str, Any]) -> bool | None:
    """Whether the request asks for thoughts (``thinkingConfig.includeThoughts``); None: it does not say."""
    thinking = _g(google_generation_config(body), "thinkingConfig")
    if not isinstance(thinking, dict):
        return None
    include = _g(thinking, "includeThoughts")
    if include is True:
        return True
    return False if _g(thinking, "thinkingBudget") == 0 else None


def google_response_message(candidate: dict[str, Any]) -> dict[str, Any]:
    """A Gemini candidate's ``content.parts`` as a chat assistant message."""
    content = obj(candidate.get("content"))
    parts: list[Any] = content["parts"] if isinstance(content.get("parts"), list) else []
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[dict[str, Any]] = []
    for part in parts:
        if not isinstance(part, dict):
            continue
        if part.get("thought") is True and isinstance(part.get("text"), str):
            thoughts.append(part["text"])
        elif isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif isinstance(_g(part, "functionCall"), dict):
            call = _g(part, "functionCall")
            calls.append(
                {
                    "id": call.get("id") or f"call_{len(calls) + 1}",
                    "type": "function",
                    "function": {"name": str(call.get("name") or ""), "arguments": _google_arguments(call.get("args"))},
                }
            )
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts or not calls else None}
    if calls:
        message["tool_calls"] = calls
    if thoughts:
        message["reasoning_content"] = "".join(thoughts)
    return message


def is_google_response(body: Any) -> bool:
    """A Gemini ``GenerateContentResponse`` (``candidates`` or ``usageMetadata``, no ``choices``)."""
    return (
        isinstance(body, dict)
        and "choices" not in body
        and (isinstance(body.get("candidates"), list) or isinstance(body.get("usageMetadata"), dict))
    )


def _merge_google_parts(acc: list[dict[str, Any]], parts: list[Any]) -> None:
    """Stream parts appended to the candidate's parts, text joined onto a text part of the same kind."""
    for part in parts:
        if not isinstance(part, dict):
            continue
        last = acc[-1] if acc else None
        if (
            isinstance(part.get("text"), str)
            and last is not None
            and isinstance(last.get("text"), str)
            and bool(last.get("thought")) == bool(part.get("thought"))
        ):
            last["text"] += part["text"]
        else:
            acc.append(dict(part))


def google_chat_response(events: list[dict[str, Any]]) -> dict[str, Any]:
    """A Gemini answer (one ``GenerateContentResponse``, or the list a stream sent) as a chat
    completion: parts joined per candidate, the last finish reason and usage kept."""
    candidates: dict[int, dict[str, Any]] = {}
    usage: dict[str, Any] = {}
    model = response_id = None
    for event in events:
        if not isinstance(event, dict):
            continue
        usage = obj(event.get("usageMetadata")) or usage
        model = event.get("modelVersion", model)
        response_id = event.get("responseId", response_id)
        for position, candidate in enumerate(event.get("candidates") or ()):
            if not isinstance(candidate, dict):
                continue
            index = candidate.get("index", position)
            index = index if type(index) is int and 0 <= index < 1024 else 0
            acc = candidates.setdefault(index, {"parts": []})
            _merge_google_parts(acc["parts"], obj(candidate.get("content")).get("parts") or [])
            if candidate.get("finishReason") is not None:
                acc["finishReason"] = candidate["finishReason"]
    choices = []
    for index in sorted(candidates):
        acc = candidates[index]
        message = google_response_message({"content": {"parts": acc["parts"]}})
        finish = GOOGLE_STOP.get(str(acc.get("finishReason")), None if acc.get("finishReason") is None else "stop")
        if finish == "stop" and message.get("tool_calls"):
            finish = "tool_calls"
        choices.append({"index": index, "message": message, "finish_reason": finish})
    return {
        "object": "chat.completion",
        "id": response_id,
        "model": model,
        "choices": choices,
        "usage": {
            "prompt_tokens": usage.get("promptTokenCount"),
            "completion_tokens": usage.get("candidatesTokenCount"),
        },
    }


def chat_messages(body: dict[str, Any], upstream: bool = False, dialect: str | None = None) -> Any:
    """The conversation of a request body in any dialect, as chat messages (None when it has none).

    ``dialect`` is what the record says (a capture record's ``dialect``); detected when None.
    """
    dialect = dialect_of(body, dialect)
    if dialect == ANTHROPIC:
        return anthropic_messages(body, upstream)
    if dialect == RESPONSES:
        return responses_messages(body, upstream)
    if dialect == GOOGLE:
        return google_messages(body, upstream)
    return body.get("messages")  # as recorded; the loader reports a wrong type


def chat_tools(body: dict[str, Any], dialect: str | None = None) -> list[Any] | None:
    """The tool manifest of a request body in any dialect, as chat tools."""
    dialect = dialect_of(body, dialect)
    if dialect == ANTHROPIC:
        return anthropic_tools(body.get("tools"))
    if dialect == RESPONSES:
        return responses_tools(body.get("tools"))
    if dialect == GOOGLE:
        return google_tools(body.get("tools"))
    return body.get("tools")


def chat_sampling(body: dict[str, Any], dialect: str | None = None) -> dict[str, Any]:
    """A request body with the dialect's sampling keys under their chat names.

    Anthropic ``stop_sequences`` -> ``stop``; Responses ``max_output_tokens`` -> ``max_tokens``;
    Gemini ``generationConfig`` keys under their chat names (:func:`google_sampling`).
    """
    dialect = dialect_of(body, dialect)
    if dialect == GOOGLE:
        return {
            **{k: v for k, v in body.items() if k not in ("generationConfig", "generation_config")},
            **google_sampling(body),
        }
    if dialect == ANTHROPIC and "stop_sequences" in body:
        return {**{k: v for k, v in body.items() if k != "stop_sequences"}, "stop": body["stop_sequences"]}
    if dialect == RESPONSES and "max_output_tokens" in body:
        return {**{k: v for k, v in body.items() if k != "max_output_tokens"}, "max_tokens": body["max_output_tokens"]}
    return body
