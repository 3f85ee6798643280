"""The Audit panel (a toggle: nothing is computed until it is on): where the tokens went, why the
rollout split, forks and retries, and a retokenization check.

Entry point: ``render(rollout, decoder)``; ``flows_frame`` and ``logprob_histogram`` build its
token-flow table and per-role logprob histogram (40 binned counts per role, never raw values).

Where it sits: below the split view in the explorer; the numbers are graph/analysis's."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from rollout_graph.analysis.breaks import prefix_breaks
from rollout_graph.analysis.decode import Decoder, TokenizerDecoder
from rollout_graph.analysis.forks import fork_diffs
from rollout_graph.analysis.retokenize import retokenize
from rollout_graph.analysis.token_flow import logprobs_by_role, lowest_tokens, token_flows
from rollout_graph.core.rollout import Rollout
from rollout_graph.escape import md
from rollout_graph.reports.summary import row_tokens_text
from rollout_graph.ui import state
from rollout_graph.ui.builders.palette import ROLE_COLORS
from rollout_graph.ui.state.widgets import picked_row


def flows_frame(rollout: Rollout) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"scope": f.label, "calls": f.n_calls, "sampled tokens": f.sampled,
             "trainable tokens (calls)": f.sampled_trained, "discarded tokens": f.sampled_discarded,
             "never trainable": f.sampled_untrainable, "context tokens (calls)": f.context,
             "inherited tokens": f.inherited}
            for f in token_flows(rollout)
        ]
    )  # fmt: skip


BINS = 40


def logprob_histogram(rollout: Rollout) -> go.Figure:
    """Sampled logprobs by role, binned here: the browser gets BINS counts per role, never the raw values."""
    fig = go.Figure()
    by_role = {role: np.asarray(values, dtype=float) for role, values in logprobs_by_role(rollout).items()}
    finite = [v[np.isfinite(v)] for v in by_role.values()]
    low = min((float(v.min()) for v in finite if v.size), default=-1.0)
    edges = np.linspace(min(low, -1e-6), 0.0, BINS + 1)
    centres, width = (edges[:-1] + edges[1:]) / 2, float(edges[1] - edges[0])
    for role, ok in zip(by_role, finite, strict=True):
        counts, _ = np.histogram(np.clip(ok, edges[0], edges[-1]), bins=edges)
        fig.add_trace(go.Bar(x=centres, y=counts, width=width, name=role, marker_color=ROLE_COLORS[role], opacity=0.7))
    fig.update_layout(
        barmode="overlay",
        bargap=0,
        height=260,
        margin={"l": 10, "r": 10, "t": 30, "b": 30},
        title="Sampled logprobs by role",
        xaxis_title="logprob",
        yaxis_title="tokens",
        legend={"orientation": "h"},
    )
    return fig


def _select(rollout: Rollout, node: int | None, widget: str) -> None:
    if state.new_pick(widget, node) and node is not None:
        state.select_node(rollout, node)
        st.rerun()


def render(rollout: Rollout, decoder: Decoder) -> None:
    """The Audit panel, computed and sent only while its toggle is on (an expander's body always runs)."""
    if not st.toggle(
        "Audit: where the tokens went, why it split, forks and retries, retokenization",
        key=state.SHOW_AUDIT,
        help="Computed only while open.",
    ):
        return
    with st.container(border=True):
        went, split, forks, retok = st.tabs(
            ["Where the tokens went", "Why it split", "Forks and retries", "Retokenization"]
        )
        calls = rollout.calls
        with went:
            st.caption(
                "Each call's own tokens counted once (docs/semantics.md, Glossary). Summed over the training rows "
                f"instead, a call in several rows counted in each: {row_tokens_text(rollout.stats)}."
            )
            st.dataframe(flows_frame(rollout), hide_index=True, width="stretch")
            st.plotly_chart(logprob_histogram(rollout), width="stretch")
            low = lowest_tokens(rollout)
            st.caption("The least likely sampled tokens; select one to open its call")
            frame = pd.DataFrame([{"call": calls[t.node].node_id, "position": t.position, "token": repr(decoder.text([t.token_id])),
                                   "logprob": round(t.logprob, 4)} for t in low])  # fmt: skip
            pick = picked_row(frame, f"low-{rollout.session_id}", 300) if len(frame) else None
            _select(rollout, low[pick].node if pick is not None else None, f"low-{rollout.session_id}")
        with split:
            breaks = prefix_breaks(rollout)
            if not breaks:
                st.caption("One root: the rollout never split.")
            else:
                frame = pd.DataFrame([
                    {"root": calls[b.root].node_id,
                     "nearly continued": calls[b.miss.other].node_id if b.miss else "—",
                     "shared tokens": b.miss.common_prefix if b.miss else 0, "why": b.reason} for b in breaks
                ])  # fmt: skip
                st.caption("Every root after the first; select one to see the break side by side")
                pick = picked_row(frame, f"breaks-{rollout.session_id}", 300)
                _select(rollout, breaks[pick].root if pick is not None else None, f"breaks-{rollout.session_id}")
        with forks:
            rows = []
            for fork in rollout.topology.forks:
                for d in fork_diffs(rollout, fork):
                    rows.append({
                        "fork": calls[d.parent].node_id, "original": calls[d.original].node_id, "other": calls[d.other].node_id,
                        "continued": calls[d.continued].node_id if d.continued is not None else "—",
                        "same prompt": d.same_prompt, "first divergence": d.divergence,
                        "original token": None if d.original_token is None else repr(decoder.text([d.original_token])),
                        "other token": None if d.other_token is None else repr(decoder.text([d.other_token])),
                        "original logprob": d.original_logprob, "other logprob": d.other_logprob,
                        "other in original top-k": d.other_in_original_top_k,
                    })  # fmt: skip
            if rows:
                st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
            else:
                st.caption("No forks.")
        with retok:
            if not isinstance(decoder, TokenizerDecoder):
                st.caption("Needs a tokenizer: none was found for this trace's model.")
            elif st.button("Decode and re-encode every prompt", key=f"retok-{rollout.session_id}"):
                found = retokenize(rollout, decoder)
                if not found:
                    st.success(f"Every prompt survives decode -> encode with {md(decoder.label, 120)}.")
                else:
                    st.warning(
                        f"{len(found)} calls' prompts do not come back identical: training on re-tokenized text would train on sequences the model never saw."
                    )
                    st.dataframe(pd.DataFrame([
                        {"call": calls[m.node].node_id, "position": m.position, "recorded": repr(decoder.text(m.original)),
                         "re-encoded": repr(decoder.text(m.reencoded)), "recorded ids": str(m.original), "re-encoded ids": str(m.reencoded)}
                        for m in found
                    ]), hide_index=True, width="stretch")  # fmt: skip
