"""The Explorer page: one rollout, its graph and the selected call's detail side by side.

A page script. Top to bottom: the headline and load report (``overview_and_graph``), then the
selection fragment (``selection_view``: keys, search, filters, the split view of the DAG and the
call's detail, the timeline), then the picker, guide, findings, other rollouts, audit, downloads.
``call_detail`` composes the detail from the panels (title, relatives, near miss, tabs);
``link_notice`` explains a link these traces cannot open.

Where it sits: composes views/panels/; what the selection changes reruns alone as one fragment,
and command-line traces are followed as they grow (views/state/live.py).
"""

import sys

import streamlit as st

from rollout_graph.escape import md
from rollout_graph.ui import state
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
from rollout_graph.ui.panels import timeline as timeline_view
from rollout_graph.ui.panels import tokens as token_view
from rollout_graph.ui.panels import trainers as trainers_view
from rollout_graph.ui.panels import triage as triage_view
from rollout_graph.ui.state import live
from rollout_graph.ui.state import signals as signals_source
from rollout_graph.ui.state.sources import decoder, files_under, page_run

workspace, options = sidebar.render(cli_directories=sys.argv[1:])
following = options.live  # command-line traces are followed as they grow (views/state/live.py)
SPLIT = [3, 2]  # the DAG's share of the width and the selected call's
DETAIL_HEIGHT = 760  # px: the detail pane's own scroll area


def call_detail(rollout, i: int, decoder, workspace_key: str, show_whitespace: bool, sources: dict) -> None:
    """Everything about one call, composed from the panels: header, relatives, near miss, tabs."""
    node_view.header(rollout, i)
    relatives.render(rollout, i)  # parent, children, siblings: one click opens them
    near_miss_view.render(rollout, i, decoder)
    if len(rollout.topology.children[i]) > 1:
        with st.expander(f"Fork: its {len(rollout.topology.children[i])} children side by side"):
            st.html(near_miss_view.fork_html(rollout, i, decoder))
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
        load_report.render(workspace)
        st.info("Waiting for the first call…" if following else "No rollouts in this source.")
        return None
    session_id = state.current_session(list(workspace.rollouts), workspace.default_session)
    rollout = workspace.rollouts[session_id]
    state.settle_location(rollout)  # the URL names the call's file and line (older links lack them)

    st.html("<style>[data-testid='stMainBlockContainer']{padding-top:2.2rem}</style>")  # the DAG on the first screen
    overview.render(rollout)
    fidelity_view.render(rollout)  # what the source supports, instead of panels left empty
    load_report.render(workspace)
    rewrites = near_miss_view.banner(rollout)
    if rewrites:
        st.warning(rewrites)
    rollout_decoder = decoder(workspace.key, session_id, rollout, workspace.trace_paths)
    newest = following.newest_index(rollout) if following else None
    # a live workspace's key changes with every new call; the call's widgets keep the live source's
    detail_key: str = following.key if following else view_key
    selection_view(rollout, workspace, rollout_decoder, view_key, detail_key, newest)
    graph_view.picker(rollout, workspace.key)  # outside the fragment: a key step does not send it again
    if following is None:
        tour.render(rollout, expanded=state.current_node(rollout) is None)
    triage_view.render(rollout)
    signals_view.render(rollout, signals)
    corrections_view.render(rollout, signals)  # the mismatch lens: docs/corrections.md
    rollouts.render(workspace, session_id)
    groups_view.render(workspace)  # the groups under the table, when grouped
    if following is None:
        audit_view.render(rollout, rollout_decoder)
        trainers_view.render(rollout, rollout_decoder)  # what each RL framework trains: docs/reconcile.md
    downloads.render(rollout)
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
    # the detail's six tab labels in its pane at 1440 px, none behind a scroll arrow: in the page before
    # the tabs are drawn (Streamlit decides on the arrow when they are, not when a style comes later)
    st.html(node_view.TABS_STYLE)
    # keys and token clicks first: they move the selection every panel below reads
    keyboard.render(rollout, [state.search_key(view_key, rollout.session_id)], find_view.SEARCH_BOX_LABEL)
    found = find_view.render(rollout, rollout_decoder, view_key)
    ringed = triage_view.ringed_calls(rollout)  # a findings group's calls, ringed in the DAG
    graph_pane, detail_pane = st.columns(SPLIT, gap="medium")
    # the detail scrolls on its own beside the DAG (a split pane): reading a long call never moves the graph
    detail = detail_pane.container(key="rg-detail", height=DETAIL_HEIGHT, border=False)

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
        graph_view.render(rollout, workspace.key, options.near_misses, newest, found.dimmed, found.hits | ringed)
    timeline_view.render(rollout, view_key)  # a click selects a call too
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
        tour.render(rollout, expanded=state.current_node(rollout) is None)
        audit_view.render(rollout, decoder(workspace.key, rollout.session_id, rollout, workspace.trace_paths))
elif workspace is not None:
    overview_and_graph(workspace)
