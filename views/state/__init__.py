"""The selected rollout and call, kept in session state and mirrored in the URL (``session``,
``node``, and for a command-line trace ``file`` and ``line``), so a link in a bug report opens the
same view, even before the server has read the whole trace.

Entry points: ``select_node`` / ``current_node`` / ``highlight`` (the call), ``select_session`` /
``current_session`` (the rollout), ``choose_source``, ``link_missed`` and ``missing_call`` (a link
these traces cannot open), ``search_key`` and ``filter_key`` (widget keys), the session-key
constants every panel reads.

Where it sits: under every panel; it never imports a panel."""

from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from rollout_graph.core.rollout import Rollout

# Every session-state key the app uses is named here (widget keys that depend on the rollout or
# call are built by the functions at the end of this block).
SESSION = "rg_session"
NODE = "rg_node"  # node id of the selected call
NODE_AT = "rg_node_at"  # (file, line) of the selected call's record, as a link names them, or None
HIGHLIGHT = "rg_highlight"  # node chosen outside the chart (deep link, finding, picker)
URL_SYNCED = "rg_url_synced"  # (session, node) as last written to the URL
SEEN = "rg_seen"  # last value seen from each selection widget
LINK_MISSED = "rg_link_missed"  # (session, node) of a link these traces do not hold (session None: it names none): kept in the URL, named
PAGES = "rg_pages"  # the st.navigation pages, by name, for st.switch_page
GOTO_EXPLORER = "rg_goto_explorer"  # set by a corpus row; the corpus page then switches pages
SOURCE = "rg_source"  # sidebar: which kind of source
BUNDLED_FILE = "rg_bundled_file"
CLI_FILE = "rg_cli_file"
UPLOADS = "rg_uploads"
# The sidebar's source and uploads as the visitor last chose them, kept apart from the widgets: each
# page has widgets of its own, so without these a page switch would drop the upload (and show the
# bundled samples instead, silently)
KEPT_SOURCE = "rg_source_kept"
KEPT_UPLOADS = "rg_uploads_kept"
SHOW_WHITESPACE = "rg_ws"
NEAR_MISSES = "rg_near"
CORPUS_SOURCE = "rg_corpus_source"
CORPUS_UPLOAD = "rg_corpus_upload"
CORPUS_FILE = "rg_corpus_file"
CORPUS_TABLE = "rg_corpus_table"
CORPUS_NOTICE = "rg_corpus_notice"
LIVE_PAUSED = "rg_live_paused"  # sidebar: stop following the command-line traces
LIVE_FOLLOW_NEWEST = "rg_live_newest"  # sidebar: select each new call as it arrives
LIVE_FOLLOWED = "rg_live_followed"  # session id -> newest call already selected by "follow newest"
LIVE_GENERATION = "rg_live_generation"  # the live snapshot last drawn
DAG_EXPANDED = "rg_dag_expanded"  # {session id: keys of chains drawn call by call}
DAG_FOCUS = "rg_dag_focus"  # {session id: node id whose subtree alone is drawn}
DAG_COLLAPSE = "rg_dag_collapse"  # toggle: draw linear chains as one segment
DAG_COLOUR = "rg_dag_colour"  # "Colour calls by": "role", or a chosen correction's label (share of tokens affected)
SCROLL_TO_DAG = "rg_scroll_to_dag"  # set when a call is chosen outside the chart: bring the DAG into view
KEEP_VIEW = "rg_keep_view"  # node id chosen by a key: the DAG keeps its view if the call is drawn in it
WARM_CHARTS = (
    "rg_warm_charts"  # this session's pages start with a hidden chart (its code loads early); not for a deep link
)
LEFT_VIEW = "rg_left_view"  # the split view's left pane: the graph or the story
GRAPH_VIEW, STORY_VIEW = "Graph", "Story"
SPLIT_DRAWN = "rg_split_drawn"  # set once this session's split view was drawn (its first run draws the detail first)
SHOW_AUDIT = "rg_show_audit"  # toggle: the Audit panel is computed and drawn only when on
# Finding your way (views/panels/find.py, views/panels/triage.py, views/panels/timeline.py, views/panels/inspector.py)
SEARCH = "rg_search"  # prefix of the search box's widget keys
FILTER = "rg_filter"  # prefix of the filter widgets' keys
TRIAGE_GROUP = "rg_triage_group"  # the findings group (level, code) whose calls are ringed
TIMELINE_OPEN = "rg_timeline_open"  # the timeline expander's own state: open or not
PINNED_STRIP = "rg_pinned_strip"  # the token view whose marked token is pinned in the inspector
SHOWN_STRIPS = "rg_shown_strips"  # token views drawn by the current run (the pin must be on one)


