"""When two chat messages are the same turn (docs/semantics.md, "Message fallback"), for linking calls that carry no token ids.

Harnesses re-serialise what providers return (``{"command": "ls"}`` comes back as
``{"command":"ls"}``), add provider-only fields and re-render the system prompt, so messages are
compared on what the model saw, not on bytes.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import orjson

from rollout_graph.core.records import leave_in_file

if TYPE_CHECKING:
    from rollout_graph.core.records import Call, MessagesInFile

# (role, text, ((tool name, canonical arguments), ...))
ToolCalls = tuple[tuple[str, str], ...]
Turn = tuple[str, str, ToolCalls]


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):
        parts = [
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and part.get("type", "text") in ("text", "input_text", "output_text")
        ]
        return "".join(p for p in parts if isinstance(p, str)).strip()
    return json.dumps(content, sort_keys=True, ensure_ascii=False)


def canonical_arguments(arguments: Any) -> str:
    """Arguments as canonical JSON; a string that is not JSON is compared stripped."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return "raw:" + str(arguments).strip()
    return "json:" + json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _tool_calls(message: dict[str, Any]) -> ToolCalls:
    calls = message.get("tool_calls")
    content = message.get("content")
    if not isinstance(calls, list) and isinstance(content, list):
        # Anthropic ``tool_use`` blocks left inside the content (rollout_graph.core.dialects reads them).
        calls = [
            {"function": {"name": b.get("name", ""), "arguments": b.get("input")}}
            for b in content
            if isinstance(b, dict) and b.get("type") == "tool_use"
        ]
    if not isinstance(calls, list):
        return ()
    out: list[tuple[str, str]] = []
    for call in calls:
        if not isinstance(call, dict):
            continue
        fn = call["function"] if isinstance(call.get("function"), dict) else call
        out.append((str(fn.get("name", "")), canonical_arguments(fn.get("arguments"))))
    return tuple(out)


def canonical(message: dict[str, Any], default_role: str | None = None) -> Turn:
    """A message reduced to what linking compares: role, text content and tool calls."""
    role = message.get("role") or default_role
    return (str(role), _text(message.get("content")), _tool_calls(message))


def strip_leading_system(turns: list[Turn]) -> list[Turn]:
    """The turns without their leading system/developer messages."""
    start = 0
    while start < len(turns) and turns[start][0] in ("system", "developer"):
        start += 1
    return turns[start:]


MAX_DISPLAY_DEPTH = 32  # tool results inside tool results shown as text; deeper ones are named, not walked


def _json_or_note(value: Any) -> str:
    """``value`` as indented JSON, or a note saying why not (hostile nesting deeper than the
    encoder can walk): never a RecursionError."""
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, default=str)
    except RecursionError:
        return "(not shown: nested deeper than the JSON encoder can walk)"
    except (TypeError, ValueError) as exc:
        return f"(not shown: {type(exc).__name__}: {str(exc)[:120]})"


def display_text(content: Any, depth: int = 0) -> str:
    """A message's content as a reader sees it: text parts joined by newlines, tool-use and
    tool-result blocks labelled, other parts named by their type, anything else as JSON (the app's
    chat transcript and the HTML bundle; linking compares :func:`canonical` instead).

    Depth-safe on hostile input: tool results nested more than :data:`MAX_DISPLAY_DEPTH` deep are
    named and not walked, and JSON too deep to encode becomes a "(not shown: ...)" note."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, dict) and part.get("type") == "tool_use":  # Anthropic blocks kept raw
                parts.append(f"[tool_use {part.get('name', '?')}] {pretty_arguments(part.get('input'))}")
            elif isinstance(part, dict) and part.get("type") == "tool_result":
                inner = (
                    display_text(part.get("content"), depth + 1)
                    if depth < MAX_DISPLAY_DEPTH
                    else f"(not shown: tool results nested more than {MAX_DISPLAY_DEPTH} deep)"
                )
                parts.append(f"[tool_result {part.get('tool_use_id', '')}] {inner}")
            else:
                parts.append(f"[{part.get('type', 'part') if isinstance(part, dict) else type(part).__name__}]")
        return "\n".join(parts)
    return _json_or_note(content)


def pretty_arguments(arguments: Any) -> str:
    """Tool-call arguments pretty-printed when they are JSON; kept as sent when they are not."""
    if isinstance(arguments, str):
        text: str = arguments
        try:
            arguments = json.loads(text)
        except RecursionError:
            return text + "\n(not pretty-printed: nested deeper than the JSON decoder can walk)"
        except ValueError:
            return text + "\n(not valid JSON)"
    return _json_or_note(arguments)


def content_text(content: object) -> str:
    """A message's text as the near-miss analysis compares it: a string, or the text of its content
    blocks (OpenAI, Anthropic, Responses), nested tool results and tool inputs included, JSON with
    sorted keys for anything else (unstripped; :func:`canonical` is what linking compares)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict):
                text = block.get("text")
                if isinstance(text, str):
                    parts.append(text)
                elif "content" in block:
                    parts.append(content_text(block["content"]))
                elif "input" in block or "arguments" in block:
                    parts.append(json.dumps(block.get("input", block.get("arguments")), sort_keys=True, default=str))
        return "\n".join(parts)
    return "" if content is None else json.dumps(content, sort_keys=True, default=str)


