"""One place that makes trace text safe for the page (pure, testable without a browser).

Traces are untrusted, and Streamlit renders Markdown in far more places than ``st.markdown``:
expander, tab and widget labels, ``help=`` tooltips, captions, alerts, progress text. A node id
like ``![x](https://attacker/pixel.png)`` would make every viewer's browser fetch a remote
image (leaking their address and the time) and ``[docs](https://attacker)`` would show a link.

- :func:`md`: for any Markdown context. Every ASCII punctuation character is backslash-escaped
  (CommonMark renders an escaped character literally, so no emphasis, link, image, autolink,
  HTML, heading, table, ``:color[...]`` directive or ``:emoji:`` survives), newlines become
  spaces and control characters are dropped.
- :func:`plot`: for plotly text (node labels, axis ticks, hover), which renders a subset of HTML
  (``<a href>``, ``<b>``, ``<br>``): HTML-escaped.
- :func:`html_text`: for ``st.html`` fragments (``html.escape``, quotes included).
"""

from __future__ import annotations

import html
import re
import string

_PUNCTUATION = re.compile("([" + re.escape(string.punctuation) + "])")
_CONTROL = re.compile("[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f\\u202a-\\u202e\\u2066-\\u2069]")
_SPACES = re.compile(r"[\n\r\t]+")


def md(text: object, limit: int | None = None) -> str:
    """``text`` as literal inline Markdown (see the module docstring); cut to ``limit`` characters."""
    value = str(text)
    if limit is not None and len(value) > limit:
        value = value[: limit - 1] + "…"
    value = _CONTROL.sub("", _SPACES.sub(" ", value))
    return _PUNCTUATION.sub(r"\\\1", value)


def plot(text: object, limit: int | None = None) -> str:
    """``text`` for a plotly label, tick or hover (HTML-escaped, controls dropped)."""
    value = str(text)
    if limit is not None and len(value) > limit:
        value = value[: limit - 1] + "…"
    return html.escape(_CONTROL.sub("", value))


def html_text(text: object) -> str:
    """``text`` for an ``st.html`` fragment."""
    return html.escape(str(text))


# Markdown labels: every ASCII punctuation character backslash-escaped (was views/builders/escape.py).
_ESCAPES = str.maketrans({c: "\\" + c for c in string.punctuation} | {"\n": " ", "\r": " "})


def md_escape(text: str) -> str:
    """``text`` as literal Markdown on one line."""
    return text.translate(_ESCAPES)
