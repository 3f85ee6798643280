"""The "what your trainer trains" view's pure builders: the frameworks side by side, one
framework's rows, its calls' fates, the differences worded, and a row's tokens coloured by
provenance (docs/reconcile.md). Every number and sentence comes from
rollout_graph.analysis.reconcile (the library decides; this only lays out); every trace string
that reaches HTML goes through ``rollout_graph.escape``. Never imports streamlit."""

from __future__ import annotations

from typing import Any

import numpy as np

from rollout_graph.analysis.reconcile import LABELS, reconcile_all
from rollout_graph.analysis.reconcile.explain import differences
from rollout_graph.analysis.reconcile.model import PROVENANCE, Reconciled, TrainerRow, row_tokens
from rollout_graph.core.rollout import Rollout
from rollout_graph.escape import html_text

# provenance -> (background, what the legend says)
COLOURS = {
    "context": ("#eef0f3", "context (mask 0)"),
    "sampled": ("#cfe8d2", "trained: sampled by the model here"),
    "sampled_as_context": ("#dbe7f7", "the model's own tokens, kept as context"),
    "retokenized": ("#fde2c4", "re-tokenized: other ids for the model's text"),
    "off_policy": ("#f8c7c7", "trained, but never sampled after this prefix"),
    "no_logprob": ("#f3d9f7", "trained with logprob 0.0 (none recorded)"),
}
COLLAPSE = 48  # a run of context tokens longer than this is folded to its count


def results(rollout: Rollout, eos_token_id: int | None = None) -> list[Reconciled]:
    """Every framework with its defaults (NeMo-RL with the tokenizer's EOS id when known)."""
    spec: list[tuple[str, dict[str, Any]]] = [(f, {}) for f in LABELS]
    if eos_token_id is not None:
        spec = [(f, {"eos_token_id": eos_token_id} if f == "nemo-rl" else {}) for f, _ in spec]
    return reconcile_all(rollout, spec)


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def summary_rows(found: list[Reconciled]) -> list[dict[str, Any]]:
    """One line per framework: rows, trained tokens, tokens trained the model never sampled,
    sampled tokens dropped, delivered fraction, quarantined calls."""
    out = []
    for r in found:
        s = r.summary()
        out.append(
            {
                "framework": LABELS.get(r.framework, r.framework),
                "rows trained": f"{s['n_rows_trained']} of {s['n_rows']}",
                "trained tokens": s["n_trained_tokens"],
                "never sampled": s["n_trained_never_sampled"],
                "without a logprob": s["n_trained_without_logprob"],
                "sampled tokens dropped": s["n_dropped_tokens"],
                "delivered": _pct(s["delivered_fraction"]),
                "quarantined calls": s["n_quarantined_calls"],
                "note": r.error or "",
            }
        )
    return out


def row_lines(rollout: Rollout, result: Reconciled) -> list[dict[str, Any]]:
    """One line per row the framework builds."""
    out = []
    for row in result.rows:
        calls = [rollout.calls[k].node_id for k in row.calls]
        out.append(
            {
                "row": row.row_id,
                "label": row.label,
                "trained": row.trained,
                "calls": f"{calls[0]} … {calls[-1]} ({len(calls)})" if len(calls) > 2 else ", ".join(calls),
                "tokens": row.length,
                "masked 1": row.n_mask,
                "why not trained": row.why_not or "",
            }
        )
    return out


def call_lines(rollout: Rollout, result: Reconciled) -> list[dict[str, Any]]:
    """Each call once: its sampled tokens, how many the framework trains, and why not the rest."""
    return [
        {"call": c.node_id, "sampled": f.n_sampled, "trained": f.n_trained, "status": f.status, "why": f.reason}
        for c, f in zip(rollout.calls, result.fates, strict=False)
    ]


def sentences(rollout: Rollout, result: Reconciled) -> list[str]:
    """The library's sentence per difference (rollout_graph.analysis.reconcile.explain)."""
    return [d["sentence"] for d in differences(rollout, result)]


def legend_html() -> str:
    """One chip per provenance."""
    chips = "".join(
        f"<span style='background:{bg};padding:1px 6px;margin-right:6px;border-radius:3px'>{html_text(text)}</span>"
        for bg, text in COLOURS.values()
    )
    return f"<div style='font-size:0.8rem;margin:4px 0'>{chips}</div>"


def token_strip_html(rollout: Rollout, row: TrainerRow, pieces, limit: int = 4000) -> str:
    """A row's tokens coloured by provenance, long context runs folded; ``pieces(ids)`` decodes
    (one string per id). At most ``limit`` tokens are drawn (the last ones: where a row ends is
    where the frameworks differ); the rest are counted."""
    tokens = row_tokens(rollout, row)
    n = int(tokens.input_ids.shape[0])
    start = max(0, n - limit)
    ids = tokens.input_ids[start:]
    codes = tokens.provenance[start:]
    texts = pieces(ids) if ids.shape[0] else []
    parts = [f"<span style='color:#777'>… {start:,} earlier tokens …</span>"] if start else []
    i = 0
    while i < len(texts):
        code = int(codes[i])
        j = i
        while j < len(texts) and int(codes[j]) == code:
            j += 1
        name = PROVENANCE[code]
        bg = COLOURS[name][0]
        if name == "context" and j - i > COLLAPSE:
            head = "".join(texts[i : i + 12])
            tail = "".join(texts[j - 12 : j])
            body = (
                f"{html_text(head)}<span style='color:#777'> … {j - i - 24:,} context tokens … </span>{html_text(tail)}"
            )
        else:
            body = html_text("".join(texts[i:j]))
        parts.append(f"<span title='{html_text(name)}' style='background:{bg};white-space:pre-wrap'>{body}</span>")
        i = j
    return (
        "<div style='font-family:monospace;font-size:0.8rem;line-height:1.5;max-height:420px;overflow:auto'>"
        + "".join(parts)
        + "</div>"
    )


def provenance_counts(rollout: Rollout, row: TrainerRow) -> dict[str, int]:
    """How many of the row's tokens fall in each provenance."""
    codes = row_tokens(rollout, row).provenance
    return {name: int(np.count_nonzero(codes == code)) for code, name in enumerate(PROVENANCE)}
