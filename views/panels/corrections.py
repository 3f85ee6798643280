"""The Corrections panel (the mismatch lens, docs/corrections.md): choose off-policy corrections,
compare what each does to the open rollout's tokens side by side, see the ratio histogram with
each correction's bands and mismatch against position, probability and entropy, and mark in the
token view the tokens each correction clips or masks.

Entry point: ``render(rollout, joined)`` (only when trainer logprobs are joined to the rollout).

Where it sits: below the split view in the explorer; figures and tables are
views/builders/mismatch/, the starting choice is read by views/state/signals.py."""

from __future__ import annotations

import streamlit as st

from rollout_graph.analysis.decode import Decoder
from rollout_graph.core.rollout import Rollout
from rollout_graph.escape import html_text
from rollout_graph.signals.corrections import (
    KINDS,
    CorrectionError,
    default,
    parse_correction,
)
from rollout_graph.ui.builders import mismatch, overlays
from rollout_graph.ui.state.signals import Joined, starting_labels

CHOSEN = mismatch.CHOSEN  # the labels chosen (a multiselect; the DAG's colour control reads it)
EXTRA = "rg-corrections-extra"  # labels the user added by spec
SPEC = "rg-corrections-spec"  # the spec text box
SPEC_ERROR = "rg-corrections-spec-error"
OPEN = "rg-corrections-open"  # the expander, open or not (kept across reruns)
PLOT_CONFIG = {"displaylogo": False, "modeBarButtonsToRemove": ["lasso2d", "select2d"]}


def _add_spec() -> None:
    text = st.session_state.get(SPEC, "").strip()
    st.session_state[SPEC_ERROR] = None
    if not text:
        return
    try:
        label = parse_correction(text).label
    except CorrectionError as exc:
        st.session_state[SPEC_ERROR] = str(exc)
        return
    extra = st.session_state.setdefault(EXTRA, [])
    if label not in extra:
        extra.append(label)
    chosen = list(st.session_state.get(CHOSEN) or [])
    if label not in chosen:
        st.session_state[CHOSEN] = [*chosen, label]
    st.session_state[SPEC] = ""


def _options() -> list[str]:
    out = [default(n).label for n in KINDS]
    for label in [*starting_labels(), *st.session_state.get(EXTRA, [])]:
        if label not in out:
            out.append(label)
    return out


def render(rollout: Rollout, joined: Joined, decoder: Decoder | None = None) -> None:
    """The panel (only when trainer logprobs are joined to this rollout)."""
    signals = rollout.signals
    if signals is None or not any(r.metrics["n_tokens"] for r in signals.rows.values()):
        return
    options = _options()
    st.session_state.setdefault(CHOSEN, [x for x in starting_labels() if x in options])
    st.session_state[CHOSEN] = [x for x in st.session_state[CHOSEN] if x in options]
    with st.expander("Off-policy corrections: what each would do to these tokens", key=OPEN, on_change="rerun"):
        # the chosen corrections on a row of their own, every chip shown (in a narrower column the
        # fourth default one was cut off)
        st.html(
            f"<style>.st-key-{CHOSEN} [data-testid='stMultiSelectTagsContainer']"
            "{flex-wrap:wrap!important;overflow:visible!important;height:auto!important;max-height:none!important}</style>"
        )
        chosen_labels = st.multiselect(
            "Corrections", options, key=CHOSEN, help="docs/corrections.md: each correction, its source and defaults"
        )
        st.text_input(
            "Add a correction", key=SPEC, on_change=_add_spec, placeholder="token_mask:low=0.125,high=8",
            help="NAME[:key=value,...], as --correction takes it",
        )  # fmt: skip
        if st.session_state.get(SPEC_ERROR):
            st.error(st.session_state[SPEC_ERROR])
        chosen = [parse_correction(x) for x in chosen_labels]
        marked = [x for x in st.session_state.get(overlays.CORRECTION_MARKS) or [] if x in chosen_labels]
        st.session_state[overlays.CORRECTION_MARKS] = marked
        st.pills(
            "Mark in the token view (clipped: orange underline; masked: struck through)", chosen_labels,
            selection_mode="multi", key=overlays.CORRECTION_MARKS,
        )  # fmt: skip
        if not chosen:
            st.caption("Choose a correction to see what it does.")
            return
        evaluation = signals.evaluate(chosen)
        st.dataframe(
            mismatch.comparison_frame(evaluation), hide_index=True, width="stretch",
            column_config={"share": st.column_config.NumberColumn(format="percent"),
                           "weight lost": st.column_config.NumberColumn(format="%.4g"),
                           "ESS": st.column_config.NumberColumn(format="%.4f")},
        )  # fmt: skip
        if len(chosen) > 1:
            st.caption("Where they disagree: tokens one correction touches and another does not.")
            st.dataframe(mismatch.disagreement_frame(evaluation), hide_index=True, width="stretch")
        points = mismatch.row_points(rollout)
        key = f"corr-{joined.workspace.key}-{rollout.session_id}"
        a, b = st.columns(2)
        a.plotly_chart(mismatch.ratio_histogram(points, chosen), key=f"{key}-hist", width="stretch", config=PLOT_CONFIG)
        b.plotly_chart(
            mismatch.row_ratio_figure(rollout, chosen), key=f"{key}-rows", width="stretch", config=PLOT_CONFIG
        )
        a, b = st.columns(2)
        a.plotly_chart(mismatch.position_figure(points), key=f"{key}-pos", width="stretch", config=PLOT_CONFIG)
        b.plotly_chart(mismatch.probability_figure(points), key=f"{key}-prob", width="stretch", config=PLOT_CONFIG)
        h, absd = mismatch.entropy_points(rollout)
        if h.size:
            st.plotly_chart(mismatch.entropy_figure(h, absd), key=f"{key}-ent", width="stretch", config=PLOT_CONFIG)
        else:
            st.caption("No recorded top-k alternatives: no entropy to plot against.")
        worst = signals.summary()["worst_tokens"]
        if worst:
            st.html(
                '<div style="font:12px system-ui;color:#64748b">'
                f"The {len(worst)} tokens with the largest |Δ| in {html_text(rollout.session_id)}</div>"
            )
            texts = mismatch.worst_token_texts(rollout, worst, decoder)
            st.dataframe(mismatch.worst_frame(worst, texts), hide_index=True, width="stretch")
