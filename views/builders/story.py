"""The story view's HTML (pure): a conversation's header and break, and each call's chapter as a
readable chat, folded parts as ``<details>`` with their sizes.

Entry points: ``STYLE`` (once per page), ``conversation_html(rollout, conversation, number, total)``
(its title, how many calls, the break that began it in one sentence with its evidence),
``chapter_html(chapter, selected)`` (the messages the call added and its reply; tool calls with their
arguments pretty-printed), ``aside_html(aside)`` (a folded line: discarded attempts, another branch),
``strip_html(rollout, story)`` (the conversations as one bar: the first screen's picture).

Where it sits: the story itself is rollout_graph.analysis.story (``outline``, ``chapter``); the
panel views/panels/story.py pages through it. Every string from the trace is escaped here.
"""

from __future__ import annotations

from rollout_graph.analysis.story import AGENT_WORK, SIDE, SUB, Aside, Block, Chapter, Conversation, Story
from rollout_graph.core.rollout import Rollout
from rollout_graph.escape import html_text

# the graph's role colours (views/builders/palette.py): the agent's blue; subagents and side calls
# are auxiliary calls there, amber, told apart here by shade
KIND_COLOURS = {AGENT_WORK: "#1e40af", SUB: "#b45309", SIDE: "#d97706"}
OTHER_COLOUR = "#94a3b8"
BLOCK_COLOURS = {
    "system": "#64748b",
    "instructions": "#0f766e",
    "user": "#0f766e",
    "tool": "#9333ea",
    "assistant": "#2563eb",
    "reasoning": "#64748b",
    "context": "#64748b",
}

