"""The Explorer page: one rollout, its graph (or its story) and the selected call's detail side by side.

A page script. Top to bottom: the first screen's top (``overview_and_graph``: what this is, the
rollout in three numbers and one bar, the tour), the load report, then the selection fragment
(``selection_view``: keys, the full-height split of the graph or the story on the left and the
call's detail on the right, the timeline), then the picker, findings, other rollouts, signals,
corrections, audit, downloads. ``call_detail`` composes the detail from the panels (title, the
link to the story or the graph, relatives, near miss, fork, tabs); ``link_notice`` explains a link
these traces cannot open.

Where it sits: composes views/panels/; what the selection changes reruns alone as one fragment,
and command-line traces are followed as they grow (views/state/live.py).
"""

import sys

import streamlit as st

from rollout_graph.escape import md
from rollout_graph.ui import state
from rollout_graph.ui.builders import fork as fork_view
from rollout_graph.ui.panels import audit as audit_view
from rollout_graph.ui.panels import corrections as corrections_view
from rollout_graph.ui.panels import (
    downloads,
    keyboard,
    load_report,
    notes,
    overview,
    relatives,
    rollouts,
    share,
    sidebar,
    split,
    tour,
)
from rollout_graph.ui.panels import early as early_view
from rollout_graph.ui.panels import fidelity as fidelity_view
from rollout_graph.ui.panels import find as find_view
from rollout_graph.ui.panels import graph as graph_view
from rollout_graph.ui.panels import groups as groups_view
from rollout_graph.ui.panels import near_miss as near_miss_view
from rollout_graph.ui.panels import node as node_view
from rollout_graph.ui.panels import raw as raw_view
from rollout_graph.ui.panels import signals as signals_view
from rollout_graph.ui.panels import start as start_view
from rollout_graph.ui.panels import story as story_view
from rollout_graph.ui.panels import timeline as timeline_view
from rollout_graph.ui.panels import tokens as token_view
from rollout_graph.ui.panels import trainers as trainers_view
from rollout_graph.ui.panels import triage as triage_view
from rollout_graph.ui.state import live
from rollout_graph.ui.state import notes as notes_state
from rollout_graph.ui.state import signals as signals_source
from rollout_graph.ui.state.sources import decoder, files_under, page_run

with st.container(key="rg-early"):  # hidden: a script, no gap
    st.html("<style>.st-key-rg-early, [data-testid='stLayoutWrapper']:has(> .st-key-rg-early){display:none}</style>")
    keyboard.early(find_view.SEARCH_BOX_LABEL)  # keys and DAG clicks made before the components listen
workspace, options = sidebar.render(cli_directories=sys.argv[1:])
following = options.live  # command-line traces are followed as they grow (views/state/live.py)
SPLIT = [60, 40]  # the graph's share of the width and the selected call's, until the divider is dragged
SPLIT_BOX = "rg-split"
HIDDEN = "rg-selection-hidden"
DETAIL_HEIGHT = 760  # px: the early detail pane's own scroll area (a deep link into traces still being read)


def call_detail(rollout, i: int, decoder, workspace_key: str, show_whitespace: bool, sources: dict) -> None:
    """Everything about one call, composed from the panels: header, relatives, near miss, tabs."""
    node_view.header(rollout, i)
    if st.session_state.get(state.LEFT_VIEW) == state.STORY_VIEW:
        st.button("◆ Show it in the graph", key=f"to-graph-{i}", type="tertiary", on_click=_to_graph, args=(rollout, i))
    else:
        st.button(
            "☰ Read it in the story", key=f"to-story-{i}", type="tertiary", on_click=story_view.show_in_story,
            args=(rollout, i), help="What the agent did around this call, as a conversation",
        )  # fmt: skip
    relatives.render(rollout, i)  # parent, children, siblings: one click opens them
    near_miss_view.render(rollout, i, decoder)
    if len(rollout.topology.children[i]) > 1:
        with st.expander(f"Fork: its {len(rollout.topology.children[i])} children, where each departs"):
            st.html(fork_view.fork_html(rollout, i, decoder))
    key = node_view.widget_key(workspace_key, rollout, i)
    # the signals row shown for the call, and the logprob_mismatch finding's jump to its worst token
    signals_source.render_row_picker(rollout, i, key)
    signals_source.apply_jump(rollout, i, key)  # a jump from here, the findings list or the scatter
    tabs = node_view.render(rollout, i, decoder, key)  # Facts, Messages and Findings drawn; the rest here
    if tabs.tokens is not None:
        with tabs.tokens:
            strip, strip_key = node_view.tokens_choice(rollout, i, decoder, key)
            token_view.render(strip, decoder, strip_key, show_whitespace)
    if tabs.sequence is not None:
        with tabs.sequence:
            chosen = node_view.sequence_choice(rollout, i, key)
            if chosen is not None:
                token_view.render(chosen[0], decoder, chosen[1], show_whitespace)
    if tabs.raw is not None:
        with tabs.raw:
            raw_view.render(rollout.calls[i], workspace_key, sources)  # the record as it stands in its file
    signals_source.scroll_to_mark()  # after a jump to a token: its ring, scrolled into view


