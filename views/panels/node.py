"""Everything about one call: what it is, its tokens, its messages, its training row, its findings."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import streamlit as st

from rollout_graph.analysis.decode import Decoder
from rollout_graph.analysis.token_flow import inherited_share
from rollout_graph.core.records import FATAL
from rollout_graph.core.rollout import Rollout
from rollout_graph.core.types import AGENT
from rollout_graph.escape import html_text
from rollout_graph.ui.builders import overlays
from rollout_graph.ui.builders.chat import chat_html
from rollout_graph.ui.builders.dag import node_kind
from rollout_graph.ui.builders.palette import ROLE_COLORS, ROLE_TEXT
from rollout_graph.ui.builders.tokens import TokenStrip, node_strip, origin_strip, sequence_strip
from rollout_graph.ui.state import signals as signals_state


def _when(value) -> str:
    if isinstance(value, (int, float)) and value > 1e9:
        return datetime.fromtimestamp(value, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"
    return str(value)


def facts(rollout: Rollout, i: int) -> list[tuple[str, str]]:
    """The call's identity and provenance as (label, value) rows."""
    call, topo = rollout.calls[i], rollout.topology
    parent = topo.parents[i]
    kept = topo.discarded.get(i)
    rows = [
        ("parent", "none (a root)" if parent is None else rollout.calls[parent].node_id),
        ("root", rollout.calls[topo.root_of[i]].node_id),
        ("children", ", ".join(rollout.calls[c].node_id for c in topo.children[i]) or "none (a leaf)"),
        ("linked by", rollout.linked_by[i] or "nothing: a root"),
        ("discarded", f"yes: sibling {rollout.calls[kept].node_id} continued" if kept is not None else "no"),
        (
            "tokens",
            f"prompt {call.n_prompt:,}: {call.n_prompt - rollout.context_start(i):,} context + "
            f"{rollout.context_start(i):,} inherited tokens ({inherited_share(rollout, i):.0%} inherited from the "
            f"parent) · sampled {call.n_sampled:,}",
        ),
        ("trainable", _trainable(rollout, i)),
        ("finish reason", str(call.finish_reason)),
        ("model", str(call.model)),
        ("shape", f"{call.shape} · {Path(call.source).name}:{call.line}"),
    ]
    if call.harness:
        rows.append(("harness", call.harness))
    rows += [(key, _when(value)) for key, value in call.timing.items()]
    if call.usage:
        rows.append(("usage", ", ".join(f"{k} {v}" for k, v in call.usage.items() if not isinstance(v, dict))))
    return rows


def _trainable(rollout: Rollout, i: int) -> str:
    """Whether the call's sampled tokens are trainable (mask 1), and in which rows (the glossary's words)."""
    call = rollout.calls[i]
    if not call.n_sampled:
        return "no (no sampled tokens)"
    if not rollout.trainable[i]:
        return "no: its sampled tokens stay context (mask 0)"
    if i in rollout.topology.discarded:
        return f"yes, {call.n_sampled:,} tokens, but only in its discarded row (a sibling continued)"
    return f"yes, {call.n_sampled:,} tokens (mask 1)"


def _param(params: dict, key: str) -> str:
    return repr(params[key]) if key in params else "—"


def params_table(rollout: Rollout, i: int) -> pd.DataFrame | None:
    call = rollout.calls[i]
    submitted = call.submitted_params or {}
    keys = list(dict.fromkeys([*call.requested_params, *submitted]))
    if not keys:
        return None
    return pd.DataFrame(
        [
            {
                "param": k,
                "requested": _param(call.requested_params, k),
                "submitted": _param(submitted, k) if call.submitted_params is not None else "not recorded",
            }
            for k in keys
        ]
    )


def _badge(text: str, color: str, ink: str = "#fff") -> str:
    return f'<span style="background:{color};color:{ink};border-radius:10px;padding:1px 9px;font:600 12px system-ui;margin-right:6px">{html_text(text)}</span>'


def header_html(rollout: Rollout, i: int) -> str:
    call = rollout.calls[i]
    role = rollout.node_roles[i]
    badges = _badge(role, ROLE_COLORS[role], ROLE_TEXT[role]) + _badge(node_kind(rollout, i), "#475569")
    if not rollout.trainable[i] and call.n_sampled:
        badges += _badge("not trained", "#dc2626")
    fatal = [f for f in rollout.findings_for(i) if f.level == FATAL]
    if fatal:
        badges += _badge(f"{len(fatal)} FATAL", "#991b1b")
    return (
        f'<div class="rg-node-title" style="font-weight:600;font-size:18px;color:#0f172a;margin:4px 0">{html_text(call.node_id)} '
        f'<span style="font-weight:400;font-size:13px;color:#64748b">arrival #{i}</span></div><div>{badges}</div>'
    )


FACTS_STYLE = (
    "<style>.rg-facts{width:100%;border-collapse:collapse;font:13px system-ui,sans-serif;color:#0f172a}"
    ".rg-facts th,.rg-facts td{border-bottom:1px solid #e2e8f0;padding:5px 8px;text-align:left;vertical-align:top}"
    ".rg-facts th{font-weight:500;color:#475569;white-space:nowrap;width:1%}"
    ".rg-facts td{overflow-wrap:anywhere;white-space:pre-wrap}</style>"
)


