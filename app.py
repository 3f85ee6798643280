"""rollout-graph explorer (placeholder until the explorer issue lands): loads the traces given on
the command line, or the bundled samples, and shows the same summary as `rollout-graph inspect`."""

import sys
from pathlib import Path

import streamlit as st

from graph.loading import load_paths
from graph.rollout import analyse
from graph.summary import summary_text

SAMPLES = Path(__file__).resolve().parent / "sample_traces"

st.set_page_config(page_title="rollout-graph", layout="wide")
st.title("rollout-graph")
paths = sys.argv[1:] or [str(SAMPLES)]
loaded = load_paths(paths)
st.code(summary_text(loaded, [analyse(s) for s in loaded.sessions.values()]), language=None)
