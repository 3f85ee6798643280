"""A paged token strip with jumps (first sampled token, lowest logprob, any token index) and the
pinned token inspector.

Entry points: ``render(strip, decoder, key, show_whitespace)`` and ``inspector(...)``; the HTML is
views/builders/tokens.py, the inspector's numbers views/builders/inspector.py.

Where it sits: in the detail's Tokens and Sequence tabs (views/screens/explorer.py ``call_detail``)."""

from __future__ import annotations

import streamlit as st

from rollout_graph.analysis.decode import Decoder
from rollout_graph.escape import html_text
from rollout_graph.ui import state
from rollout_graph.ui.builders import overlays
from rollout_graph.ui.builders.inspector import PANEL_HEIGHT, facts_text, token_facts
from rollout_graph.ui.builders.tokens import PAGE_SIZE, TokenStrip, legend_html, page_bounds, page_html, page_of


def render(strip: TokenStrip, decoder: Decoder, key: str, show_whitespace: bool) -> None:
    n = len(strip)
    if n == 0:
        st.caption("No tokens (this call carries no token ids).")
        return
    pages = (n + PAGE_SIZE - 1) // PAGE_SIZE
    page_key, mark_key = f"{key}-page", f"{key}-mark"
    spans = strip.reinserted()  # the origin view opens at the first text the harness re-inserted
    st.session_state.setdefault(page_key, page_of(spans[0]) if spans else 0)
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
    if spans:
        after = [p for p in spans if p > (st.session_state.get(mark_key) or -1)]
        target = (after or spans)[0]
        row.button(
            f"Re-inserted text ({len(spans)}) ▸", key=f"{key}-reinserted", on_click=jump, args=(target,),
            help="The next run of amber tokens: text the policy sampled earlier that the harness put back "
            "(a summary, a subagent's answer)",
        )  # fmt: skip
    index = row.number_input(
        "Token index",
        0,
        n - 1,
        value=None,
        key=f"{key}-index",
        placeholder=f"token # 0–{n - 1:,}",  # whole beside the steppers up to 6-digit counts
        label_visibility="collapsed",
        width=215,
    )
    if state.new_pick(f"{key}-index", index) and index is not None:
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
        strip.overlay.show_corrections(st.session_state.get(overlays.CORRECTION_MARKS) or [])
    st.html(legend_html() if mode == overlays.LOGPROB else overlays.legend_html(strip.overlay, mode))
    if strip.overlay is not None and strip.overlay.marks:
        st.html(overlays.marks_legend(strip.overlay))
    inspector(strip, decoder, key)  # the pinned token's numbers; a click on a token pins it
    page = page_html(strip, start, stop, decoder, show_whitespace, mark=st.session_state[mark_key])
    st.html(f'<div data-strip="{html_text(key)}">{page}</div>')


def inspector(strip: TokenStrip, decoder: Decoder, key: str) -> None:
    """The pinned token inspector of token view ``key``: a click on a token (or a jump: first
    sampled token, lowest logprob, a search hit) pins it; the left/right arrow keys move it token
    by token (views/panels/keyboard); Esc unpins (in the search box Esc clears the search). The panel has a fixed height, so pinning never
    shifts the tokens under the pointer."""
    st.session_state[f"{key}-size"] = len(strip)
    shown = st.session_state.setdefault(state.SHOWN_STRIPS, set())
    shown.add(key)
    position = st.session_state.get(f"{key}-mark")
    with st.container(height=PANEL_HEIGHT, key=f"rg-inspector-{key}", border=True):
        if not isinstance(position, int) or not 0 <= position < len(strip):
            st.caption(
                "**Token inspector.** Click a token to pin its numbers here (id, text, logprob, probability, rank, "
                "alternatives, loss mask, origin). Then ← / → move token by token and Esc unpins (in the search "
                "box, Esc clears the search); "
                "the jumps above pin too."
            )
            return
        active = st.session_state.get(state.PINNED_STRIP)
        if active != key and not (active in shown and isinstance(st.session_state.get(f"{active}-mark"), int)):
            st.session_state[state.PINNED_STRIP] = key  # a jump pinned it: the arrow keys follow it
        # wrapped: a long alternative (top-k text) is read whole, never cut at the panel's edge
        st.code(facts_text(token_facts(strip, position, decoder)), language=None, wrap_lines=True)
