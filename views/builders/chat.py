"""A call's request messages, tool manifest and response as an escaped chat transcript (pure).

Entry points: ``chat_html(call)`` (the Messages tab: each message as a bubble, long text clipped),
``message_html(message)``, ``raw_record(call)`` (the fields the loader derived, for the Raw JSON tab).

Where it sits: drawn by views/panels/node.py and views/panels/raw.py; message text comes from
``rollout_graph.core.messages`` (``display_text``, ``pretty_arguments``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rollout_graph.core.messages import display_text as _text
from rollout_graph.core.messages import pretty_arguments
from rollout_graph.core.records import Call
from rollout_graph.escape import html_text

ROLE_COLORS = {
    "system": "#64748b",
    "developer": "#64748b",
    "user": "#0f766e",
    "assistant": "#2563eb",
    "tool": "#9333ea",
}
MAX_CHARS = 20_000  # per message; the raw JSON tab has everything

STYLESHEET = (
    "<style>"
    ".rg-chat{font:13px system-ui,sans-serif;color:#0f172a}"
    ".rg-msg{border:1px solid #e2e8f0;border-left-width:4px;border-radius:6px;padding:6px 10px;margin:6px 0;background:#fff}"
    ".rg-msg.rg-resp{background:#f8fafc}"
    ".rg-role{font:600 11px system-ui,sans-serif;text-transform:uppercase;letter-spacing:.04em;margin-bottom:3px}"
    ".rg-body{white-space:pre-wrap;word-break:break-word;font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}"
    ".rg-call{margin-top:6px;border-top:1px dashed #cbd5e1;padding-top:4px}"
    ".rg-note{color:#64748b;font-size:11px}"
    ".rg-fold>summary{cursor:pointer;list-style:none}.rg-fold>summary::-webkit-details-marker{display:none}"
    ".rg-fold>summary::before{content:'▸ ';color:#64748b}.rg-fold[open]>summary::before{content:'▾ '}"
    ".rg-size{color:#64748b;font-size:11px;margin-left:6px}"
    ".rg-peek{display:block;color:#475569;font:12px ui-monospace,Menlo,Consolas,monospace;margin-top:2px;"
    "white-space:nowrap;overflow:hidden;text-overflow:ellipsis}.rg-fold[open] .rg-peek{display:none}"
    "</style>"
)


def _clip(text: str) -> str:
    if len(text) <= MAX_CHARS:
        return html_text(text)
    return (
        html_text(text[:MAX_CHARS])
        + f'<span class="rg-note">\n… {len(text) - MAX_CHARS:,} more characters (see raw JSON)</span>'
    )


FOLD_CHARS = 1_200  # a longer message shows its first line and its size until opened
FOLD_LINES = 16


def _size(text: str) -> str:
    lines = text.count("\n") + 1
    return f"{len(text):,} characters" + (f" · {lines:,} lines" if lines > 1 else "")


def message_html(message: dict, response: bool = False) -> str:
    """One message as a bubble. A system prompt, and any message longer than ``FOLD_CHARS``
    characters or ``FOLD_LINES`` lines, is folded: its role, its size and its first line, opened
    with a click (a 16k-token system prompt no longer fills the pane)."""
    role = str(message.get("role") or "assistant")
    color = ROLE_COLORS.get(role, "#334155")
    text = _text(message.get("content"))
    body = _clip(text)
    extra = ""
    for call in message.get("tool_calls") or []:
        if not isinstance(call, dict):
            continue
        fn = call["function"] if isinstance(call.get("function"), dict) else call
        name = html_text(str(fn.get("name", "?")))
        extra += (
            f'<div class="rg-call"><span class="rg-role" style="color:{color}">tool call · {name}</span>'
            f'<div class="rg-body">{html_text(pretty_arguments(fn.get("arguments")))}</div></div>'
        )
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        extra = (
            f'<details class="rg-fold"><summary><span class="rg-note">reasoning · {_size(reasoning)}</span></summary>'
            f'<div class="rg-body">{_clip(reasoning)}</div></details>' + extra
        )
    label = html_text(role) + (" · response" if response else "")
    folded = not response and (
        role in ("system", "developer") or len(text) > FOLD_CHARS or text.count("\n") >= FOLD_LINES
    )
    content = body or "<span class=rg-note>(empty)</span>"
    if folded and text:
        first = next((line.strip() for line in text.splitlines() if line.strip()), "")[:140]
        inner = (
            f'<details class="rg-fold"><summary><span class="rg-role" style="color:{color}">{label}</span>'
            f'<span class="rg-size">{_size(text)}</span><span class="rg-peek">{html_text(first)}</span></summary>'
            f'<div class="rg-body">{content}</div></details>'
        )
    else:
        inner = f'<div class="rg-role" style="color:{color}">{label}</div><div class="rg-body">{content}</div>'
    return f'<div class="rg-msg{" rg-resp" if response else ""}" style="border-left-color:{color}">{inner}{extra}</div>'


def chat_html(call: Call) -> str:
    parts = [STYLESHEET, '<div class="rg-chat">']
    if call.request_messages is None:
        parts.append('<div class="rg-note">This record carries no request messages.</div>')
    for message in call.request_messages or ():
        parts.append(message_html(message))
    if call.response_message is not None:
        parts.append(message_html(call.response_message, response=True))
    parts.append("</div>")
    return "".join(parts)


def raw_record(call: Call) -> dict[str, Any]:
    """What the record said, without the token arrays (those are in the token views)."""
    return {
        "node_id": call.node_id,
        "source": f"{Path(call.source).name}:{call.line}",  # never a server path
        "shape": call.shape,
        "model": call.model,
        "request": {"messages": call.request_messages, "tools": call.tools, **call.requested_params},
        "submitted_params": call.submitted_params,
        "response_message": call.response_message,
        "finish_reason": call.finish_reason,
        "usage": call.usage,
        "timing": call.timing,
        "harness": call.harness,
        "document_claims": call.claims or None,
    }
