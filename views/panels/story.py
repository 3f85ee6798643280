"""The story view: what the agent did, conversation by conversation, one page of calls at a time.

Entry points: ``render(rollout, decoder, workspace_key)``: a conversation picker (the agent's
conversations first, then subagents and side calls), the break that began the conversation, then
a page of its calls, each as a chat of the messages it added and its reply, with the lines folded
before it (discarded attempts, other branches) and two buttons: open the call (its detail on the
right) and show it in the graph. The story follows the selected call: a click in the graph, a key
step or a link turns it to the call's page and scrolls to it. ``show_in_story`` is the detail's
way back.

Where it sits: the left pane of the explorer's split view (views/screens/explorer.py), instead of
the graph; the story is rollout_graph.analysis.story (cached per rollout here), its HTML
views/builders/story.py.
"""

from __future__ import annotations

import streamlit as st

from rollout_graph.analysis.decode import Decoder
from rollout_graph.analysis.story import PAGE_SIZE, Story, chapter, outline
from rollout_graph.core.rollout import Rollout
from rollout_graph.escape import md
from rollout_graph.ui import state
from rollout_graph.ui.builders import story as story_html
from rollout_graph.ui.state.widgets import run_script

SCROLL_JS = """<script>
// the selected call's chapter into view inside the story's pane (not the page), once it is laid out
let tries = 0;
function bring() {
  const sel = window.parent.document.querySelector('.rg-ch.rg-sel');
  let pane = sel ? sel.parentElement : null;
  while (pane && !(pane.scrollHeight > pane.clientHeight + 4 && /(auto|scroll)/.test(getComputedStyle(pane).overflowY)))
    pane = pane.parentElement;
  if (!sel || !pane) { if (++tries < 120) requestAnimationFrame(bring); return; }
  const b = sel.getBoundingClientRect(), p = pane.getBoundingClientRect();
  if (b.top < p.top + 110 || b.top > p.bottom - 80) pane.scrollTop += b.top - p.top - 110;  // under the sticky switch
}
requestAnimationFrame(bring);
</script>"""
SHOWN_AGAIN = "rg_story_shown_again"  # the story is drawn after the graph was: go to the selected call


@st.cache_resource(max_entries=8, show_spinner=False)
def _outline(key: str, session_id: str, _rollout: Rollout) -> Story:
    """One story per open rollout (a walk of its topology: about 30 ms at 5,000 calls)."""
    return outline(_rollout)


def story_of(rollout: Rollout, workspace_key: str) -> Story:
    """The open rollout's story (cached)."""
    return _outline(workspace_key, rollout.session_id, rollout)


def _keys(workspace_key: str, rollout: Rollout) -> tuple[str, str, str]:
    base = f"story-{workspace_key}-{rollout.session_id}"
    return f"{base}-conv", f"{base}-page", f"{base}-followed"


def show_in_story(rollout: Rollout, index: int) -> None:
    """Select the call and turn the left pane to the story at it (a button's callback)."""
    state.select_node(rollout, index)
    st.session_state[state.LEFT_VIEW] = state.STORY_VIEW


def _open(rollout: Rollout, index: int, graph: bool) -> None:
    state.select_node(rollout, index)
    if graph:
        st.session_state[state.LEFT_VIEW] = state.GRAPH_VIEW


def _turn(page_key: str, step: int) -> None:
    st.session_state[page_key] = max(0, st.session_state.get(page_key, 0) + step)


def render(rollout: Rollout, decoder: Decoder | None, workspace_key: str) -> None:
    """The story of the open rollout (see the module docstring)."""
    story = story_of(rollout, workspace_key)
    conv_key, page_key, followed_key = _keys(workspace_key, rollout)
    current = state.current_node(rollout)
    scroll = False
    again = st.session_state.pop(SHOWN_AGAIN, False)  # the left pane showed the graph until now
    if current is not None and (again or st.session_state.get(followed_key) != current):
        st.session_state[followed_key] = current
        at = story.page_of(current)
        if at is not None:
            st.session_state[conv_key], st.session_state[page_key] = at
            scroll = True
    if not story.conversations:
        st.caption("No calls in this rollout.")
        return
    conversations = story.conversations
    if st.session_state.get(conv_key) not in range(len(conversations)):
        st.session_state[conv_key] = 0
    st.html(story_html.STYLE)
    st.selectbox(
        "Conversation",
        range(len(conversations)),
        key=conv_key,
        format_func=lambda k: (
            f"{conversations[k].title} · {len(conversations[k].calls):,} "
            f"call{'s' if len(conversations[k].calls) != 1 else ''}"
        ),
        on_change=lambda: st.session_state.__setitem__(page_key, 0),
        help="One conversation per root of the graph: the agent's first, then subagents, then side calls.",
    )
    k = st.session_state[conv_key]
    conv = conversations[k]
    page = min(max(0, int(st.session_state.get(page_key, 0))), conv.pages - 1)
    st.session_state[page_key] = page
    st.html(story_html.conversation_html(rollout, conv, k + 1, len(conversations)))
    if conv.pages > 1:
        _pager(conv, page, page_key, "top")
    start = page * PAGE_SIZE
    for pos, i in enumerate(conv.page(page)):
        for aside in conv.asides.get(i, []):
            st.html(story_html.aside_html(aside))
        with st.container(key=f"rg-story-ch-{i}", gap="small"):
            bar = st.container(horizontal=True, gap="small", vertical_alignment="center")
            bar.button(
                f"Open {md(rollout.calls[i].node_id)}", key=f"story-open-{workspace_key}-{i}", type="tertiary",
                on_click=_open, args=(rollout, i, False), help="Its detail on the right (tokens, messages, findings)",
            )  # fmt: skip
            bar.button(
                "◆ in the graph", key=f"story-graph-{workspace_key}-{i}", type="tertiary",
                on_click=_open, args=(rollout, i, True), help="Select it and show the graph, ringed",
            )  # fmt: skip
            st.html(story_html.chapter_html(chapter(rollout, i, decoder), start + pos + 1, i == current))
    if conv.pages > 1:
        _pager(conv, page, page_key, "bottom")
    if scroll:
        run_script(SCROLL_JS, "rg-script-story")  # our own script, never trace text


def _pager(conv, page: int, page_key: str, where: str) -> None:
    first, last = page * PAGE_SIZE + 1, page * PAGE_SIZE + len(conv.page(page))
    bar = st.container(horizontal=True, gap="small", vertical_alignment="center")
    bar.button("‹ Earlier", key=f"{page_key}-prev-{where}", disabled=page == 0, on_click=_turn, args=(page_key, -1))
    bar.caption(f"Calls {first:,}–{last:,} of {len(conv.calls):,} · page {page + 1} of {conv.pages}")
    bar.button(
        "Later ›", key=f"{page_key}-next-{where}", disabled=page >= conv.pages - 1, on_click=_turn, args=(page_key, 1)
    )
