"""The selected rollout and call, kept in session state and mirrored in the URL (`session`,
`node`) so a link in a bug report opens the same view."""

from __future__ import annotations

import streamlit as st

from graph.core.rollout import Rollout

# Every session-state key the app uses is named here (widget keys that depend on the rollout or
# call are built by the functions at the end of this block).
SESSION = "rg_session"
NODE = "rg_node"  # node id of the selected call
HIGHLIGHT = "rg_highlight"  # node chosen outside the chart (deep link, finding, picker)
SEEN = "rg_seen"  # last value seen from each selection widget
PAGES = "rg_pages"  # the st.navigation pages, by name, for st.switch_page
GOTO_EXPLORER = "rg_goto_explorer"  # set by a corpus row; the corpus page then switches pages
SOURCE = "rg_source"  # sidebar: which kind of source
BUNDLED_FILE = "rg_bundled_file"
CLI_FILE = "rg_cli_file"
UPLOADS = "rg_uploads"
SHOW_WHITESPACE = "rg_ws"
NEAR_MISSES = "rg_near"
CORPUS_SOURCE = "rg_corpus_source"
CORPUS_UPLOAD = "rg_corpus_upload"
CORPUS_FILE = "rg_corpus_file"
CORPUS_TABLE = "rg_corpus_table"
CORPUS_NOTICE = "rg_corpus_notice"
# Training signals (views/signals_source.py, views/signals_view.py) and the Compare page.
SIGNALS_ADD = "rg_signals_add"
SIGNALS_UPLOAD = "rg_signals_upload"
SIGNALS_BUNDLED = "rg_signals_bundled"
SIGNALS_THRESHOLD = "rg_signals_threshold"
TOKEN_OVERLAY = "rg_token_overlay"
GROUP_BY = "rg_group_by"
COMPARE_A = "rg_compare_a"
COMPARE_B = "rg_compare_b"


def current_session(session_ids: list[str], default: str) -> str:
    if SESSION not in st.session_state:  # first run: restore a deep link
        wanted = st.query_params.get("session")
        st.session_state[SESSION] = wanted if wanted in session_ids else default
        node = st.query_params.get("node") if wanted == st.session_state[SESSION] else None
        st.session_state[NODE] = node
        st.session_state[HIGHLIGHT] = node
    elif st.session_state[SESSION] not in session_ids:  # another source was opened
        select_session(default)
    _sync_url()
    return st.session_state[SESSION]


def select_session(sid: str) -> None:
    if st.session_state.get(SESSION) != sid:
        st.session_state[SESSION] = sid
        st.session_state[NODE] = None
        st.session_state[HIGHLIGHT] = None
        _sync_url()


def _index(rollout: Rollout, key: str) -> int | None:
    """The arrival index of the call whose id is stored under ``key``, if it is in this rollout."""
    node_id = st.session_state.get(key)
    try:
        return None if node_id is None else rollout.index_of(node_id)
    except KeyError:
        return None


def current_node(rollout: Rollout) -> int | None:
    return _index(rollout, NODE)


def select_node(rollout: Rollout, index: int, from_chart: bool = False) -> None:
    st.session_state[NODE] = rollout.calls[index].node_id
    if not from_chart:
        st.session_state[HIGHLIGHT] = st.session_state[NODE]
    _sync_url()


def highlight(rollout: Rollout) -> int | None:
    return _index(rollout, HIGHLIGHT)


def new_pick(widget: str, value) -> bool:
    """True once per change of a selection widget's value (widgets keep their selection across
    reruns; only a change is a new choice by the user)."""
    seen = st.session_state.setdefault(SEEN, {})
    if seen.get(widget) == value:
        return False
    seen[widget] = value
    return value is not None


def chart_click(rollout: Rollout, points: list) -> None:
    nodes = [p for p in points if p.get("curve_number") == 1]
    index = int(nodes[0]["point_index"]) if nodes else None
    if new_pick(f"dag-{rollout.session_id}", index):
        select_node(rollout, index, from_chart=True)


def _sync_url() -> None:
    wanted = {"session": st.session_state.get(SESSION), "node": st.session_state.get(NODE)}
    for key, value in wanted.items():
        if value is None:
            if key in st.query_params:
                del st.query_params[key]
        elif st.query_params.get(key) != value:
            st.query_params[key] = value
