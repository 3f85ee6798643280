"""The DAG's figure, cached on what it draws, and the first visitor's figure built before the visit.

Entry points: ``drawing(...)`` (the cached figure and its ``Targets``; the selection and search
hits are not in it: the browser rings them) and ``first_page_drawing(paths)`` (the same cached call
with a first visit's arguments, made by views/serve.py once the command-line traces are read).

Where it sits: between the builders (views/builders/dag/) and the DAG panel
(views/panels/graph.py), which cannot be imported before a page run because it declares a
component (docs/performance.md "Keys and the first search")."""

from __future__ import annotations

from pathlib import Path

import plotly.graph_objects as go
import streamlit as st

from rollout_graph.core.rollout import Rollout
from rollout_graph.ui.builders import mismatch
from rollout_graph.ui.builders.dag import Targets, dag_drawing
from rollout_graph.ui.state import live


@st.cache_resource(max_entries=16, show_spinner=False)
def drawing(
    key: str,
    session_id: str,
    highlight: int | None,
    near_misses: bool,
    collapse: bool,
    expanded: frozenset[int],
    focus: int | None,
    newest: int | None,
    _rollout: Rollout,
    dimmed: frozenset[int] = frozenset(),
    fit_all: bool = False,
    colour_by: str | None = None,
) -> tuple[go.Figure, Targets]:
    """The figure sent to the browser, a pure function of the rollout and the drawing options, and
    where each call's ring goes in it. Dimmed (filtered out) calls are veiled in it; when following
    a live trace, the newest call is ringed in it. The selection and the search hits are not in it:
    the browser rings them over it (views/panels/dag_client), so a key step, a click or a search
    sends the same figure and plotly does not draw it again. The view (its range and
    ``uirevision``) depends only on the call chosen outside the chart. ``colour_by``: a
    correction's label, calls filled by the share of their tokens it affects."""
    shares = None if colour_by is None else mismatch.correction_shares(_rollout, colour_by)
    figure, targets = dag_drawing(
        _rollout,
        highlight,
        near_misses=near_misses,
        collapse=collapse,
        expanded=expanded,
        focus=focus,
        dimmed=dimmed,
        fit_all=fit_all,
        shares=shares,
        shares_label=colour_by or "",
    )
    return (figure if newest is None else live.mark_newest(figure, newest)), targets


def first_page_drawing(paths: list[str]) -> bool:
    """Build the DAG figure a first visit to these command-line traces draws (waits for their first
    read). Whether one was built: not for traces without a rollout."""
    found = live.source([Path(p) for p in paths], live.COMMAND_LINE_LABEL)
    workspace = found.workspace()
    if not workspace.rollouts:
        return False
    rollout = workspace.rollouts[workspace.default_session]
    # the panel's defaults: no call highlighted, near-miss links shown, chains collapsed, none
    # expanded, no focus, no filter, not "Fit all", coloured by role
    drawing(
        workspace.key,
        rollout.session_id,
        None,
        True,
        True,
        frozenset(),
        None,
        found.newest_index(rollout),
        rollout,
        frozenset(),
        False,
        None,
    )
    return True
