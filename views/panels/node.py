"""The selected call's detail pane: its title, then six tabs (Tokens, Facts, Messages, Sequence,
Findings, Raw JSON), each built only when it is the one shown.

Entry points: ``header(rollout, i)`` (the title and badges), ``render(rollout, i, decoder, key)``
(the tab strip; fills Facts, Messages and Findings and returns the open Tokens, Sequence and Raw
JSON tabs for the token and raw panels the screen draws in them), ``tokens_choice`` and
``sequence_choice`` (the switches above those token views), ``widget_key``.

Where it sits: composed by the explorer (views/screens/explorer.py ``call_detail``) with the
relatives, near-miss, token and raw panels; the content is built by views/builders/call.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from rollout_graph.analysis.decode import Decoder
from rollout_graph.core.rollout import Rollout
from rollout_graph.escape import html_text
from rollout_graph.ui.builders import call as call_builder
from rollout_graph.ui.builders import overlays
from rollout_graph.ui.builders.chat import chat_html
from rollout_graph.ui.builders.tokens import TokenStrip, node_strip, origin_strip, sequence_strip
from rollout_graph.ui.state import signals as signals_state
from rollout_graph.ui.state.signals import SCROLL_TO_MARK

TABS_STYLE = call_builder.TABS_STYLE


@dataclass(frozen=True)
class OpenTabs:
    """The tabs the screen fills itself, each None unless it is the one shown."""

    tokens: DeltaGenerator | None
    sequence: DeltaGenerator | None
    raw: DeltaGenerator | None


def widget_key(workspace_key: str, rollout: Rollout, i: int) -> str:
    """The prefix of this call's widget keys (the token view's key is ``tok-`` + it)."""
    return f"{workspace_key}-{rollout.session_id}-{rollout.calls[i].node_id}"


def header(rollout: Rollout, i: int) -> None:
    """The call's id, arrival number and badges."""
    st.html(call_builder.header_html(rollout, i))


def render(rollout: Rollout, i: int, decoder: Decoder, key: str) -> OpenTabs:
    """The tab strip. A tab not shown is not built until chosen (a tab change reruns the selection
    fragment only); a jump to a token opens Tokens."""
    labels = call_builder.tab_labels(rollout, i)
    tab_key = f"tabs-{key}"
    shown = st.session_state.get(tab_key)
    if st.session_state.get(SCROLL_TO_MARK):  # a jump to a token: its Tokens tab
        st.session_state[tab_key] = labels[0]
    elif shown is not None and shown not in labels:  # the findings count changed (a live trace)
        st.session_state[tab_key] = next((t for t in labels if t.split(" (")[0] == shown.split(" (")[0]), labels[0])
    tokens, facts, messages, sequence, findings, raw = st.tabs(labels, key=tab_key, on_change="rerun")
    if facts.open:
        with facts:
            _facts(rollout, i, decoder)
    if messages.open:
        with messages:
            _messages(rollout, i)
    if findings.open:
        with findings:
            _findings(rollout, i)
    return OpenTabs(tokens if tokens.open else None, sequence if sequence.open else None, raw if raw.open else None)


def _facts(rollout: Rollout, i: int, decoder: Decoder) -> None:
    # an HTML table, not a grid: long values (tokens, usage, shape) wrap instead of being cut at the cell's edge
    st.html(call_builder.facts_html(call_builder.facts(rollout, i)))
    params = call_builder.params_table(rollout, i)
    if params is not None:
        st.caption("Sampling params: requested by the harness vs submitted to the engine")
        st.dataframe(params, hide_index=True, width="stretch")
    st.html(f'<div style="font:12px system-ui;color:#64748b">Token text decoded with {html_text(decoder.label)}</div>')


def _messages(rollout: Rollout, i: int) -> None:
    call = rollout.calls[i]
    if call.tools:
        with st.expander(f"Tool manifest ({len(call.tools)} tools)"):
            st.json(call.tools, expanded=False)
    st.html(chat_html(call))


def _findings(rollout: Rollout, i: int) -> None:
    frame = call_builder.findings_frame(rollout, i)
    if frame is None:
        st.caption("No findings for this call.")
        return
    st.dataframe(frame, hide_index=True, width="stretch")
    if "logprob_mismatch" in set(frame["code"]):
        signals_state.worst_token_button(rollout, i, "findings-tab")


def tokens_choice(rollout: Rollout, i: int, decoder: Decoder, key: str) -> tuple[TokenStrip, str]:
    """The Tokens tab's switch and caption; returns (the strip to draw, its widget key)."""
    by_origin = st.toggle(
        "Whole prompt, coloured by origin",
        key=f"origin-{key}",
        help="Purple: tokens the policy sampled earlier (hover for which call and its logprob then); amber: text the "
        "policy sampled earlier, re-inserted by the harness (a summary, a subagent's answer); grey: inserted by the harness.",
    )
    if by_origin:
        st.caption(
            "The whole prompt: purple tokens were sampled earlier by the policy, amber ones are policy text the harness "
            "re-inserted, grey ones inserted by the harness; then the sampled span."
        )
        strip = origin_strip(rollout, i, decoder)
        overlays.show_rows(rollout, strip.overlay, signals_state.shown_rows(rollout))  # the row picked
        return strip, f"org-{key}"
    st.caption(
        "The context span (what the harness added since the parent's end: tool output, user text, template glue) "
        "then the sampled span."
    )
    strip = node_strip(rollout, i)
    overlays.show_rows(rollout, strip.overlay, signals_state.shown_rows(rollout))  # the row picked
    return strip, f"tok-{key}"


def sequence_choice(rollout: Rollout, i: int, key: str) -> tuple[TokenStrip, str] | None:
    """The Sequence tab above its token view: the training row chosen, its numbers, its calls.
    Returns (the row's strip, its widget key), or None when no row runs through the call."""
    through = call_builder.rows_through(rollout, i)
    if not through:
        st.caption("No sequence runs through this call.")
        return None
    names = [rollout.calls[s.leaf].node_id for s in through]
    pick = 0
    if len(through) > 1:
        pick = st.selectbox(
            f"{len(through)} training rows run through this call; leaf",
            range(len(through)),
            format_func=lambda k: f"{names[k]} · {through[k].role} · {through[k].n_trainable:,} trainable",
            key=f"seq-{key}",
        )
    seq = through[pick]
    st.html(call_builder.row_numbers_html(seq))  # wraps in a narrow pane: no label cut to "a…"
    frame = call_builder.row_calls_frame(rollout, seq)
    st.dataframe(frame, hide_index=True, width="stretch", height=min(300, 38 + 35 * len(frame)))
    st.caption(
        "The whole training row, call by call: context tokens neutral (mask 0), trainable tokens coloured by logprob."
    )
    return sequence_strip(rollout, seq), f"seq-{key}-{names[pick]}"
