"""One call's detail as data and HTML (pure, no streamlit): its header, its facts, its sampling
params, its findings and the training rows through it.

Entry points: ``header_html`` (id, arrival, role and kind badges), ``facts`` / ``facts_html`` (the
Facts tab: identity and provenance, values that wrap), ``params_table`` (requested vs submitted
sampling params), ``findings_frame``, ``rows_through`` and ``row_calls_frame`` (the Sequence tab),
``row_numbers_html`` (a row's numbers, wrapping), ``tab_labels`` and ``TABS_STYLE`` (the six tabs).

Where it sits: the detail pane's panel (views/panels/node.py) draws these; every string from the
trace is escaped here (rollout_graph.escape) before it becomes HTML.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from rollout_graph.analysis.token_flow import inherited_share
from rollout_graph.core.records import FATAL
from rollout_graph.core.rollout import Rollout
from rollout_graph.core.sequences import Sequence
from rollout_graph.core.types import AGENT
from rollout_graph.escape import html_text
from rollout_graph.ui.builders.palette import ROLE_COLORS, ROLE_TEXT

TAB_NAMES = ("Tokens", "Facts", "Messages", "Sequence", "Findings", "Raw JSON")
# the six labels side by side in the detail pane at 1440 px wide: Streamlit's 1 rem between tabs
# leaves "Raw JSON" behind a scroll arrow; 0.4 rem fits them with room for a 4-digit findings count.
# Streamlit shows its arrow when the tab list's own box is resized or scrolled, not when its content
# narrows (a style or the page's font applied after the first measure): the list as wide as its
# labels (at most the pane) is resized then, so the arrow follows what is drawn
TABS_STYLE = (
    "<style>.st-key-rg-detail [data-testid='stTabs'] [role='tablist']"
    "{gap:0.4rem;width:max-content;max-width:100%}</style>"
)
FACTS_STYLE = (
    "<style>.rg-facts{width:100%;border-collapse:collapse;font:13px system-ui,sans-serif;color:#0f172a}"
    ".rg-facts th,.rg-facts td{border-bottom:1px solid #e2e8f0;padding:5px 8px;text-align:left;vertical-align:top}"
    ".rg-facts th{font-weight:500;color:#475569;white-space:nowrap;width:1%}"
    ".rg-facts td{overflow-wrap:anywhere;white-space:pre-wrap}</style>"
)


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
        ("trainable", trainable(rollout, i)),
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


def trainable(rollout: Rollout, i: int) -> str:
    """Whether the call's sampled tokens are trainable (mask 1), and in which rows (the glossary's words)."""
    call = rollout.calls[i]
    if not call.n_sampled:
        return "no (no sampled tokens)"
    if not rollout.trainable[i]:
        return "no: its sampled tokens stay context (mask 0)"
    if i in rollout.topology.discarded:
        return f"yes, {call.n_sampled:,} tokens, but only in its discarded row (a sibling continued)"
    return f"yes, {call.n_sampled:,} tokens (mask 1)"


def facts_html(rows: list[tuple[str, str]]) -> str:
    """The Facts rows as a table whose values wrap (everything from the trace escaped)."""
    body = "".join(f"<tr><th>{html_text(k)}</th><td>{html_text(v)}</td></tr>" for k, v in rows)
    return f'{FACTS_STYLE}<table class="rg-facts">{body}</table>'


def _param(params: dict, key: str) -> str:
    return repr(params[key]) if key in params else "—"


def params_table(rollout: Rollout, i: int) -> pd.DataFrame | None:
    """Sampling params, requested by the harness vs submitted to the engine; None when neither is recorded."""
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


def badge(text: str, color: str, ink: str = "#fff") -> str:
    """A small rounded label (the text escaped)."""
    return (
        f'<span style="background:{color};color:{ink};border-radius:10px;padding:1px 9px;'
        f'font:600 12px system-ui;margin-right:6px">{html_text(text)}</span>'
    )


def header_html(rollout: Rollout, i: int) -> str:
    """The detail's title: the call's id, arrival number, role and kind, and what stands out."""
    call = rollout.calls[i]
    role = rollout.node_roles[i]
    badges = badge(role, ROLE_COLORS[role], ROLE_TEXT[role]) + badge(rollout.topology.kind(i), "#475569")
    if not rollout.trainable[i] and call.n_sampled:
        badges += badge("not trained", "#dc2626")
    fatal = [f for f in rollout.findings_for(i) if f.level == FATAL]
    if fatal:
        badges += badge(f"{len(fatal)} FATAL", "#991b1b")
    return (
        f'<div class="rg-node-title" style="font-weight:600;font-size:18px;color:#0f172a;margin:4px 0">'
        f"{html_text(call.node_id)} "
        f'<span style="font-weight:400;font-size:13px;color:#64748b">arrival #{i}</span></div><div>{badges}</div>'
    )


def tab_labels(rollout: Rollout, i: int) -> list[str]:
    """The six tabs' labels, the findings tab with its count."""
    return [f"Findings ({len(rollout.findings_for(i))})" if t == "Findings" else t for t in TAB_NAMES]


def findings_frame(rollout: Rollout, i: int) -> pd.DataFrame | None:
    """The call's findings as a table (level, code, detail); None when it has none."""
    found = rollout.findings_for(i)
    if not found:
        return None
    return pd.DataFrame([{"level": f.level, "code": f.code, "detail": f.detail} for f in found])


def rows_through(rollout: Rollout, i: int) -> list[Sequence]:
    """The training rows through the call, the agent's row with the most trainable tokens first."""
    return sorted((s for s in rollout.sequences if i in s.nodes), key=lambda s: (s.role != AGENT, -s.n_trainable))


def row_calls_frame(rollout: Rollout, seq: Sequence) -> pd.DataFrame:
    """A training row call by call: its context tokens (mask 0), sampled tokens, whether trained."""
    return pd.DataFrame(
        [
            {
                "call": rollout.calls[k].node_id,
                "context tokens (mask 0)": rollout.calls[k].n_prompt - rollout.context_start(k),
                "sampled": rollout.calls[k].n_sampled,
                "trainable": bool(rollout.trainable[k]),
            }
            for k in seq.nodes
        ]
    )


ROW_NUMBERS_STYLE = (
    "<style>.rg-rownums{display:flex;flex-wrap:wrap;gap:6px 22px;font:13px system-ui,sans-serif;color:#475569;"
    "margin:2px 0 6px}.rg-rownums b{display:block;font-size:20px;color:#0f172a;font-weight:600}</style>"
)


def row_numbers_html(seq: Sequence) -> str:
    """A training row's numbers as label-over-value pairs that wrap (never cut to "a…")."""
    pairs = (
        ("role", seq.role),
        ("calls", f"{seq.n_calls:,}"),
        ("trainable tokens (row)", f"{seq.n_trainable:,}"),
        ("context tokens (row)", f"{seq.n_context:,}"),
        ("prompt_len", f"{seq.prompt_len:,}"),
    )
    cells = "".join(f"<span>{html_text(label)}<b>{html_text(value)}</b></span>" for label, value in pairs)
    return f'{ROW_NUMBERS_STYLE}<div class="rg-rownums">{cells}</div>'
