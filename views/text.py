"""Trace text inside Streamlit Markdown (labels, captions): every ASCII punctuation character is
backslash-escaped, so a trace can never add a link, an image, emphasis or HTML; it stays text."""

from __future__ import annotations

import string

_ESCAPES = str.maketrans({c: "\\" + c for c in string.punctuation} | {"\n": " ", "\r": " "})


def md_escape(text: str) -> str:
    """``text`` as literal Markdown on one line."""
    return text.translate(_ESCAPES)
