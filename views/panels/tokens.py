"""A paged token strip with jumps: first sampled token, lowest logprob, any token index."""

from __future__ import annotations

import html

import streamlit as st

from rollout_graph.analysis.decode import Decoder
from rollout_graph.ui import state
from rollout_graph.ui.builders import overlays
from rollout_graph.ui.builders.tokens import PAGE_SIZE, TokenStrip, legend_html, page_bounds, page_html, page_of
from rollout_graph.ui.panels import inspector


def jump_to(key: str, position: int) -> None:
    """Open the page of ``position`` in the token view ``key`` with a ring on it (before it renders)."""
    st.session_state[f"{key}-page"] = page_of(position)
    st.session_state[f"{key}-mark"] = position


def render(strip: TokenStrip, decoder: Decoder, key: str, show_whitespace: bool) -> None:
    n = len(strip)
    if n == 0:
        st.caption("No tokens (this call carries no token ids).")
        return
    pages = (n + PAGE_SIZE - 1) // PAGE_SIZE
    page_key, mark_key = f"{key}-page", f"{key}-mark"
    st.session_state.setdefault(page_key, 0)
    st.session_state.setdefault(mark_key, None)

    def jump(position: int | None) -> None:
        if position is not None:
            st.session_state[page_key] = page_of(position)
            st.session_state[mark_key] = position

    def turn(step: int) -> None:
        st.session_state[page_key] = min(pages - 1, max(0, st.session_state[page_key] + step))

    # one wrapping row: in the split view's narrow detail pane no label is cut off
    row = st.container(horizontal=True, gap="small", vertical_alignment="center")
    first, lowest = strip.first_sampled(), strip.lowest_logprob()
    row.button("First sampled token", key=f"{key}-first", on_click=jump, args=(first,), disabled=first is None)
    row.button("Lowest logprob", key=f"{key}-low", on_click=jump, args=(lowest,), disabled=lowest is None)
    index = row.number_input(
        "Token index",
        0,
        n - 1,
        value=None,
        key=f"{key}-index",
        placeholder=f"token index 0…{n - 1:,}",
        label_visibility="collapsed",
        width=170,
    )
    if state.new_pick(f"{key}-index", index):
        jump(int(index))
    page = st.session_state[page_key]
    row.button("◀", key=f"{key}-prev", on_click=turn, args=(-1,), disabled=page == 0, help="previous page")
    row.button("▶", key=f"{key}-next", on_click=turn, args=(1,), disabled=page >= pages - 1, help="next page")
    start, stop = page_bounds(strip, st.session_state[page_key])
    row.caption(
        f"tokens {start:,}–{stop - 1:,} of {n:,} · page {st.session_state[page_key] + 1} of {pages}", width="content"
    )
    mode = st.session_state.get(state.TOKEN_OVERLAY, overlays.LOGPROB)
    if strip.overlay is not None:
        strip.overlay.mode = mode
    st.html(legend_html() if mode == overlays.LOGPROB else overlays.legend_html(strip.overlay, mode))
    inspector.render(strip, decoder, key)  # the pinned token's numbers; a click on a token pins it
    page = page_html(strip, start, stop, decoder, show_whitespace, mark=st.session_state[mark_key])
    st.html(f'<div data-strip="{html.escape(key, quote=True)}">{page}</div>')