def search_key(workspace_key: str, session_id: str, part: str = "text") -> str:
    return f"{SEARCH}-{part}-{workspace_key}-{session_id}"


def filter_key(workspace_key: str, session_id: str, facet: str) -> str:
    return f"{FILTER}-{facet}-{workspace_key}-{session_id}"


def _url() -> tuple[str | None, str | None]:
    return st.query_params.get("session"), st.query_params.get("node")


LINK_KEYS = ("session", "node", "file", "line")  # what the app writes to the URL for a selection


def link_file(source: str, roots: list[str] | None = None) -> str | None:
    """How a link names the file of a command-line trace: its path relative to the command-line
    argument that holds it (the argument's own name when a file was given), never a server path;
    None for a file not given on the command line (bundled samples, uploads)."""
    for root in sys.argv[1:] if roots is None else roots:
        base = Path(root)
        path = Path(source)
        if path == base:
            return base.name
        if path.is_relative_to(base):
            return path.relative_to(base).as_posix()
    return None


def link_location() -> tuple[str, int] | None:
    """(file, line) of the call the URL names, when the link carries them (links the app writes for
    command-line traces do; older links do not)."""
    file, line = st.query_params.get("file"), st.query_params.get("line")
    if not file or not line or not line.isdigit() or not 0 < int(line) < 10**12:
        return None
    return file, int(line)


def settle_location(rollout: Rollout) -> None:
    """Once the rollout is read, the URL names the selected call's real file and line (a link's
    own may be stale or absent: an older link)."""
    index = current_node(rollout)
    at = None if index is None else _node_at(rollout.calls[index])
    if at != st.session_state.get(NODE_AT):
        st.session_state[NODE_AT] = at
        _sync_url()


def _node_at(call) -> tuple[str, int] | None:
    file = link_file(call.source)
    return None if file is None else (file, int(call.line))


# Training signals (views/state/signals.py, views/panels/signals.py) and the Compare page.
SIGNALS_ADD = "rg_signals_add"
SIGNALS_UPLOAD = "rg_signals_upload"
SIGNALS_BUNDLED = "rg_signals_bundled"
SIGNALS_THRESHOLD = "rg_signals_threshold"
TOKEN_OVERLAY = "rg_token_overlay"
GROUP_BY = "rg_group_by"
COMPARE_A = "rg_compare_a"
COMPARE_B = "rg_compare_b"


def current_session(session_ids: list[str], default: str) -> str:
    """The open rollout. The URL wins when it changed since the app last wrote it: a deep link on
    the first run, or browser Back/Forward (Streamlit reruns with the URL of that history entry)."""
    url_session, url_node = _url()
    missed = st.session_state.get(LINK_MISSED)
    if SESSION not in st.session_state or (missed and url_session in session_ids):
        # first run, or a link that missed and now opens (the same file uploaded): restore it
        st.session_state[SESSION] = url_session if url_session in session_ids else default
        node = url_node if url_session == st.session_state[SESSION] else None
        st.session_state[NODE] = node
        st.session_state[NODE_AT] = link_location() if node else None
        st.session_state[HIGHLIGHT] = node
        # a link to a rollout these traces lack keeps its URL (the page says so) until a choice is made
        # ... and so does a link to a call that names no rollout (``?node=`` without ``session=``)
        st.session_state[LINK_MISSED] = (
            (url_session, url_node)
            if (url_session and url_session not in session_ids) or (url_node and not url_session)
            else None
        )
    elif (
        _history_navigation()
        and (url_session, url_node) != st.session_state.get(URL_SYNCED)
        and url_session in session_ids
    ):
        st.session_state[SESSION] = url_session  # Back/Forward: restore that entry's selection
        st.session_state[NODE] = url_node
        st.session_state[NODE_AT] = link_location() if url_node else None
        st.session_state[HIGHLIGHT] = url_node
    elif st.session_state[SESSION] not in session_ids:  # another source was opened
        select_session(default)
    _sync_url()
    return st.session_state[SESSION]


