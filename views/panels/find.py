"""Find calls: a search box over the open rollout (hits by call, a hit opens the call at the
token) and filters that dim the calls that do not match.

Entry point: ``render(rollout, decoder, workspace_key) -> Found``: the search box, its hit list
and the "Filter calls" expander; returns the calls to ring (hits) and to veil (filtered out) in
the DAG. ``chosen_filter`` reads the filter back from its widgets' keys; ``open_hit`` is a hit's
click (selects the call and turns its token view to the token).

Where it sits: in the explorer's selection fragment (views/screens/explorer.py), above the DAG;
the matching is graph/analysis (search, filters), the index is built in the background by
views/state/search_index.py, the hits' words by views/builders/search.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import streamlit as st

from rollout_graph.analysis import filters
from rollout_graph.analysis.decode import Decoder
from rollout_graph.analysis.search import Hit, Query, SearchError, SearchIndex, first_entered, search, strip_position
from rollout_graph.core.rollout import Rollout
from rollout_graph.escape import md_escape
from rollout_graph.ui import state
from rollout_graph.ui.builders.search import by_call, hit_rows
from rollout_graph.ui.builders.tokens import page_of
from rollout_graph.ui.state import search_index
from rollout_graph.ui.state.search_index import PreparedIndex
from rollout_graph.ui.state.sources import ACTIVITY

MAX_HITS_SHOWN = 40
SEARCH_BOX_LABEL = "Search this rollout"
# Hits read as a list, left-aligned and dense, not as centred buttons.
HITS_STYLE = (
    "<style>.st-key-rg-search-hits button{justify-content:flex-start;text-align:left;min-height:0;"
    "padding:3px 8px;border-radius:4px;width:100%}.st-key-rg-search-hits button>div{justify-content:flex-start;width:100%}.st-key-rg-search-hits button:hover,.st-key-rg-search-hits "
    "button:focus-visible{background:#eff6ff}.st-key-rg-search-hits [data-testid=stVerticalBlock]{gap:0}"
    ".st-key-rg-search-hits button p{white-space:nowrap;overflow:hidden;text-overflow:ellipsis;"
    "font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12.5px}</style>"
)


@st.cache_resource(max_entries=8, show_spinner=False)
def _index(key: str, session_id: str, _rollout: Rollout, _decoder: Decoder) -> PreparedIndex:
    """One index per open rollout, reused by every search (and every visitor) of it."""
    return PreparedIndex(SearchIndex(_rollout, _decoder))


def token_view_key(workspace_key: str, rollout: Rollout, index: int) -> str:
    """The key views/panels/node.py gives a call's token view (context span, then sampled span)."""
    return f"tok-{workspace_key}-{rollout.session_id}-{rollout.calls[index].node_id}"


def open_hit(rollout: Rollout, workspace_key: str, hit: Hit) -> None:
    """Select the hit's call and, for a token hit, open its Tokens tab at the token's page, ring it
    and pin it in the inspector (the detail keeps its title in view: the token is a scroll away)."""
    state.select_node(rollout, hit.index)
    position = strip_position(rollout, hit)
    if position is not None:
        key = token_view_key(workspace_key, rollout, hit.index)
        st.session_state[f"{key}-page"] = page_of(position)
        st.session_state[f"{key}-mark"] = position
        st.session_state[state.PINNED_STRIP] = key  # the inspector shows the token's numbers
        st.session_state[f"tabs-{key.removeprefix('tok-')}"] = "Tokens"  # the call's detail opens on its tokens


@dataclass(frozen=True)
class Found:
    """What the search and the filters ask of the DAG: calls to ring, calls to veil."""

    hits: frozenset[int]
    dimmed: frozenset[int]


def render(rollout: Rollout, decoder: Decoder, workspace_key: str) -> Found:
    """The search box with its hits, then the filters."""
    hits = search_panel(rollout, decoder, workspace_key)
    return Found(hits, filter_panel(rollout, workspace_key))


