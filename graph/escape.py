"""The one escaper: trace text made safe for a page, a Markdown label or a plotly label (pure).

Traces are untrusted. The Streamlit app and the HTML bundle both use this module, and
nothing else escapes trace text. Streamlit renders Markdown in far more places than
``st.markdown``: expander, tab, button and widget labels, ``help=`` tooltips, captions, alerts,
progress text. A node id like ``![x](https://attacker/pixel.png)`` would make every viewer's
browser fetch a remote image (leaking their address and the time), ``[docs](https://attacker)`` or
a bare ``http://attacker`` would show a link, ``:red[...]`` would colour text, ``$x$`` would be
typeset by KaTeX.

Every function here, first, shows control characters as escapes (``\\x00``, ``\\x1b``,
``\\u202e``): NUL, the C0 and C1 controls (tab and newline excepted) and the bidirectional
controls (U+202A-202E, U+2066-2069, U+200E/200F, U+061C), which would reorder what a reader sees
(a "Trojan Source" id that reads differently from what it is).

- :func:`md`: for any Markdown context. Every ASCII punctuation character is backslash-escaped,
  ``<`` and ``>`` become ``&lt;`` and ``&gt;`` (CommonMark renders both literally, so no emphasis,
  link, image, HTML, heading, table, ``:color[...]`` directive, ``:emoji:`` or ``$`` math
  survives), newlines and tabs become spaces. GitHub-style autolinks (``http://...``, ``www.``,
  e-mail addresses) are found in the text after escapes are undone, so escaping cannot stop them:
  an invisible word joiner (U+2060) after ``http``, ``www`` and ``@`` breaks each one
  (tests/browser/test_browser_hostile.py checks it in Chromium). ``md_escape`` is the older name of ``md``.
- :func:`plot`: for plotly text (node labels, axis ticks, hover), which renders a subset of HTML
  (``<a href>``, ``<b>``, ``<br>``): HTML-escaped, ``$`` as an entity (no LaTeX).
- :func:`html_text`: for text and attribute values in ``st.html`` fragments and HTML files
  (``html.escape``, quotes included).
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
    """``text`` as literal inline Markdown on one line (see the module docstring); cut to ``limit``."""
    return _AUTOLINK.sub(WORD_JOINER, _SPACES.sub(" ", visible(text, limit))).translate(_MD)


def md_escape(text: object, limit: int | None = None) -> str:
    """The older name of :func:`md` (the same function)."""
    return md(text, limit)


def plot(text: object, limit: int | None = None) -> str:
    """``text`` for a plotly label, tick or hover: HTML-escaped, controls shown as escapes, no LaTeX."""
    return html.escape(visible(text, limit)).translate(_PLOT_EXTRA)


def html_text(text: object, limit: int | None = None) -> str:
    """``text`` for an HTML fragment: element text or a quoted attribute value."""
    return html.escape(visible(text, limit), quote=True)
