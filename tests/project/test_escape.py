"""Trace text reaching the page or the terminal is neutralised: no Markdown, HTML or control codes.

The one escaper is ``rollout_graph.escape`` (the UI's ``rollout_graph.ui.builders.escape`` re-exports
it); tests/browser/test_browser_hostile.py shows the same strings literally in a real browser.
"""

from __future__ import annotations

import re
import string
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from rollout_graph import escape
from rollout_graph.cli.common import terminal_safe
from rollout_graph.escape import BIDI, WORD_JOINER, html_text, md, md_escape, plot, visible
from rollout_graph.ui.builders import escape as ui_escape

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = "![x](https://evil.test/p.png) [docs](https://evil.test) <img src=x> **b** :red[x] # h\nnext"
# Each: a hostile string and what must not survive it in Markdown.
CASES = {
    "image": "![x](http://203.0.113.9/x.png)",
    "html image": "<img src=http://203.0.113.9/x.png>",
    "script": "<script>alert(1)</script>",
    "bold": "**bold**",
    "directive": ":red[x] :blue-background[y]",
    "math": "$x^2$ and $$y$$",
    "autolink": "http://evil.example and https://evil.example/p?q=1",
    "www": "www.evil.example",
    "email": "someone@evil.example",
    "angle autolink": "<http://evil.example>",
    "bidi": "abc\u202edcba\u2066x\u2069\u200e\u200f\u061c",
    "nul": "a\x00b\x1b[31mc\x85d\x9fe",
}
ALL_CONTROLS = re.compile("[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f" + BIDI + "]")
PUNCTUATION = string.punctuation.replace("\\", "").replace("<", "").replace(">", "")
ESCAPERS = {"md": md, "md_escape": md_escape, "plot": plot, "html_text": html_text}


def unescaped(text: str, chars: str) -> list[str]:
    """Characters of ``chars`` in ``text`` not preceded by a backslash."""
    return re.findall(r"(?<!\\)[" + re.escape(chars) + "]", text)


def test_markdown_escape_leaves_no_live_syntax():
    out = md(HOSTILE)
    assert not unescaped(out, "![]()*:#") and "<" not in out
    assert "\n" not in out
    # Every character of the original is still there, in order.
    shown = out.replace("\\", "").replace("&lt;", "<").replace("&gt;", ">").replace(WORD_JOINER, "")
    assert shown == HOSTILE.replace("\n", " ")


def test_markdown_neutralises_every_hostile_case():
    for name, text in CASES.items():
        out = md(text)
        # no punctuation Markdown could act on is left bare: links, images, HTML, emphasis,
        # directives, math, and the ':' '.' '@' an autolink needs
        assert not unescaped(out.replace("&lt;", "").replace("&gt;", ""), PUNCTUATION), (name, out)
        assert not ALL_CONTROLS.search(out), (name, out)
        assert "\n" not in out


def test_autolinks_cannot_start():
    # GFM finds autolinks in the text once escapes are undone: a word joiner breaks each start
    wj = WORD_JOINER
    assert md("http://evil.example") == f"http{wj}\\:\\/\\/evil\\.example"
    assert md("HTTPS://x") == f"HTTP{wj}S\\:\\/\\/x"
    assert md("www.evil.example") == f"www{wj}\\.evil\\.example"
    assert md("a@b.example") == f"a\\@{wj}b\\.example"


# GFM's autolink literals (mdast-util-gfm-autolink-literal), matched on the text Markdown shows:
GFM_AUTOLINK = re.compile(r"https?://|www\.|[-.\w+]+@[-\w]+(?:\.[-\w]+)+", re.IGNORECASE | re.ASCII)


def shown_text(markdown: str) -> str:
    """What CommonMark shows for ``md`` output: backslash escapes and the two entities undone."""
    return re.sub(r"\\(.)", r"\1", markdown).replace("&lt;", "<").replace("&gt;", ">")


@given(st.lists(st.sampled_from(list("htps:/w.@abcHTTPSW-_+ ") + ["http://", "www.", "a@b.c"])).map("".join))
def test_no_autolink_survives(text):
    assert not GFM_AUTOLINK.search(shown_text(md(text))), (text, md(text))


def test_controls_are_shown_not_sent():
    assert md("a\x1b[31mb", 100) == "a\\\\x1b\\[31mb"  # shown as the text \x1b
    assert visible("id\u202eexe.txt") == "id\\u202eexe.txt"
    assert visible("a\x00b\tc\nd") == "a\\x00b\tc\nd"  # tab and newline are text
    assert html_text("a\u2066b\x00") == "a\\u2066b\\x00"
    assert plot("a\u061cb\u200f") == "a\\u061cb\\u200f"
    assert md_escape("x\u202e") == md("x\u202e") == "x\\\\u202e"


def test_cut():
    assert md("x" * 50, 10) == "x" * 9 + "…"
    assert plot("abcdefghijklmnop", 14) == "abcdefghijklm…"
    assert html_text("abcdef", 4) == "abc…"


def test_plot_and_html_escape():
    assert plot("<a href='https://evil.test'>x</a>") == "&lt;a href=&#x27;https://evil.test&#x27;&gt;x&lt;/a&gt;"
    assert plot("$x^2$") == "&#36;x^2&#36;"  # plotly typesets $...$ as LaTeX
    assert html_text('"<b>"') == "&quot;&lt;b&gt;&quot;"
    assert html_text("<script>alert(1)</script>") == "&lt;script&gt;alert(1)&lt;/script&gt;"


def test_the_ui_module_is_the_library_one():
    for name in escape.__all__:
        assert getattr(ui_escape, name) is getattr(escape, name)


def test_views_never_escape_on_their_own():
    """Every escape in the UI goes through the one module: no ``html.escape`` of its own."""
    offenders = []
    for path in sorted((ROOT / "views").rglob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"\bhtml\.escape\(|from html import", line):
                offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


@given(st.text())
def test_no_escaper_lets_through_markup_or_controls(text):
    for name, fn in ESCAPERS.items():
        out = fn(text)
        assert "<" not in out and ">" not in out, (name, text, out)
        assert not ALL_CONTROLS.search(out), (name, text, out)
        assert "\x00" not in out


@given(st.text(alphabet=st.sampled_from(string.punctuation + "abc \n\u202e\x00:/.@$[]()!<>")))
def test_markdown_leaves_no_bare_punctuation(text):
    out = md(text)
    bare = out.replace("\\\\", "").replace("&lt;", "").replace("&gt;", "")
    assert not unescaped(bare, PUNCTUATION), (text, out)
    assert "\n" not in out


def test_terminal_output_escapes_control_characters():
    assert terminal_safe("s\x1b]0;owned\x07id\u202e\nnext\tx") == "s\\x1b]0;owned\\x07id\\u202e\nnext\tx"
    # the same list of controls as the page's escaper: the marks and isolates too
    assert terminal_safe("a\u200fb\u061cc\u2067d") == "a\\u200fb\\u061cc\\u2067d"
