"""The DAG panel: the toolbar (collapse, fit all, refold, focus), the figure, the rings the browser
draws over it, the colour control and the legend; and the call picker.

Entry points: ``render(rollout, workspace_key, near_misses, newest, dimmed, highlighted)``,
``picker(rollout, workspace_key)`` (outside the selection fragment), ``clicked`` (a click the DAG
client sent), ``bring_into_view``.

The figure is cached on what it draws (views/state/dag_figures.py), never on clicks, key steps or
search hits: those are rings the DAG client (views/panels/dag_client/index.html) draws over the
same figure, so a step redraws two shapes, not 5,000 calls. Where it sits: in the explorer's
selection fragment, the left pane of the split view."""

from __future__ import annotations

from pathlib import Path

import plotly.graph_objects as go
import streamlit as st
import streamlit.components.v1 as components

from rollout_graph.analysis.chains import continuations
from rollout_graph.core.rollout import Rollout
from rollout_graph.escape import md
from rollout_graph.ui import state
from rollout_graph.ui.builders.dag import CALLS, CHAINS, Targets, drawn_point, legend_html, rings, subtree
from rollout_graph.ui.state import signals as signals_state
from rollout_graph.ui.state.dag_figures import drawing as _drawing
from rollout_graph.ui.state.widgets import run_script

# The browser side of the DAG: rings the selection and the search hits over an unchanged figure and
# sends clicks (views/panels/dag_client/index.html; a static component, no build step).
_client = components.declare_component("rg_dag_client", path=str(Path(__file__).parent / "dag_client"))
CLIENT_BOX = "rg-dag-client"  # its container, hidden: the component draws nothing of its own
SCROLL_NONCE = "rg_dag_scroll_nonce"  # counts the client's bring-into-view requests

# Bring the DAG into view after a call was chosen below it (a tour button, a finding, an audit row);
# the figure itself is centred on the call. Runs in the component's same-origin iframe, with the
# DAG client's own code for it (dag_client/bring_dag.js). The page below the chart may still be
# growing when the first attempt runs, so it looks again.
SCROLL_JS = (
    "<script>\n"
    + (Path(__file__).parent / "dag_client" / "bring_dag.js").read_text(encoding="utf-8")
    + """
function bringDag() {
  const charts = Array.from(window.parent.document.querySelectorAll('.js-plotly-plot'));
  const dag = charts.find(g => g._fullData && g._fullData[1] && g._fullData[1].name === 'calls');
  if (dag) rgBringDagIntoView(dag, window.parent);
}
[400, 1200, 2500].forEach(t => setTimeout(bringDag, t));
</script>"""
)


ROLE = "role"


def _colour_options(rollout: Rollout) -> list[str]:
    """ "role", then each chosen correction's label when trainer logprobs are joined to the rollout."""
    signals = rollout.signals
    if signals is None or not any(r.metrics["n_tokens"] for r in signals.rows.values()):
        return [ROLE]
    return [ROLE, *signals_state.chosen_labels()]


def _colour_name(option: str) -> str:
    return "Colour by role" if option == ROLE else f"Colour by share of tokens affected by {option}"


def _per_session(name: str, rollout: Rollout, default):
    return st.session_state.setdefault(name, {}).setdefault(rollout.session_id, default)


