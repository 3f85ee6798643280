"""The overview at the top of the explorer: the open rollout's name, its sources' shapes and its
headline numbers.

Entry point: ``render(rollout)``. The tiles are built by views/builders/headline.py
(``headline_tiles``, re-exported here), each with a (?) giving its one-line meaning.

Where it sits: first on the explorer page (views/screens/explorer.py), above the load report
(views/panels/load_report.py) and the split view.
"""

from __future__ import annotations

import streamlit as st

from rollout_graph.core.rollout import Rollout
from rollout_graph.escape import html_text
from rollout_graph.ui.builders.headline import headline_tiles

__all__ = ["headline_tiles", "render"]


def render(rollout: Rollout) -> None:
    """The title line and the headline tiles."""
    shapes = ", ".join(sorted({c.shape for c in rollout.calls}))
    st.html(
        f'<div style="font-weight:600;font-size:22px;color:#0f172a;margin-top:8px">Rollout {html_text(rollout.session_id)}'
        f'<span style="font-weight:400;font-size:13px;color:#64748b;margin-left:10px">{html_text(shapes)}</span></div>'
    )
    tiles = headline_tiles(rollout)
    # a tile's label wraps instead of ending in "…" ("trainable tokens (rows)" at 1440 px wide)
    st.html(
        "<style>[data-testid='stMetricLabel'] *{white-space:normal!important;overflow:visible!important;"
        "text-overflow:clip!important}</style>"
    )
    for col, (label, value, why) in zip(st.columns(len(tiles)), tiles, strict=True):
        col.metric(label, value, help=why)
