"""What your trainer trains: TRL, NeMo Gym, verifiers, OpenEnv and NeMo-RL side by side on the
selected rollout, then one framework's rows, the token-level diff against the exact graph and a
sentence per difference naming the break that caused it (docs/reconcile.md). Computed only while
its toggle is on; the numbers and sentences are the library's (views/builders/trainers.py lays
them out)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from rollout_graph.analysis.decode import Decoder
from rollout_graph.analysis.reconcile import LABELS
from rollout_graph.core.rollout import Rollout
from rollout_graph.escape import md
from rollout_graph.reports.reconcile import eos_token_id
from rollout_graph.ui.builders import trainers

SHOW = "rg_show_trainers"


def render(rollout: Rollout, decoder: Decoder) -> None:
    """The panel, built only while its toggle is on."""
    if not st.toggle(
        "What your trainer trains: TRL, NeMo Gym, verifiers, OpenEnv, NeMo-RL",
        key=SHOW,
        help="Each framework's own rules applied to these calls (docs/reconcile.md). Computed only while open.",
    ):
        return
    found = trainers.results(rollout, eos_token_id(getattr(decoder, "path", None)))
    with st.container(border=True):
        st.caption(
            "Each row: what that framework trains from this capture. Never sampled: trained tokens the model did "
            "not sample after that prefix. Delivered: the share of the sampled tokens it trains."
        )
        st.dataframe(pd.DataFrame(trainers.summary_rows(found)), hide_index=True, width="stretch")
        tabs = st.tabs([LABELS.get(r.framework, r.framework) for r in found])
        for tab, result in zip(tabs, found, strict=True):
            with tab:
                _framework(rollout, result, decoder)


def _framework(rollout: Rollout, result, decoder: Decoder) -> None:
    for sentence in trainers.sentences(rollout, result) or ["The same as the exact graph: nothing to report."]:
        st.markdown("- " + md(sentence))
    if not result.rows:
        return
    st.dataframe(pd.DataFrame(trainers.row_lines(rollout, result)), hide_index=True, width="stretch")
    names = [row.row_id for row in result.rows]
    picked = st.selectbox(
        "Tokens of row", names, key=f"rg_trainers_row_{result.framework}_{rollout.session_id}", format_func=md
    )
    row = result.rows[names.index(picked)]
    st.html(trainers.legend_html())
    st.html(trainers.token_strip_html(rollout, row, decoder.pieces))
    with st.expander("Each call once: sampled, trained, and why not"):
        st.dataframe(pd.DataFrame(trainers.call_lines(rollout, result)), hide_index=True, width="stretch")
