"""The one escaper: trace text made safe for a page, a Markdown label or a plotly label (pure).

Where it sits: the last step before the browser. Traces are untrusted; the Streamlit app and the
HTML bundle (rollout_graph.reports.bundle) both escape every trace string here, and nothing else
escapes trace text.

Entry points, each also showing control and bidi characters as escapes (:func:`visible`):
:func:`md` for any Markdown context (labels, captions, tooltips, ``st.markdown``; ``md_escape`` is an
alias), :func:`plot` for plotly text, :func:`html_text` for ``st.html`` fragments and HTML files.

What each one neutralises, and why: docs/architecture.md, "One escaper, one text helper".
"""

from __future__ import annotations

import html
import re
import string

__all__ = ["BIDI", "CONTROLS", "WORD_JOINER", "html_text", "md", "md_escape", "plot", "visible"]

# The bidirectional controls: embeddings and overrides, isolates, the marks.
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
# What a page must never receive raw: NUL, C0 (tab and newline excepted), DEL, C1, the bidi controls.
CONTROLS = re.compile("[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f" + BIDI + "]")
_SPACES = re.compile(r"[\n\r\t]+")
# Where GFM's autolink literals start: "http(s)://", "www.", "name@domain".
_AUTOLINK = re.compile(r"(?<=http)(?=s?:)|(?<=www)(?=\.)|(?<=@)", re.IGNORECASE)
WORD_JOINER = "\u2060"
_MD = str.maketrans({c: "\\" + c for c in string.punctuation} | {"<": "&lt;", ">": "&gt;"})
_PLOT_EXTRA = str.maketrans({"$": "&#36;"})


def _escape_one(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: object, limit: int | None = None) -> str:
    """``text`` as a string, cut to ``limit`` characters (an ellipsis ends a cut), with every
    control and bidi control shown as an escape (``\\u202e``); tab and newline kept."""
    value = str(text)
    if limit is not None and len(value) > limit:
        value = value[: max(limit - 1, 0)] + "…"
    return CONTROLS.sub(_escape_one, value)


def md(text: object, limit: int | None = None) -> str:
    """``text`` as literal inline Markdown on one line; cut to ``limit``.

    Punctuation backslash-escaped, ``<`` and ``>`` as entities, newlines and tabs as spaces, a word
    joiner after ``http``, ``www`` and ``@`` so no autolink forms (docs/architecture.md, "One escaper, one
    text helper").
    """
    return _AUTOLINK.sub(WORD_JOINER, _SPACES.sub(" ", visible(text, limit))).translate(_MD)


def md_escape(text: object, limit: int | None = None) -> str:
    """An alias of :func:`md` (the same function)."""
    return md(text, limit)


def plot(text: object, limit: int | None = None) -> str:
    """``text`` for a plotly label, tick or hover: HTML-escaped, controls shown as escapes, no LaTeX."""
    return html.escape(visible(text, limit)).translate(_PLOT_EXTRA)


def html_text(text: object, limit: int | None = None) -> str:
    """``text`` for an HTML fragment: element text or a quoted attribute value."""
    return html.escape(visible(text, limit), quote=True)