def search_panel(rollout: Rollout, decoder: Decoder, workspace_key: str) -> frozenset[int]:
    """The search box and its hits; returns the calls to ring in the DAG. The rollout's search
    index is built in the background once the page is drawn (views/state/search_index.py), so the
    first search is as fast as the next."""
    sid = rollout.session_id
    search_index.prepare(_index(workspace_key, sid, rollout, decoder), sid, ACTIVITY)
    box, regex_col, case_col = st.columns([3.2, 1, 1.4], vertical_alignment="center")
    text = box.text_input(
        SEARCH_BOX_LABEL,
        key=state.search_key(workspace_key, sid),
        type="search",  # a clear button (×) in the box while it holds text
        placeholder="Search this rollout  ( / focuses, Esc clears )",
        label_visibility="collapsed",  # the label stays the box's accessible name (the / key finds it by it)
    )
    regex = regex_col.toggle("Regex", key=state.search_key(workspace_key, sid, "regex"))
    ignore_case = case_col.toggle("Ignore case", key=state.search_key(workspace_key, sid, "case"))
    with _answer_slot(workspace_key, sid, (text, regex, ignore_case)).container():
        return _answer(rollout, decoder, workspace_key, text, regex, ignore_case)


def _answer_slot(workspace_key: str, session_id: str, asked: tuple[str, bool, bool]):
    """Where the answer to ``asked`` is drawn: one of two placeholders, there with or without a
    search (the page keeps as many elements above the DAG, so the DAG's chart keeps its place and is
    not mounted again when a search starts or ends). A new question takes the other placeholder and
    the old answer's is left empty, so the browser drops the old hits on that message alone. Drawn
    in the same container, the new answer would inherit the old one's elements until the run's
    end removes those not drawn again, and Streamlit skips that removal when another fragment's run
    (a followed trace's tick, views/state/live.py) starts before the run's end has reached the
    browser: a cleared search kept its hits (docs/performance.md "Limits: what is not met")."""
    slots = st.empty(), st.empty()
    key = state.search_key(workspace_key, session_id, "answer")
    last = st.session_state.get(key)
    index = last[1] if last and last[0] == asked else (1 - last[1] if last else 0)
    st.session_state[key] = (asked, index)
    return slots[index]


def _answer(
    rollout: Rollout, decoder: Decoder, workspace_key: str, text: str, regex: bool, ignore_case: bool
) -> frozenset[int]:
    sid = rollout.session_id
    if not text:
        return frozenset()
    try:
        query = Query.compile(text, regex=regex, ignore_case=ignore_case)
    except SearchError as exc:
        st.error(md_escape(str(exc)))
        return frozenset()
    with _index(workspace_key, sid, rollout, decoder).searching() as index:
        index.prepare()  # built once, under the lock; the search below only reads it
    try:  # a pattern runs in a capped child process, killed at its limit (docs/limits.md)
        hits = search(index, query)
    except SearchError as exc:
        st.error(md_escape(str(exc)))
        return frozenset()
    if (note := index.partial_note()) is not None:  # the index's byte budget left calls out (docs/limits.md)
        st.caption(md_escape(note))
    calls = sorted({h.index for h in hits})
    if not hits:
        st.caption(f"No call holds {md_escape(repr(text))}.")
        return frozenset()
    first = first_entered(hits)
    lead = f"**{len(hits)}** hit(s) in **{len(calls)}** call(s), ringed in the graph."
    if first is not None:
        lead += (
            f" First entered the context at **{md_escape(rollout.calls[first.index].node_id)}**"
            f" (message {first.message_index}, {md_escape(first.role or '')})."
        )
    st.markdown(lead)
    grouped = by_call(hits)
    rows = hit_rows(dict(list(grouped.items())[:MAX_HITS_SHOWN]), rollout.node_ids)
    st.html(HITS_STYLE)
    # at most four rows high: the graph below stays in its pane's first screen
    with st.container(height=min(132, 31 * len(rows) + 8), key="rg-search-hits"):
        for row in rows:
            st.button(
                md_escape(row.label),
                key=state.search_key(workspace_key, sid, f"hit-{row.calls[0]}"),
                on_click=open_hit,
                args=(rollout, workspace_key, row.target),
                width="stretch",
                type="tertiary",
                help="Open this call"
                + (" at the token (pinned in the inspector)" if row.target.token_index is not None else "")
                + (
                    f"; the {len(row.calls) - 1} later calls with the same hit are ringed in the graph"
                    if len(row.calls) > 1
                    else ""
                ),
            )
    if len(grouped) > MAX_HITS_SHOWN:
        st.caption(f"First {MAX_HITS_SHOWN} calls shown; `rollout-graph search` lists them all.")
    return frozenset(calls)


def _label(counts, value: str) -> str:
    return f"{value} ({counts[value]})"


FACETS = ("roles", "levels", "codes", "finish_reasons", "linked_by", "models")
LOW, THRESHOLD = "low", "threshold"  # the logprob filter's toggle and value
DEFAULT_THRESHOLD = -5.0