STYLE = (
    "<style>"
    ".rg-story{font:14px/1.5 system-ui,-apple-system,'Segoe UI',sans-serif;color:#0f172a}"
    ".rg-conv-h{display:flex;align-items:baseline;gap:10px;flex-wrap:wrap;margin:2px 0 6px}"
    ".rg-conv-h b{font-size:16px}.rg-conv-h span{color:#64748b;font-size:13px}"
    ".rg-break{border-left:3px solid #d97706;background:#fffbeb;padding:6px 10px;margin:4px 0 10px;"
    "border-radius:4px;font-size:13px}"
    ".rg-break .ev{color:#92400e;font-size:12px;margin-top:2px}"
    ".rg-ch{border:1px solid #e2e8f0;border-radius:8px;padding:8px 12px 6px;margin:0 0 2px;background:#fff}"
    ".rg-ch.rg-sel{border-color:#0f172a;box-shadow:0 0 0 2px #0f172a22}"
    # in the app a chapter's card holds its two buttons too (views/panels/story.py): the card is the
    # chapter's container, its open/graph buttons a toolbar at its top
    '[class*="st-key-rg-story-ch-"]{border:1px solid #e2e8f0;border-radius:8px;padding:0 12px 6px;'
    "background:#fff;gap:0!important}"
    '[class*="st-key-rg-story-ch-"]:has(.rg-sel){border-color:#0f172a;box-shadow:0 0 0 2px #0f172a22}'
    '[class*="st-key-rg-story-ch-"] .rg-ch{border:none;box-shadow:none;padding:0;margin:0}'
    ".rg-ch-h{display:flex;gap:10px;align-items:baseline;flex-wrap:wrap;font-size:12.5px;color:#64748b;margin-bottom:4px}"
    ".rg-ch-h b{color:#0f172a;font-size:13.5px}"
    ".rg-chip{border-radius:9px;padding:0 7px;font:600 11px system-ui;color:#fff}"
    ".rg-blk{border-left:3px solid #cbd5e1;padding:2px 0 2px 9px;margin:5px 0}"
    ".rg-blk .t{font:600 11px system-ui;text-transform:uppercase;letter-spacing:.03em}"
    ".rg-blk .sz{color:#64748b;font-weight:400;text-transform:none;letter-spacing:0;margin-left:6px}"
    ".rg-blk pre{white-space:pre-wrap;word-break:break-word;margin:3px 0 0;font:12px/1.45 ui-monospace,Menlo,Consolas,monospace;"
    "max-height:420px;overflow:auto}"
    ".rg-blk details>summary{cursor:pointer;list-style:none;outline:none}"
    ".rg-blk details>summary::-webkit-details-marker{display:none}"
    ".rg-blk details>summary::before{content:'▸';display:inline-block;width:12px;color:#64748b}"
    ".rg-blk details[open]>summary::before{content:'▾'}"
    ".rg-blk .peek{color:#475569;font:12px ui-monospace,Menlo,Consolas,monospace;margin-left:4px}"
    ".rg-tool{margin:4px 0 0;padding:4px 8px;background:#f8fafc;border-radius:6px}"
    ".rg-tool code{font:12px ui-monospace,Menlo,Consolas,monospace;color:#334155}"
    ".rg-aside{color:#475569;font-size:12.5px;padding:3px 10px;margin:2px 0 2px 14px;border-left:2px dashed #cbd5e1}"
    ".rg-strip{display:flex;height:26px;border-radius:6px;overflow:hidden;gap:2px;margin:4px 0 2px;min-width:0}"
    ".rg-strip div{display:flex;align-items:center;justify-content:center;color:#fff;font:600 11.5px system-ui;"
    "white-space:nowrap;overflow:hidden;text-overflow:ellipsis;padding:0 6px;min-width:18px}"
    ".rg-strip-legend{font-size:12px;color:#475569;display:flex;gap:14px;flex-wrap:wrap}"
    "</style>"
)


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def conversation_html(rollout: Rollout, conversation: Conversation, number: int, total: int) -> str:
    """The conversation's title line and, after the first, the break that began it."""
    folded = conversation.n_calls - len(conversation.calls)
    counts = _plural(len(conversation.calls), "model call") + (f" · {folded:,} folded" if folded else "")
    out = (
        f'<div class="rg-conv-h"><b>{html_text(conversation.title)}</b>'
        f"<span>{number} of {total} in this rollout · {counts}</span></div>"
    )
    brk = conversation.opened_by
    if brk is not None:
        out += (
            f'<div class="rg-break"><b>Why a new conversation:</b> {html_text(brk.words)} '
            f"(after {html_text(rollout.calls[brk.earlier].node_id)}).<br>{html_text(brk.sentence)}"
            + (f'<div class="ev">Evidence: {html_text(brk.evidence)}</div>' if brk.evidence else "")
            + "</div>"
        )
    return out


def _tool_calls_html(block: Block) -> str:
    out = ""
    for call in block.tool_calls:
        peek = f" <code>{html_text(call.peek)}</code>" if call.peek else ""
        out += (
            f'<div class="rg-tool"><details><summary><b>{html_text(call.name)}</b>{peek}</summary>'
            f"<pre>{html_text(call.arguments)}</pre></details></div>"
        )
    return out


def block_html(block: Block) -> str:
    """One message or part of the reply; folded ones show their title, size and first line."""
    colour = BLOCK_COLOURS.get(block.kind, "#334155")
    size = f'<span class="sz">{html_text(block.size)}</span>' if block.chars else ""
    title = f'<span class="t" style="color:{colour}">{html_text(block.title)}</span>{size}'
    cut = (
        f"\n… {block.chars - len(block.text):,} more characters (Raw JSON tab)" if block.chars > len(block.text) else ""
    )
    body = f"<pre>{html_text(block.text + cut)}</pre>" if block.text.strip() else ""
    if block.folded and body:
        inner = f'<details><summary>{title}<span class="peek">{html_text(block.peek)}</span></summary>{body}</details>'
    else:
        inner = title + body
    return f'<div class="rg-blk" style="border-left-color:{colour}">{inner}{_tool_calls_html(block)}</div>'


