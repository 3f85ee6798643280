"""The call's parent, children and siblings as buttons: one click (or Tab and Enter) opens them.

Entry point: ``render(rollout, i)``. The keys j/k, h/l and [ ] do the same from anywhere
(views/panels/keyboard); the relatives are ``rollout_graph.analysis.navigation``'s.

Where it sits: under the call's title in the detail pane."""

from __future__ import annotations

import streamlit as st

from rollout_graph.analysis.navigation import siblings
from rollout_graph.core.rollout import Rollout
from rollout_graph.escape import md_escape
from rollout_graph.ui import state

MAX_BUTTONS = 12


def _open(rollout: Rollout, index: int) -> None:
    state.select_node(rollout, index)


def render(rollout: Rollout, i: int) -> None:
    topo = rollout.topology
    parent = topo.parents[i]
    others = [s for s in siblings(topo, i) if s != i]
    groups = [
        ("↑ parent (h)", [] if parent is None else [parent], "none: a root"),
        ("↓ children (l)", topo.children[i], "none: a leaf"),
        ("↔ siblings ([ ])", others, "none"),
    ]
    # each group (its label and its buttons) wraps as one: wrapped one by one, a child's button
    # went to the next line before the siblings' label and read as a sibling
    with st.container(key="rg-relatives", horizontal=True, vertical_alignment="center", gap="small"):
        for (label, members, empty), name in zip(groups, ("parent", "children", "siblings"), strict=True):
            with st.container(
                key=f"rg-relatives-{name}", horizontal=True, width="content", vertical_alignment="center", gap="small"
            ):
                st.caption(label)
                if not members:
                    st.caption(empty)
                for m in members[:MAX_BUTTONS]:
                    st.button(
                        md_escape(rollout.calls[m].node_id),
                        key=f"rel-{rollout.session_id}-{i}-{label[0]}-{m}",
                        on_click=_open,
                        args=(rollout, m),
                        type="secondary",
                        help=f"Open {md_escape(rollout.calls[m].node_id)} (arrival #{m})",
                    )
                if len(members) > MAX_BUTTONS:
                    st.caption(f"+{len(members) - MAX_BUTTONS} more")