def facts_html(rows: list[tuple[str, str]]) -> str:
    """The Facts rows as a table whose values wrap (everything from the trace escaped)."""
    body = "".join(f"<tr><th>{html_text(k)}</th><td>{html_text(v)}</td></tr>" for k, v in rows)
    return f'{FACTS_STYLE}<table class="rg-facts">{body}</table>'


def facts_panel(rollout: Rollout, i: int, decoder: Decoder) -> None:
    """The call's identity and provenance, and its sampling params (the Facts tab)."""
    # an HTML table, not a grid: long values (tokens, usage, shape) wrap instead of being cut at the cell's edge
    st.html(facts_html(facts(rollout, i)))
    params = params_table(rollout, i)
    if params is not None:
        st.caption("Sampling params: requested by the harness vs submitted to the engine")
        st.dataframe(params, hide_index=True, width="stretch")
    st.html(f'<div style="font:12px system-ui;color:#64748b">Token text decoded with {html_text(decoder.label)}</div>')


TAB_NAMES = ("Tokens", "Facts", "Messages", "Sequence", "Findings", "Raw JSON")
# the six labels side by side in the detail pane at 1440 px wide (376 px): Streamlit's 1 rem between
# tabs leaves "Raw JSON" behind a scroll arrow; 0.4 rem fits them with room for a 4-digit findings count.
# Streamlit shows its arrow when the tab list's own box is resized or scrolled, not when its content
# narrows (a style or the page's font applied after the first measure): the list as wide as its labels (at most
# the pane) is resized then, so the arrow follows what is drawn
TABS_STYLE = (
    "<style>.st-key-rg-detail [data-testid='stTabs'] [role='tablist']"
    "{gap:0.4rem;width:max-content;max-width:100%}</style>"
)


def worst_token(rollout: Rollout, i: int) -> tuple[int, float] | None:
    """(position in the call's token view, |trainer - inference|) of the worst token of a call with
    a ``logprob_mismatch`` finding; None otherwise."""
    if not any(f.code == "logprob_mismatch" for f in rollout.findings_for(i)) or rollout.signals is None:
        return None
    found = rollout.signals.calls.get(i)
    if found is None or found.worst_offset is None:
        return None
    call = rollout.calls[i]
    context = call.n_prompt - rollout.context_start(i) if call.prompt_ids is not None else 0
    return context + found.worst_offset, found.worst_abs_diff


def tab_labels(rollout: Rollout, i: int) -> list[str]:
    return [f"Findings ({len(rollout.findings_for(i))})" if t == "Findings" else t for t in TAB_NAMES]


def widget_key(workspace_key: str, rollout: Rollout, i: int) -> str:
    """The prefix of this call's widget keys (the token view's key is ``tok-`` + it)."""
    return f"{workspace_key}-{rollout.session_id}-{rollout.calls[i].node_id}"


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


def messages_panel(rollout: Rollout, i: int) -> None:
    call = rollout.calls[i]
    if call.tools:
        with st.expander(f"Tool manifest ({len(call.tools)} tools)"):
            st.json(call.tools, expanded=False)
    st.html(chat_html(call))


def findings_panel(rollout: Rollout, i: int) -> None:
    found = rollout.findings_for(i)
    if found:
        st.dataframe(
            pd.DataFrame([{"level": f.level, "code": f.code, "detail": f.detail} for f in found]),
            hide_index=True,
            width="stretch",
        )
    else:
        st.caption("No findings for this call.")
    if any(f.code == "logprob_mismatch" for f in found):
        signals_state.worst_token_button(rollout, i, "findings-tab")


def sequence_choice(rollout: Rollout, i: int, key: str) -> tuple[TokenStrip, str] | None:
    """The Sequence tab above its token view: the training row chosen, its numbers, its calls.
    Returns (the row's strip, its widget key), or None when no row runs through the call."""
    # the agent row with the most trainable tokens first
    through = sorted((s for s in rollout.sequences if i in s.nodes), key=lambda s: (s.role != AGENT, -s.n_trainable))
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
    c = st.columns(5)
    c[0].metric("role", seq.role)
    c[1].metric("calls", seq.n_calls)
    c[2].metric("trainable tokens (row)", f"{seq.n_trainable:,}")
    c[3].metric("context tokens (row)", f"{seq.n_context:,}")
    c[4].metric("prompt_len", f"{seq.prompt_len:,}")
    rows = []
    for k in seq.nodes:
        n_context = rollout.calls[k].n_prompt - rollout.context_start(k)
        rows.append(
            {
                "call": rollout.calls[k].node_id,
                "context tokens (mask 0)": n_context,
                "sampled": rollout.calls[k].n_sampled,
                "trainable": bool(rollout.trainable[k]),
            }
        )
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", height=min(300, 38 + 35 * len(rows)))
    st.caption(
        "The whole training row, call by call: context tokens neutral (mask 0), trainable tokens coloured by logprob."
    )
    return sequence_strip(rollout, seq), f"seq-{key}-{names[pick]}"
