"""The legend under the DAG as HTML (pure): one meaning per chip, in the glossary's words.

Entry point: ``legend_html(shares_label=None, newest=False)``: roles (colour and marker), kinds
(shape), edges (exact link, collapsed chain, near miss), rings (selected, search hit, newest
call of a growing trace); with ``shares_label`` a first line explains the share-of-tokens scale
the calls are filled by instead of their role.

Where it sits: drawn by the DAG panel (views/panels/graph.py) under the figure
(views/builders/dag/figure.py), whose colours and symbols come from the same palette.
"""

from __future__ import annotations

from rollout_graph.escape import html_text
from rollout_graph.ui.builders.mismatch import NO_SHARE, share_gradient
from rollout_graph.ui.builders.palette import (
    FORK,
    HIGHLIGHT_RING,
    INNER,
    KIND_GLYPHS,
    KIND_LABELS,
    LEAF,
    NEWEST_RING,
    ROLE_COLORS,
    ROLE_GLYPHS,
    ROLE_LABELS,
    ROOT,
    SELECTED_RING,
)

_ITEM = "display:inline-flex;align-items:center;gap:5px;margin-right:16px;white-space:nowrap"


def legend_html(shares_label: str | None = None, newest: bool = False) -> str:
    """The legend under the DAG, one meaning per chip (the glossary's words); with ``shares_label``
    (calls coloured by a correction's share of tokens affected) a first line explains that scale;
    ``newest``: the newest-call ring is drawn (a growing trace is followed)."""
    roles = "".join(
        f'<span style="{_ITEM}"><span style="color:{color};font-size:15px;-webkit-text-stroke:0.4px #334155">'
        f"{ROLE_GLYPHS[role]}</span>{html_text(ROLE_LABELS[role])}</span>"
        for role, color in ROLE_COLORS.items()
    )
    kinds = "".join(
        f'<span style="{_ITEM}"><span style="color:#475569;font-size:15px">{KIND_GLYPHS[k]}</span>{html_text(KIND_LABELS[k])}</span>'
        for k in (ROOT, FORK, LEAF, INNER)
    )
    edges = (
        f'<span style="{_ITEM}"><span style="color:#cbd5e1;font-weight:700">──</span>'
        "exact link: the call extends its parent's ids</span>"
        f'<span style="{_ITEM}"><span style="display:inline-block;width:22px;height:5px;background:#94a3b8;border-radius:2px"></span>'
        "collapsed chain of inner calls (click its handle to expand)</span>"
        f'<span style="{_ITEM}"><span style="color:#d97706;font-weight:700">- -</span>'
        "near miss: a root that nearly continued that call (broken replay, compaction, resume)</span>"
    )
    ring = "display:inline-block;width:11px;height:11px;border-radius:50%;box-sizing:border-box"
    rings = (
        f'<span style="{_ITEM}"><span style="{ring};border:3px solid {SELECTED_RING}"></span>'
        "selected call (its id boxed)</span>"
        f'<span style="{_ITEM}"><span style="{ring};border:2px solid {HIGHLIGHT_RING}"></span>'
        "search hit or chosen findings group</span>"
        + (
            f'<span style="{_ITEM}"><span style="{ring};border:2px solid {NEWEST_RING}"></span>'
            "newest call of the growing trace</span>"
            if newest
            else ""
        )
    )
    share = ""
    if shares_label is not None:
        bar = f"display:inline-block;width:90px;height:10px;border-radius:2px;background:{share_gradient()}"
        grey = f"display:inline-block;width:10px;height:10px;border-radius:5px;background:{NO_SHARE}"
        share = (
            f'<div class="rg-dag-share-legend"><span style="{_ITEM}">Fill: share of tokens affected by '
            f"<b>{html_text(shares_label)}</b></span>"
            f'<span style="{_ITEM}">0 %<span style="{bar}"></span>100 % of the call\'s compared sampled tokens '
            f'clipped or masked</span><span style="{_ITEM}"><span style="{grey}"></span>no compared tokens</span>'
            f'<span style="{_ITEM}">inner calls: small filled circles</span></div>'
        )
    return (
        f'<div style="font-size:12px;color:#334155;line-height:1.7">{share}<div>{roles}</div><div>{kinds}</div>'
        f"<div>{edges}</div><div>{rings}</div></div>"
    )
