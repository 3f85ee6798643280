"""The three API dialects a harness may speak, read as chat-completions messages.

Chat completions is the engine's own dialect. Anthropic Messages (Claude Code) and OpenAI
Responses (codex) carry the same conversation in other shapes: a top-level ``system`` (string or
text blocks) and content blocks (``text``, ``tool_use``, ``tool_result``, ``thinking``); or
``instructions`` and ``input`` items (``message``, ``function_call``, ``function_call_output``,
``reasoning``). These pure functions turn either into chat messages, so the message fallback,
the chat view and the capture proxy's translation share one reading (docs/formats.md).

``upstream=True`` gives what a chat template accepts (``developer`` becomes ``system``);
without it the roles are kept as the harness sent them, for display and linking.
"""

from __future__ import annotations

import json
from operator import itemgetter
from typing import Any

CHAT = "chat"
ANTHROPIC = "anthropic"
RESPONSES = "responses"


def request_dialect(body: dict[str, Any]) -> str:
    """Which dialect a request body is written in (chat when nothing else fits)."""
    if "input" in body and "messages" not in body:
        return RESPONSES
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
    if recorded in (ANTHROPIC, RESPONSES):
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
    ``function_call_output`` items become ``tool`` messages; ``reasoning`` items are dropped (a
    chat template does not replay them). With ``upstream`` a ``developer`` message becomes
    ``system``, which every chat template knows.
    """
    out: list[dict[str, Any]] = []
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        out.append({"role": "system" if upstream else "developer", "content": instructions})
    items = body.get("input")
    if isinstance(items, str):
        return [*out, {"role": "user", "content": items}]
    for item in items if isinstance(items, list) else ():
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "message" or (kind is None and "role" in item):
            role = str(item.get("role") or "user")
            if upstream and role == "developer":
                role = "system"
            content = item.get("content")
            text = _content_parts(content) if isinstance(content, list) else ("" if content is None else content)
            out.append({"role": role, "content": text})
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
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
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
            reasoning.append(block_text(item.get("content"), sep=""))
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts or not calls else None}
    if calls:
        message["tool_calls"] = calls
    if any(reasoning):
        message["reasoning_content"] = "".join(reasoning)
    return message


def chat_messages(body: dict[str, Any], upstream: bool = False, dialect: str | None = None) -> Any:
    """The conversation of a request body in any dialect, as chat messages (None when it has none).

    ``dialect`` is what the record says (a capture record's ``dialect``); detected when None.
    """
    dialect = dialect_of(body, dialect)
    if dialect == ANTHROPIC:
        return anthropic_messages(body, upstream)
    if dialect == RESPONSES:
        return responses_messages(body, upstream)
    return body.get("messages")  # as recorded; the loader reports a wrong type


def chat_tools(body: dict[str, Any], dialect: str | None = None) -> list[Any] | None:
    """The tool manifest of a request body in any dialect, as chat tools."""
    dialect = dialect_of(body, dialect)
    if dialect == ANTHROPIC:
        return anthropic_tools(body.get("tools"))
    if dialect == RESPONSES:
        return responses_tools(body.get("tools"))
    return body.get("tools")


def chat_sampling(body: dict[str, Any], dialect: str | None = None) -> dict[str, Any]:
    """A request body with the dialect's sampling keys under their chat names.

    Anthropic ``stop_sequences`` -> ``stop``; Responses ``max_output_tokens`` -> ``max_tokens``.
    """
    dialect = dialect_of(body, dialect)
    if dialect == ANTHROPIC and "stop_sequences" in body:
        return {**{k: v for k, v in body.items() if k != "stop_sequences"}, "stop": body["stop_sequences"]}
    if dialect == RESPONSES and "max_output_tokens" in body:
        return {**{k: v for k, v in body.items() if k != "max_output_tokens"}, "max_tokens": body["max_output_tokens"]}
    return body