def render(
    rollout: Rollout,
    workspace_key: str,
    near_misses: bool,
    newest: int | None = None,
    dimmed: frozenset[int] = frozenset(),
    highlighted: frozenset[int] = frozenset(),
) -> None:
    expanded: set[int] = _per_session(state.DAG_EXPANDED, rollout, set())
    chart_key = f"dag-{workspace_key}-{rollout.session_id}"
    client_key = f"dag-client-{workspace_key}-{rollout.session_id}"
    # a click in the chart first (the browser's DAG client sent it before this run), so the
    # toolbar and the figure of this run agree with it
    chain = clicked(rollout, st.session_state.get(client_key))
    if chain is not None:
        expanded.add(chain)
    focus_ids: dict = st.session_state.setdefault(state.DAG_FOCUS, {})
    highlight = state.highlight(rollout)
    current = state.current_node(rollout)
    focus = None
    if focus_ids.get(rollout.session_id) is not None:
        focus = rollout.index_of(focus_ids[rollout.session_id])
    # a call chosen from outside is always drawn (dag_figure keeps it a node); a focus it is outside of ends
    if highlight is not None and focus is not None and highlight not in _subtree(workspace_key, rollout, focus):
        focus_ids[rollout.session_id] = focus = None

    bar = st.container(horizontal=True, vertical_alignment="center", gap="small")
    collapse = bar.toggle(
        "Collapse chains", value=True, key=state.DAG_COLLAPSE,
        help="Runs of calls with one parent and one child are drawn as one thick edge. Roots, forks, leaves, "
        "retries, calls with findings and the selected call always stay nodes.",
    )  # fmt: skip
    fit_all = bar.toggle(
        "Fit all", key=f"dag-fit-{rollout.session_id}",
        help="The whole rollout in view (an overview); a click still selects the call under the pointer. "
        "Off: the readable window around the selected call.",
    )  # fmt: skip
    if bar.button(
        "Refold chains", key=f"dag-refold-{rollout.session_id}", disabled=not expanded,
        help="Collapse again the chains you expanded",
    ):  # fmt: skip
        expanded.clear()
        if current is not None and current != highlight:
            state.select_node(rollout, current)  # the selected call stays a node
            highlight = current
    if focus is not None:
        if bar.button(
            "Whole rollout",
            help=f"Focused on {md(rollout.calls[focus].node_id)}'s subtree: draw the whole rollout again",
            key=f"dag-unfocus-{rollout.session_id}",
        ):
            focus_ids[rollout.session_id] = focus = None
    else:
        has_subtree = current is not None and (
            bool(rollout.topology.children[current]) or current in _continued(workspace_key, rollout)
        )
        name = rollout.calls[current].node_id if current is not None else "the selected call"
        # one short label whatever is selected: the toolbar never changes height (the DAG keeps its place)
        if (
            bar.button(
                "Focus on its subtree", key=f"dag-focus-{rollout.session_id}", disabled=not has_subtree,
                help=f"Draw only {md(name)} and everything below it",
            )
            and current is not None
        ):  # fmt: skip
            focus_ids[rollout.session_id] = rollout.calls[current].node_id
            focus = current

    # the colour choice is drawn under the chart, beside the legend it changes (in the toolbar it
    # wrapped the toolbar onto a second row at 1440 px); its value is read here, before the figure
    colour_options = _colour_options(rollout)
    colour_by = None
    if len(colour_options) > 1:
        if st.session_state.get(state.DAG_COLOUR) not in colour_options:
            st.session_state[state.DAG_COLOUR] = ROLE  # its correction is no longer chosen
        choice = st.session_state[state.DAG_COLOUR]
        colour_by = None if choice == ROLE else choice

    def draw(highlight: int | None) -> tuple[go.Figure, Targets]:
        return _drawing(
            workspace_key,
            rollout.session_id,
            highlight,
            near_misses,
            collapse,
            frozenset(expanded),
            focus,
            newest,
            rollout,
            frozenset(dimmed),
            fit_all,
            colour_by,
        )

    keep = st.session_state.pop(state.KEEP_VIEW, None)
    figure, targets = draw(highlight)
    if current is not None and keep == rollout.calls[current].node_id and not in_view(figure, current):
        # a key moved to a call this view does not show (off screen, or inside a collapsed chain):
        # centre the DAG on it, as for any call chosen outside the chart (a new figure)
        state.select_node(rollout, current)
        highlight = current
        figure, targets = draw(highlight)
    st.plotly_chart(
        figure,
        key=chart_key,
        width="stretch",
        # plotly's Autoscale is replaced by "Fit all" (an overview whose calls stay clickable): its
        # button is removed, and a double click resets the view instead of autoscaling it
        config={
            "displaylogo": False,
            "scrollZoom": True,
            "doubleClick": "reset",
            "modeBarButtonsToRemove": ["lasso2d", "select2d", "autoScale2d"],
        },
    )
    with st.container(key=CLIENT_BOX):  # hidden by the style inside it: no gap, no height
        st.html(
            f"<style>.st-key-{CLIENT_BOX}, [data-testid='stLayoutWrapper']:has(> .st-key-{CLIENT_BOX}){{display:none}}</style>"
        )
        # a call chosen below the chart (a key step, a tour button, a finding): the client brings
        # the DAG into view (it persists across reruns: no script frame is made for it each step)
        scroll = _scroll_nonce() if st.session_state.pop(state.SCROLL_TO_DAG, False) else None
        _client(
            chart=chart_key,
            rings=rings(figure, targets, rollout, current, highlighted),
            scroll=scroll,
            key=client_key,
            default=None,
        )
    if len(colour_options) > 1:
        st.selectbox(
            "Colour calls by", colour_options, key=state.DAG_COLOUR, format_func=_colour_name,
            label_visibility="collapsed", width=420,
            help="Fill each call by its role, or by the share of its compared sampled tokens a chosen "
            "correction clips or masks (choose corrections under Off-policy corrections)",
        )  # fmt: skip
    st.html(legend_html(colour_by, newest=newest is not None))