def _history_navigation() -> bool:
    """True when the browser's Back/Forward started this run. Streamlit flags those runs; an ordinary
    rerun can carry a URL older than the app's last write (a live tick sent before the browser applied
    it, coalesced with the click's rerun), and taking that for a navigation would undo the click.
    Without the flag (older Streamlit) any URL the app did not write counts as a navigation."""
    ctx = get_script_run_ctx()
    return ctx is None or bool(getattr(ctx, "is_history_navigation", True))


def link_missed() -> tuple[str | None, str | None] | None:
    """(session, node) of the link that opened this page when these traces have no such rollout, or
    (None, node) for a link to a call that names no rollout."""
    return st.session_state.get(LINK_MISSED)


def missing_call(rollout: Rollout) -> str | None:
    """The call id the link (or the selection) names when this rollout has no such call."""
    node_id = st.session_state.get(NODE)
    return node_id if node_id is not None and current_node(rollout) is None else None


def choose_source(kind: str) -> None:
    """Point the sidebar's "Traces" radio at ``kind`` from code (a corpus or run row), on every page."""
    st.session_state[SOURCE] = st.session_state[KEPT_SOURCE] = kind


def select_session(sid: str) -> None:
    st.session_state[LINK_MISSED] = None  # a choice: the URL follows it from now on
    if st.session_state.get(SESSION) != sid:
        st.session_state[SESSION] = sid
        st.session_state[NODE] = None
        st.session_state[NODE_AT] = None
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


def select_node(rollout: Rollout, index: int, from_chart: bool = False, keep_view: bool = False) -> None:
    """Select call ``index``. A call chosen outside the chart becomes the DAG's highlight (the figure
    is centred on it, its id boxed); ``from_chart``: a click in the chart, which only rings it;
    ``keep_view`` (a key step): it is only ringed when it is drawn in the DAG's view, else centred
    (views/panels/graph.py decides, it knows the figure)."""
    st.session_state[LINK_MISSED] = None
    st.session_state[NODE] = rollout.calls[index].node_id
    st.session_state[NODE_AT] = _node_at(rollout.calls[index])
    st.session_state[KEEP_VIEW] = st.session_state[NODE] if keep_view else None
    if keep_view:
        st.session_state[SCROLL_TO_DAG] = True
    elif not from_chart:
        st.session_state[HIGHLIGHT] = st.session_state[NODE]
        st.session_state[SCROLL_TO_DAG] = True
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


def no_rollout() -> None:
    """The open source has no rollout (an upload of which nothing loads, or one refused): the
    selection of the source opened before is dropped, from the session and from the URL, so a link
    copied now names nothing it cannot open."""
    for key in (SESSION, NODE, NODE_AT, HIGHLIGHT, LINK_MISSED):
        st.session_state[key] = None
    for key in LINK_KEYS:
        if key in st.query_params:
            del st.query_params[key]
    st.session_state[URL_SYNCED] = (None, None)


def _sync_url() -> None:
    """Write the selection to the URL in one update, so each selection is one history entry. A
    link these traces cannot open is left as it is (the page names what it lacks)."""
    if st.session_state.get(LINK_MISSED):
        return
    at = st.session_state.get(NODE_AT) if st.session_state.get(NODE) else None
    pairs = (
        ("session", st.session_state.get(SESSION)),
        ("node", st.session_state.get(NODE)),
        ("file", at[0] if at else None),
        ("line", str(at[1]) if at else None),
    )
    wanted = {k: v for k, v in pairs if v}
    if wanted != {k: st.query_params.get(k) for k in LINK_KEYS if k in st.query_params}:
        kept = {k: st.query_params.get_all(k) for k in st.query_params if k not in LINK_KEYS}
        st.query_params.from_dict({**kept, **wanted})
    st.session_state[URL_SYNCED] = (wanted.get("session"), wanted.get("node"))
