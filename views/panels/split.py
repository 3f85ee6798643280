"""The explorer's split view: two panes the height of the window, a draggable divider between
them (its width remembered in the browser), stacked on a narrow window.

Entry point: ``render(box, share=0.58)``: inside ``st.container(key=box)`` holding one row of two
columns, it sends the style that makes both columns the window's height with a scroll of their
own, and draws the divider component (``split_client/index.html``, a zero-height static component: it sets the
left pane's share of the width from a drag or the arrow keys and keeps it in localStorage).

Where it sits: the explorer's selection fragment (views/screens/explorer.py) draws the graph or the
story on the left, the call's detail on the right (docs/user-guide.md, "The split view").
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st
import streamlit.components.v1 as components

_component = components.declare_component("rg_split", path=str(Path(__file__).parent / "split_client"))
STACK_BELOW = 1100  # px of window width under which the panes stack (the sidebar takes ~300 px)
TOP_GAP = 12  # px left above the panes when the page is scrolled to them


def style(box: str, sticky: str = "") -> str:
    """The panes the window's height, each scrolling on its own; stacked (each as tall as its
    content) on a narrow window; the divider a 6 px grip between them; ``sticky``: a selector of
    what stays at the top of its pane."""
    # the row of the two panes only (a pane holds rows of its own: the search box's, the toolbar's)
    row = f".st-key-{box} > [data-testid='stLayoutWrapper'] > [data-testid='stHorizontalBlock']"
    pane = f"{row} > [data-testid='stColumn']"
    return (
        "<style>"
        f"@media (min-width:{STACK_BELOW}px){{"
        f"{row}{{position:relative;flex:0 0 auto!important;height:calc(100vh - {TOP_GAP}px);align-items:stretch;"
        "flex-wrap:nowrap}"
        f"{pane}{{height:100%;overflow-y:auto;overflow-x:hidden;overscroll-behavior:contain;padding-right:4px}}"
        # the pane's content as tall as it is (a sticky switch then sticks over the whole of it)
        f"{pane} > [data-testid='stVerticalBlock']{{height:auto!important;min-height:100%}}"
        "}"
        f"@media (max-width:{STACK_BELOW - 1}px){{"
        f"{row}{{flex-direction:column}}"
        f"{pane}{{width:100%!important;flex:1 1 auto!important}}"
        "}"
        f".st-key-{box} .rg-divider{{position:absolute;top:0;bottom:0;width:6px;margin-left:-3px;cursor:col-resize;"
        "z-index:5;border-radius:3px;background:linear-gradient(to right,transparent 2px,#e2e8f0 2px,#e2e8f0 4px,transparent 4px)}"
        f".st-key-{box} .rg-divider:hover,.st-key-{box} .rg-divider:focus-visible{{outline:none;"
        "background:linear-gradient(to right,transparent 1px,#94a3b8 1px,#94a3b8 5px,transparent 5px)}"
        "body.rg-dragging{cursor:col-resize;user-select:none}"
        # the graph/story switch stays at the top of its pane while the pane scrolls
        f"{sticky}{{position:sticky;top:0;z-index:4;background:#fff;padding:4px 0 8px;box-shadow:0 6px 6px -6px #cbd5e1}}"
        "</style>"
    )


def render(box: str, share: float = 0.58, sticky: str = "") -> None:
    """The style and the divider of the split in ``st.container(key=box)`` (call it inside)."""
    st.html(style(box, sticky or ".rg-none"))
    with st.container(key=f"{box}-client"):  # hidden by the style inside it: no gap, no height
        st.html(
            f"<style>.st-key-{box}-client, [data-testid='stLayoutWrapper']:has(> .st-key-{box}-client){{display:none}}</style>"
        )
        _component(box=box, share=share, stack=STACK_BELOW, key=f"{box}-divider", default=None)