def _scroll_nonce() -> int:
    n = st.session_state.get(SCROLL_NONCE, 0) + 1
    st.session_state[SCROLL_NONCE] = n
    return n


def clicked(rollout: Rollout, event: object) -> int | None:
    """Act on the DAG client's latest click (sent from the browser, so every field is checked): a
    call's marker selects the call (ringed where it is, the view kept); a collapsed chain's handle
    returns the chain's key (the caller expands it). Each click counts once (its nonce), so a second
    click on the same call after a key moved away selects it again."""
    if not isinstance(event, dict) or event.get("action") != "click":
        return None
    custom, curve = event.get("custom"), event.get("curve")
    if not isinstance(custom, int) or isinstance(custom, bool) or not state.new_pick("dag-client", event.get("n")):
        return None
    if curve == CALLS and 0 <= custom < len(rollout.calls):
        state.select_node(rollout, custom, from_chart=True)
    elif curve == CHAINS and 0 <= custom < len(rollout.calls):
        return custom
    return None


def in_view(figure: go.Figure, index: int) -> bool:
    """True when call ``index`` is drawn as a node inside the figure's own view (its axes' ranges;
    a visitor's pan or zoom is the browser's and not known here)."""
    point = drawn_point(figure, index)
    if point is None:
        return False
    xr, yr = figure.layout.xaxis.range, figure.layout.yaxis.range
    return all(r is None or min(r) <= v <= max(r) for v, r in ((point[0], xr), (point[1], yr)))


def picker(rollout: Rollout, workspace_key: str) -> None:
    """The call picker, below the split view and outside the selection fragment: a key step does not
    send the browser a list of every call again (about a third of a j step's browser CPU on 5,000
    calls). It holds no value (the selected call is the detail's title): a pick selects the call in
    the callback, which empties it again, so the browser never holds a stale call to send back after
    the selection moved on (a live tick, a key pressed before the last answer arrived)."""
    ids = rollout.node_ids
    key = f"picker-{workspace_key}-{rollout.session_id}"
    # in a popover: the browser builds the list only when it is opened (at 5,000 calls the list
    # drawn on the page took about 0.2 s of the first paint's main thread)
    with st.popover(
        "Go to a call", icon=":material/search:", help="Pick a call from the list of every call, or type its id"
    ):
        st.selectbox(
            "Call",
            options=range(len(ids)),
            index=None,
            format_func=lambda i: f"{ids[i]} · #{i} · {rollout.node_roles[i]}",
            placeholder="Go to a call: pick it from the list or type its id",
            key=key,
            on_change=_picked,  # before the next run: that run draws the chart with the call chosen
            args=(rollout, key),
        )


def _picked(rollout: Rollout, key: str) -> None:
    value = st.session_state.get(key)
    st.session_state[key] = None
    if value is not None:
        state.select_node(rollout, value)


@st.cache_resource(max_entries=16, show_spinner=False)
def _continued_cached(key: str, session_id: str, _rollout: Rollout) -> frozenset[int]:
    return frozenset(continuations(_rollout).values())


def _continued(key: str, rollout: Rollout) -> frozenset[int]:
    """Calls a later root nearly continued (so they have a subtree to focus on)."""
    return _continued_cached(key, rollout.session_id, rollout)


@st.cache_resource(max_entries=16, show_spinner=False)
def _subtree_cached(key: str, session_id: str, focus: int, _rollout: Rollout) -> frozenset[int]:
    return frozenset(subtree(_rollout, focus))


def _subtree(key: str, rollout: Rollout, focus: int) -> frozenset[int]:
    return _subtree_cached(key, rollout.session_id, focus, rollout)


def bring_into_view() -> None:
    """Scroll the page back to the DAG when a call was chosen below it after the DAG was drawn in
    this run (the DAG client does it for a choice made before: :func:`render` takes the request)."""
    if st.session_state.pop(state.SCROLL_TO_DAG, False):
        run_script(SCROLL_JS, "rg-script-dag")  # our own script, never trace text