_ONLY_STR = {str}
# The message list a reader last left in its file, and where (rollout_graph.ingest.shortcuts.messages).
_LEFT: list[tuple[list[Any], MessagesInFile] | None] = [None]


def note_left_in_file(items: list[Any], left: MessagesInFile) -> None:
    """A reader parsed ``items`` from bytes ``left`` can read again: a call whose request
    messages are exactly these objects (:func:`share_repeats`) holds ``left`` instead."""
    _LEFT[0] = (items, left)


def _left_in_file(messages: list[dict[str, Any]]) -> MessagesInFile | None:
    noted = _LEFT[0]
    if noted is None:
        return None
    items, left = noted
    if len(items) != len(messages) or not all(a is b for a, b in zip(items, messages, strict=True)):
        return None
    _LEFT[0] = None
    return left


def share_repeats(call: Call, shared: dict[Any, Any]) -> None:
    """Keep one object for what the calls of a load repeat (docs/performance.md, "Message texts
    are shared"): each message text (request and response), each message whose values are all
    strings (the same dict, key order included), and each tool list (the same JSON).

    ``shared`` is the load's table; the objects it hands out are never written to afterwards (a
    message read from the persistent cache is a copy). Only exact repeats are shared: a message
    holding a number, a list or an object is kept as it is (``1``, ``1.0`` and ``true`` are equal
    in Python and must stay apart), and so is a tool list whose JSON cannot say what it holds
    exactly (NaN or an infinity, which JSON writes as null; an integer beyond 64 bits).

    Request messages a reader left in the file (:func:`note_left_in_file`: these very objects,
    none dropped or converted) are not shared: the call holds where they are instead."""
    messages = call.request_messages
    left = _left_in_file(messages) if messages else None
    if left is not None:
        leave_in_file(call, left)
    elif messages:
        for i, message in enumerate(messages):
            if shared.get(id(message)) is message:  # this very object was shared already (a reader's)
                continue
            content = message.get("content")
            if type(content) is not str:
                continue
            whole = {*map(type, message.values())} == _ONLY_STR
            if whole:
                seen = shared.get(tuple(message.items()))
                if seen is not None:  # its text is the shared one already
                    messages[i] = seen
                    continue
            message["content"] = shared.setdefault(content, content)
            if whole:  # keyed by the shared text, so the key keeps no copy of its own
                shared[tuple(message.items())] = message
                shared[id(message)] = message  # the table holds it: its id is not reused
    response = call.response_message
    if response is not None and type(response.get("content")) is str:
        response["content"] = shared.setdefault(response["content"], response["content"])
        if type(response.get("role")) is str:  # the role of every reply: one string
            response["role"] = shared.setdefault(response["role"], response["role"])
    tools = call.tools
    if tools:
        try:
            key = orjson.dumps(tools)
        except (TypeError, orjson.JSONEncodeError):
            return
        if b"null" not in key:
            call.tools = shared.setdefault(key, tools)
