"""The break, readable: HTML for a near miss's evidence (pure; the near-miss panel shows it).

Renders the library's data (rollout_graph.analysis.breaks: ``break_tokens``, ``boundary_tokens``,
``break_diff``) without deciding anything:

- :func:`token_boxes`: tokens as boxes, each with its id under its text, whitespace made visible
  (``↵``, ``·``, ``→``) unless asked not to, the first differing id marked;
- :func:`break_html`: both sides of a break as boxes, then the text diff (:func:`diff_html`:
  struck deletions, green insertions, and text the other side's window did not reach greyed);
- :func:`boundaries_html`: a re-tokenized replay's two cuttings of one text, as boxes with ids.

Every string from the trace goes through ``rollout_graph.escape.html_text``; the page's own words
are the only markup.
"""

from __future__ import annotations

from rollout_graph.analysis.breaks import (
    DELETED,
    INSERTED,
    SAME,
    UNSEEN,
    BreakSide,
    BreakTokens,
    Token,
    visible,
)
from rollout_graph.escape import html_text

STYLE = (
    "<style>.rg-br{font:12px ui-monospace,Menlo,monospace}"
    ".rg-br h5{margin:6px 0 3px;font:600 11px system-ui,sans-serif;color:#475569}"
    ".rg-toks{display:flex;flex-wrap:wrap;gap:2px;align-items:flex-start}"
    ".rg-box{display:inline-flex;flex-direction:column;align-items:center;border:1px solid #cbd5e1;"
    "border-radius:3px;padding:1px 3px;background:#f8fafc;min-width:14px}"
    ".rg-box .t{white-space:pre;color:#0f172a}.rg-box .i{font-size:9.5px;color:#64748b}"
    ".rg-box.after{background:#fff7ed;border-color:#fdba74}"
    ".rg-box.first{border:2px solid #dc2626;background:#fee2e2}"
    ".rg-box.first .i{color:#991b1b;font-weight:700}"
    ".rg-more{color:#94a3b8;padding:0 4px}"
    ".rg-diff{white-space:pre-wrap;word-break:break-word;border:1px solid #e2e8f0;border-radius:6px;padding:6px 8px}"
    ".rg-diff .same{color:#334155}.rg-diff .del{background:#fee2e2;color:#991b1b;text-decoration:line-through}"
    ".rg-diff .ins{background:#dcfce7;color:#14532d}.rg-diff .unseen{color:#94a3b8}"
    ".rg-legend{font:11px system-ui,sans-serif;color:#64748b}</style>"
)
EMPTY = "∅"  # a token whose text is empty on its own (a byte of a longer character, a special token shown as nothing)


def _shown(text: str, whitespace: bool) -> str:
    return visible(text) if whitespace else text


def token_boxes(
    tokens: tuple[Token, ...], first: int | None = None, whitespace: bool = True, more: bool = False
) -> str:
    """The tokens as boxes (text over id); ``first``: the index of the first differing token (marked,
    and the tokens after it shaded); ``more``: the sequence goes on (an ellipsis after the last)."""
    boxes = []
    for k, token in enumerate(tokens):
        cls = "rg-box" + (
            " first" if first is not None and k == first else " after" if first is not None and k > first else ""
        )
        text = _shown(token.text, whitespace) or EMPTY
        title = f"position {token.position:,} · id {token.id}"
        boxes.append(
            f'<span class="{cls}" title="{html_text(title)}"><span class="t">{html_text(text)}</span>'
            f'<span class="i">{token.id}</span></span>'
        )
    if more:
        boxes.append('<span class="rg-more">…</span>')
    return '<div class="rg-toks">' + "".join(boxes) + "</div>"


def _side(side: BreakSide, whitespace: bool) -> str:
    title = f"{side.call}: {side.what}"
    return f"<h5>{html_text(title)}</h5>" + token_boxes(side.tokens, side.first_difference, whitespace, side.more)


def diff_html(parts: list[tuple[str, str]], whitespace: bool = True) -> str:
    """The text diff: identical text plain, deletions struck red, insertions green, and text one
    side's window did not reach grey (it may be there, further on)."""
    classes = {SAME: "same", DELETED: "del", INSERTED: "ins", UNSEEN: "unseen"}
    spans = "".join(f'<span class="{classes[op]}">{html_text(_shown(text, whitespace))}</span>' for op, text in parts)
    return f'<div class="rg-diff">{spans or "(nothing to compare)"}</div>'


def break_html(tokens: BreakTokens, diff: list[tuple[str, str]], whitespace: bool = True) -> str:
    """A break: both sides' tokens as boxes around the first differing id (marked), then the text
    diff of what was removed and inserted."""
    legend = (
        '<div class="rg-legend">Each box is one token: its text over its id'
        + (" (whitespace shown: ↵ newline, · space, → tab)" if whitespace else "")
        + f"; the first differing id (token {tokens.at:,}) is outlined red. The text diff strikes what the"
        " harness removed and marks green what it inserted; identical text is never marked.</div>"
    )
    return (
        STYLE
        + '<div class="rg-br">'
        + legend
        + _side(tokens.earlier, whitespace)
        + _side(tokens.later, whitespace)
        + "<h5>text diff</h5>"
        + diff_html(diff, whitespace)
        + "</div>"
    )


def boundaries_html(
    earlier: str, later: str, sampled: tuple[Token, ...], replayed: tuple[Token, ...], whitespace: bool = True
) -> str:
    """A re-tokenized replay: one text cut into tokens two ways, as boxes with their ids."""
    return (
        STYLE
        + '<div class="rg-br">'
        + f"<h5>{html_text(earlier)}: the tokens the model sampled</h5>"
        + token_boxes(sampled, 0 if sampled else None, whitespace)
        + f"<h5>{html_text(later)}: the same text, as the replay was tokenized</h5>"
        + token_boxes(replayed, 0 if replayed else None, whitespace)
        + "</div>"
    )