def chapter_html(ch: Chapter, step: int, selected: bool = False) -> str:
    """One call of the story: its header (id, step, tokens, trained or not, findings), the messages
    it added, its reply."""
    chips = ""
    if not ch.trained and ch.n_sampled:
        chips += '<span class="rg-chip" style="background:#64748b">not trained</span>'
    if ch.fatal:
        chips += f'<span class="rg-chip" style="background:#991b1b">{ch.fatal} FATAL</span>'
    if ch.warn:
        chips += f'<span class="rg-chip" style="background:#b45309">{ch.warn} WARN</span>'
    finish = f" · stopped: {html_text(str(ch.finish_reason))}" if ch.finish_reason not in (None, "stop") else ""
    repeated = f" · {_plural(ch.shared, 'earlier message')} not repeated" if ch.shared else ""
    head = (
        f'<div class="rg-ch-h"><b>{html_text(ch.node_id)}</b><span>step {step}</span>'
        f"<span>{ch.n_prompt:,} prompt · {ch.n_sampled:,} sampled tokens{finish}{repeated}</span>{chips}</div>"
    )
    new = "".join(block_html(b) for b in ch.new)
    if not ch.new and ch.shared:
        new = '<div class="rg-aside" style="margin-left:0">nothing new since the call before: the same context</div>'
    reply = (
        "".join(block_html(b) for b in ch.reply)
        or '<div class="rg-aside" style="margin-left:0">no reply recorded</div>'
    )
    return f'<div class="rg-ch{" rg-sel" if selected else ""}" data-node="{html_text(ch.node_id)}">{head}{new}{reply}</div>'


def aside_html(aside: Aside) -> str:
    """A folded line: what was left out of the story here, in words."""
    return f'<div class="rg-aside">↳ {html_text(aside.text)}</div>'


def strip_html(rollout: Rollout, story: Story, limit: int = 8) -> str:
    """The conversations as one bar, each as wide as its share of the calls (the biggest
    ``limit``, the rest as one piece): the first screen's picture of what the agent did."""
    convs = story.conversations
    if not convs:
        return ""
    total = sum(c.n_calls for c in convs) or 1
    shown = sorted(range(len(convs)), key=lambda k: -convs[k].n_calls)[:limit]
    rest = sum(c.n_calls for k, c in enumerate(convs) if k not in shown)
    cells = []
    for k in sorted(shown):
        c = convs[k]
        colour = KIND_COLOURS.get(c.kind, OTHER_COLOUR)
        label = {AGENT_WORK: "agent", SUB: "subagent", SIDE: "side call"}.get(c.kind, "other")
        tip = f"{c.title}: {_plural(c.n_calls, 'call')}" + (f" (began: {c.opened_by.words})" if c.opened_by else "")
        text = f"{label} · {c.n_calls:,}" if c.n_calls / total >= 0.14 else f"{c.n_calls:,}"
        cells.append(
            f'<div style="flex:{c.n_calls / total:.4f} 1 0;background:{colour}" title="{html_text(tip)}">'
            f"{html_text(text)}</div>"
        )
    if rest:
        cells.append(
            f'<div style="flex:{rest / total:.4f} 1 0;background:{OTHER_COLOUR}" title="{rest:,} calls in '
            f'{len(convs) - len(shown)} more conversations">+{len(convs) - len(shown)}</div>'
        )
    present = {c.kind for c in convs}
    legend = "".join(
        f'<span><span style="display:inline-block;width:10px;height:10px;border-radius:2px;background:{colour};'
        f'margin-right:4px"></span>{word}</span>'
        for kind, word, colour in (
            (AGENT_WORK, "the agent's work", KIND_COLOURS[AGENT_WORK]),
            (SUB, "subagent", KIND_COLOURS[SUB]),
            (SIDE, "side call", KIND_COLOURS[SIDE]),
        )
        if kind in present
    )
    return f'<div class="rg-strip">{"".join(cells)}</div><div class="rg-strip-legend">{legend}</div>'
