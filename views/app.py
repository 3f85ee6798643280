"""The app's entry: page config and navigation; each page is a script in views/screens/.

Entry point: ``main()``: sets the page up, starts reading command-line traces early
(views/state/live.py ``prefetch``), sends an empty chart first so the browser loads the chart code
while the server still reads them, and runs the page the visitor chose (Explorer, Corpus audit,
Compare, Run; a training run's folder opens on Run).

Where it sits: run by ``rollout-graph view`` (found with importlib.resources, through
views/serve.py) and by the top-level ``app.py`` (``streamlit run app.py``), so a checkout and an
installed wheel start the same app."""

from __future__ import annotations

import sys
from pathlib import Path

# Imported (to the end) before this run draws any chart: plotly looks pandas up in sys.modules when
# it serialises a figure, and the first page runs of several visitors run at once, one of them
# possibly halfway through importing pandas (plotly then fails on the half-made module).
import pandas  # noqa: F401
import plotly.graph_objects as go
import streamlit as st

from rollout_graph.ui import state
from rollout_graph.ui.state import live, run_ends, sources

SCREENS = Path(__file__).resolve().parent / "screens"  # not "pages/": Streamlit would treat that as old-style pages


def main() -> None:
    """Configure the page and run the page the visitor chose (a marked page run: background work,
    such as writing a trace's cache entry, waits for it to end)."""
    run_ends.install()  # a fragment run's end is not cut short by a live tick's start (views/state/run_ends.py)
    with sources.page_run():
        _main()


def _main() -> None:
    st.set_page_config(page_title="rollout-graph", page_icon="🕸️", layout="wide")
    # A training run's folder (many files naming steps) opens on the Run page and is not read whole.
    run_folder = bool(sys.argv[1:]) and _looks_like_run(tuple(sys.argv[1:]))
    # command-line traces: start reading them now, while the page's modules load; a deep link that
    # names its call's line reads that call first (views/screens/explorer.py), then the rest
    if sys.argv[1:] and not run_folder and not (st.query_params.get("node") and state.link_location()):
        live.prefetch(sys.argv[1:])
    # decided once per session, so the page's elements keep their places on every run: a deep link
    # draws its call's detail first, before the browser evaluates the chart code; traces the server
    # has already read send their DAG at once, so the chart code loads then (docs/performance.md)
    warm = not st.query_params.get("node") and not (sys.argv[1:] and live.read_already(sys.argv[1:]))
    if st.session_state.setdefault(state.WARM_CHARTS, warm):
        _warm_charts()
    explorer = st.Page(SCREENS / "explorer.py", title="Explorer", icon=":material/hub:", default=not run_folder)
    corpus = st.Page(SCREENS / "corpus.py", title="Corpus audit", icon=":material/table_chart:", url_path="corpus")
    compare = st.Page(SCREENS / "compare.py", title="Compare", icon=":material/compare_arrows:", url_path="compare")
    run = st.Page(SCREENS / "run.py", title="Run", icon=":material/show_chart:", url_path="run", default=run_folder)
    st.session_state[state.PAGES] = {"explorer": explorer, "corpus": corpus, "compare": compare, "run": run}
    page = st.navigation([explorer, corpus, compare, run], position="sidebar")
    st.sidebar.markdown("**rollout-graph**")
    page.run()


@st.cache_resource(show_spinner=False)
def _looks_like_run(paths: tuple[str, ...]) -> bool:
    from rollout_graph.reports.run import looks_like_run

    return looks_like_run(list(paths))


def _warm_charts() -> None:
    """An empty, hidden chart first thing on every page while the server still reads the traces.
    The browser loads Streamlit's chart code (several MB of JavaScript, about 0.7 s to fetch, parse
    and compile on a 2-core machine) when the first chart element arrives; sent before the trace is
    read, that happens while the server works instead of after the DAG arrives. With the traces
    already read it would only cost the browser a chart (docs/performance.md). Same element every
    run: nothing redraws."""
    with st.container(key="rg-warm-charts"):  # hidden by the style inside it: no gap on the page
        st.html(
            "<style>.st-key-rg-warm-charts,"
            " [data-testid='stLayoutWrapper']:has(> .st-key-rg-warm-charts){display:none}</style>"
        )
        st.plotly_chart(_EMPTY, config={"staticPlot": True}, key="rg-warm-plot")


_EMPTY = go.Figure(layout={"height": 10})

if __name__ == "__main__":
    main()