def _to_graph(rollout, i: int) -> None:
    state.select_node(rollout, i)
    st.session_state[state.LEFT_VIEW] = state.GRAPH_VIEW


def link_notice(workspace, rollout) -> None:
    """A link that names what these traces lack says so (its URL is kept); the page opens normally."""
    missed = state.link_missed()
    if missed and missed[0] is None:
        st.warning(
            f"This link names call {md(missed[1])} but no rollout: it lacks `session=`. A link to a call holds "
            "both, `session=` (the rollout's id) and `node=` (the call's id), as the links the app writes do. "
            f"Showing rollout {md(rollout.session_id)}; the link is kept until you choose a call or rollout."
        )
    elif missed:
        wanted = f"call {md(missed[1])} of rollout {md(missed[0])}" if missed[1] else f"rollout {md(missed[0])}"
        st.warning(
            f"This link points to {wanted}: no rollout '{md(missed[0])}' in these traces ({md(workspace.label)}). "
            f"Showing {md(rollout.session_id)} instead; the link is kept until you choose a call or rollout."
        )
    absent = state.missing_call(rollout)
    if absent is not None:
        st.warning(
            f"No call '{md(absent)}' in rollout {md(rollout.session_id)}: nothing is selected "
            "(the link is kept). Pick a call in the graph or the picker."
        )


def overview_and_graph(workspace):
    """Everything a new call changes; when following, this part reruns on its own."""
    if EARLY is not None:  # the linked call's early detail gives way to the whole page
        EARLY.empty()
    signals = signals_source.apply(workspace)  # training signals joined, when a signals file is chosen
    workspace = signals.workspace
    # the panels' widget keys follow the workspace drawn (signals joined): a search hit opens the token
    # view the call detail below draws with the same key
    view_key = workspace.key
    if not workspace.rollouts:
        load_report.render(workspace, growing=following is not None)
        if following is None:
            state.no_rollout()  # the URL no longer names the rollout opened before
        st.info("Waiting for the first call…" if following else "No rollouts in this source.")
        return None
    session_id = state.current_session(list(workspace.rollouts), workspace.default_session)
    rollout = workspace.rollouts[session_id]
    state.settle_location(rollout)  # the URL names the call's file and line (older links lack them)

    # the DAG on the first screen, and the split as wide as the window allows (Streamlit's wide layout
    # keeps 5 rem either side: 160 px the graph needs at 1440 px)
    st.html("<style>[data-testid='stMainBlockContainer']{padding:1.6rem 1.75rem 4rem}</style>")
    overview.render(rollout, story_view.story_of(rollout, view_key), lambda: tour.render(rollout))
    fidelity_view.render(rollout)  # what the source supports, instead of panels left empty
    load_report.render(workspace, growing=following is not None)
    rewrites = near_miss_view.banner(rollout)
    if rewrites:
        st.warning(rewrites)
    rollout_decoder = decoder(workspace.key, session_id, rollout, workspace.trace_paths)
    newest = following.newest_index(rollout) if following else None
    # a live workspace's key changes with every new call; the call's widgets keep the live source's
    detail_key: str = following.key if following else view_key
    selection_view(rollout, workspace, rollout_decoder, view_key, detail_key, newest)
    graph_view.picker(rollout, workspace.key)  # outside the fragment: a key step does not send it again
    triage_view.render(rollout)
    signals_view.render(rollout, signals)
    corrections_view.render(rollout, signals, rollout_decoder)  # the mismatch lens: docs/corrections.md
    rollouts.render(workspace, session_id)
    groups_view.render(workspace)  # the groups under the table, when grouped
    if following is None:
        audit_view.render(rollout, rollout_decoder)
        trainers_view.render(rollout, rollout_decoder)  # what each RL framework trains: docs/reconcile.md
    downloads.render(rollout, notes_state.store(workspace).for_session(rollout.session_id))
    share.render(rollout, workspace, rollout_decoder)  # the same file as `rollout-graph bundle`
    return rollout


