"""The first screen's top: what this is in one line, the open rollout's story in three numbers and
one picture, where to click, and the tour and the glossary one click away.

Entry point: ``render(rollout, story, tour)``: the line and the tour and glossary buttons
(popovers: reachable without scrolling), the rollout's name, its three numbers (model calls,
conversations, tokens to train on; each with a (?) that gives its one-line meaning) and its
findings, the conversations as one bar (the picture: what the agent did, at a glance), and every
headline count in "All counts". ``tour(rollout)`` draws the tour's content (the caller passes it).

Where it sits: first on the explorer page (views/screens/explorer.py), above the load report and
the split view; the words and numbers are views/builders/headline.py, the bar
views/builders/story.py, the story rollout_graph.analysis.story.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from rollout_graph.analysis.story import Story
from rollout_graph.core.rollout import Rollout
from rollout_graph.escape import html_text
from rollout_graph.ui.builders import story as story_html
from rollout_graph.ui.builders.headline import (
    GLOSSARY,
    INTRO,
    WHERE_TO_CLICK,
    headline_tiles,
    numbers_html,
    story_numbers,
)

__all__ = ["headline_tiles", "render"]

STYLE = (
    "<style>.rg-intro{font:14px/1.45 system-ui,sans-serif;color:#334155;margin:0}"
    ".rg-intro b{color:#0f172a}.rg-title{font:600 20px system-ui,sans-serif;color:#0f172a;margin-right:8px;overflow-wrap:anywhere}"
    ".rg-title span{font-weight:400;font-size:13px;color:#64748b;margin-left:10px}"
    ".rg-where{font:13px system-ui,sans-serif;color:#475569;margin-top:4px}"
    ".rg-gloss{font:13px/1.5 system-ui,sans-serif;color:#334155}.rg-gloss dt{font-weight:600;margin-top:6px}"
    ".rg-gloss dd{margin:0 0 0 0}</style>"
)


def glossary_html() -> str:
    """The graph's words, one line each (escaped)."""
    rows = "".join(f"<dt>{html_text(word)}</dt><dd>{html_text(meaning)}</dd>" for word, meaning in GLOSSARY)
    return f'<dl class="rg-gloss">{rows}</dl>'


def counts(rollout: Rollout) -> None:
    """Every headline count as a tile with its (?) definition, in two rows (the "All counts" popover)."""
    tiles = headline_tiles(rollout)
    with st.container(width=640):
        st.html(
            "<style>[data-testid='stMetricLabel'] *{white-space:normal!important;overflow:visible!important;"
            "text-overflow:clip!important}</style>"
        )
        for row in (tiles[:4], tiles[4:]):
            for col, (label, value, why) in zip(st.columns(4), row, strict=False):
                col.metric(label, value, help=why)


def render(rollout: Rollout, story: Story, tour: Callable[[], None]) -> None:
    """The top of the first screen (see the module docstring)."""
    st.html(STYLE)
    top = st.container(horizontal=True, vertical_alignment="center", gap="small", key="rg-intro", wrap=False)
    top.html(f'<p class="rg-intro"><b>rollout-graph</b> · {html_text(INTRO)}</p>', width="stretch")
    with top.popover(
        "Take the tour",
        icon=":material/tour:",
        help="What you are looking at, and one click to each kind of interesting call",
    ):
        tour()
    with top.popover("What the words mean", icon=":material/help:"):
        st.html(glossary_html())
    shapes = ", ".join(sorted({c.shape for c in rollout.calls}))
    row = st.container(horizontal=True, vertical_alignment="center", gap="small", key="rg-headline", wrap=False)
    title = f'<span class="rg-title">Rollout {html_text(rollout.session_id)}<span>{html_text(shapes)}</span></span>'
    row.html(numbers_html(story_numbers(rollout, story), rollout, title), width="stretch")
    with row.popover("All counts", help="Every headline count, each with its definition"):
        counts(rollout)
    st.html(
        story_html.STYLE
        + '<div class="rg-picture">'
        + story_html.strip_html(rollout, story)
        + f'<div class="rg-where">{WHERE_TO_CLICK}</div></div>'
    )
