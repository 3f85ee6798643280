"""Trace text reaching the page or the terminal is neutralised: no Markdown, HTML or control codes."""

from __future__ import annotations

import re

from rollout_graph.cli.common import terminal_safe
from rollout_graph.ui.builders.escape import html_text, md, plot

HOSTILE = "![x](https://evil.test/p.png) [docs](https://evil.test) <img src=x> **b** :red[x] # h\nnext"


def unescaped(text: str, chars: str) -> list[str]:
    """Characters of ``chars`` in ``text`` not preceded by a backslash."""
    return re.findall(r"(?<!\\)[" + re.escape(chars) + "]", text)


def test_markdown_escape_leaves_no_live_syntax():
    out = md(HOSTILE)
    assert not unescaped(out, "![]()<>*:#")
    assert "\n" not in out
    # Every character of the original is still there, in order.
    assert out.replace("\\", "") == HOSTILE.replace("\n", " ")


def test_markdown_escape_cuts_and_drops_controls():
    assert md("a\x1b[31mb", 100) == "a\\[31mb"
    assert md("x" * 50, 10) == "x" * 9 + "…"


def test_plot_and_html_escape():
    assert plot("<a href='https://evil.test'>x</a>") == "&lt;a href=&#x27;https://evil.test&#x27;&gt;x&lt;/a&gt;"
    assert plot("abcdefghijklmnop", 14) == "abcdefghijklm…"
    assert html_text('"<b>"') == "&quot;&lt;b&gt;&quot;"


def test_terminal_output_escapes_control_characters():
    assert terminal_safe("s\x1b]0;owned\x07id\u202e\nnext\tx") == "s\\x1b]0;owned\\x07id\\u202e\nnext\tx"