@st.fragment
def selection_view(rollout, workspace, rollout_decoder, view_key: str, detail_key: str, newest: int | None) -> None:
    """What the selection and the search change, as one fragment: a key (j/k...), a search, a click
    in the DAG, a relative or a hit reruns only this (the keyboard bridge, the search box and its
    hits, the filters, the DAG, the call's detail and the timeline), never the sidebar, the
    headline, the findings triage or the panels below (docs/performance.md "The app")."""
    with page_run():  # a fragment's own rerun is a page run too: background writes pause for it
        _selection_view(rollout, workspace, rollout_decoder, view_key, detail_key, newest)


def _selection_view(rollout, workspace, rollout_decoder, view_key: str, detail_key: str, newest: int | None) -> None:
    link_notice(workspace, rollout)
    with st.container(key=HIDDEN):  # styles and zero-height components: no gap above the split
        st.html(
            f"<style>.st-key-{HIDDEN}, [data-testid='stLayoutWrapper']:has(> .st-key-{HIDDEN}){{display:none}}</style>"
        )
        # the detail's six tab labels in its pane, none behind a scroll arrow: in the page before the
        # tabs are drawn (Streamlit decides on the arrow when they are, not when a style comes later)
        st.html(node_view.TABS_STYLE)
        # keys and token clicks first: they move the selection every panel below reads
        keyboard.render(rollout, [state.search_key(view_key, rollout.session_id)], find_view.SEARCH_BOX_LABEL)
    ringed = triage_view.ringed_calls(rollout)  # a findings group's calls, ringed in the DAG
    # the split view: the graph (or the story) and the call's detail, each the window's height with a
    # scroll of its own, a draggable divider between them (views/panels/split.py)
    box = st.container(key=SPLIT_BOX)
    with box:
        split.render(SPLIT_BOX, SPLIT[0] / sum(SPLIT), sticky=f".st-key-{state.LEFT_VIEW}")
        graph_pane, detail_pane = st.columns(SPLIT, gap="medium")
    detail = detail_pane.container(key="rg-detail", border=False)
    with graph_pane:
        left = st.segmented_control(
            "Show", [state.GRAPH_VIEW, state.STORY_VIEW], key=state.LEFT_VIEW, default=state.GRAPH_VIEW,
            required=True, label_visibility="collapsed",
            format_func=lambda v: "◆ Graph" if v == state.GRAPH_VIEW else "☰ Story: what the agent did",
        )  # fmt: skip
        found = find_view.render(rollout, rollout_decoder, view_key)

    def draw_detail() -> None:
        node = state.current_node(rollout)
        with detail:
            if node is None:
                start_view.render(rollout)  # how to select, and the calls worth a look as buttons
            else:
                call_detail(rollout, node, rollout_decoder, detail_key, options.show_whitespace, workspace.sources)
                notes.render(rollout, node, workspace)  # notes on the call and its rows (views/state/notes.py)

    # A session's first run (a deep link, a first visit) sends the call's detail before the DAG: the
    # browser draws it while the DAG's figure (the page's heaviest element) is still on its way. Later
    # runs draw the DAG first: a click in it selects the call the detail then shows.
    first_run = not st.session_state.get(state.SPLIT_DRAWN)
    if first_run:
        draw_detail()
    with graph_pane:
        if left == state.STORY_VIEW:
            story_view.render(rollout, rollout_decoder, view_key)
        else:
            st.session_state[story_view.SHOWN_AGAIN] = True  # the story, when shown, opens at the selected call
            graph_view.render(rollout, workspace.key, options.near_misses, newest, found.dimmed, found.hits | ringed)
    timeline_view.render(rollout, view_key)  # a click selects a call too
    if left != state.STORY_VIEW:
        graph_view.bring_into_view()
    if not first_run:
        draw_detail()
    st.session_state[state.SPLIT_DRAWN] = True


EARLY = None  # a deep link into traces still being read: its call's detail, shown first
if following is not None and not following.ready:
    found = early_view.linked_call(files_under(sys.argv[1:]))
    if found is not None:
        EARLY = st.empty()
        with EARLY.container():
            early_view.render(found, SPLIT, DETAIL_HEIGHT, options.show_whitespace)
if following is not None:
    workspace, rollout = live.follow(following, overview_and_graph)
    if rollout is not None:
        audit_view.render(rollout, decoder(workspace.key, rollout.session_id, rollout, workspace.trace_paths))
elif workspace is not None:
    overview_and_graph(workspace)