@st.cache_resource(max_entries=8, show_spinner=False)
def _facet_values(key: str, session_id: str, _rollout: Rollout):
    """Every facet's values and counts, once per open rollout (a loop over every call's findings)."""
    return filters.facet_values(_rollout)


def chosen_filter(workspace_key: str, session_id: str) -> filters.CallFilter:
    """The filter the visitor chose, read from the filter widgets' keys (set or not, drawn or not)."""
    got = st.session_state.get

    def facet(name: str) -> frozenset[str]:
        value = got(state.filter_key(workspace_key, session_id, name))
        return frozenset(v for v in value if isinstance(v, str)) if isinstance(value, list | tuple) else frozenset()

    threshold = got(state.filter_key(workspace_key, session_id, THRESHOLD), DEFAULT_THRESHOLD)
    low = bool(got(state.filter_key(workspace_key, session_id, LOW)))
    below = float(threshold) if low and isinstance(threshold, int | float) and not math.isnan(threshold) else None
    return filters.CallFilter(**{name: facet(name) for name in FACETS}, logprob_below=below)


def _keep_choices(workspace_key: str, session_id: str) -> None:
    """The filter widgets are not drawn while their expander is closed; Streamlit drops the state
    of a widget a run does not draw, so their values are set again, before the widgets (if drawn),
    on every run: the filter stays on while closed, and a widget drawn again is sent the value it
    had (a value kept only on the server would be used while the browser shows the widget empty)."""
    for name in (*FACETS, LOW, THRESHOLD):
        key = state.filter_key(workspace_key, session_id, name)
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]


def filter_panel(rollout: Rollout, workspace_key: str) -> frozenset[int]:
    """Facets over the calls; returns the calls that do not match (the DAG dims them). The facets'
    widgets are built only while their expander is open: a key step or a click reruns this
    fragment, and the browser would otherwise render six multiselects and a slider it does not
    show every time (docs/performance.md "Keys and the first search")."""
    sid = rollout.session_id
    n = len(rollout.calls)
    st.session_state.setdefault(state.filter_key(workspace_key, sid, THRESHOLD), DEFAULT_THRESHOLD)
    panel = st.expander("Filter calls", key=state.filter_key(workspace_key, sid, "open"), on_change="rerun")
    _keep_choices(workspace_key, sid)
    with panel:
        if panel.open:
            _filter_widgets(rollout, workspace_key)
        wanted = chosen_filter(workspace_key, sid)
        keep = filters.matching(rollout, wanted)
        if panel.open:
            if wanted.active:
                st.markdown(f"**{int(keep.sum())} of {n} calls match**; the others are dimmed in the graph.")
            else:
                st.caption(f"No filter: all {n} calls shown. Values show how many calls have each.")
    note = st.empty()  # there with or without a filter: the elements above the DAG stay as many
    if wanted.active:  # an element, not a container: a filter turned off replaces the note with nothing
        note.caption(f"Filter on: {int(keep.sum())} of {n} calls match; the others are dimmed.")
    return frozenset(int(i) for i in (~keep).nonzero()[0])


def _filter_widgets(rollout: Rollout, workspace_key: str) -> None:
    values = _facet_values(workspace_key, rollout.session_id, rollout)
    sid = rollout.session_id

    def pick(column, label: str, facet: str) -> None:
        counts = values[facet]
        column.multiselect(
            label,
            sorted(counts),
            format_func=lambda v: _label(counts, v),
            key=state.filter_key(workspace_key, sid, facet),
            placeholder="any",
        )

    top = st.columns(3)
    pick(top[0], "Role", "roles")
    pick(top[1], "Finding level", "levels")
    pick(top[2], "Finding code", "codes")
    bottom = st.columns(3)
    pick(bottom[0], "Finish reason", "finish_reasons")
    pick(bottom[1], "Linked by", "linked_by")
    pick(bottom[2], "Model", "models")
    low_col, value_col = st.columns([1, 2], vertical_alignment="bottom")
    low = low_col.toggle("Has a token with logprob below", key=state.filter_key(workspace_key, sid, LOW))
    value_col.slider(
        "logprob threshold",
        min_value=-20.0,
        max_value=0.0,
        step=0.25,
        key=state.filter_key(workspace_key, sid, THRESHOLD),
        label_visibility="collapsed",
        disabled=not low,
    )
