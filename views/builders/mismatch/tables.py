"""The mismatch lens's tables (pure pandas): the corrections side by side, where two corrections
disagree, the worst tokens, and the corrections over a whole audit.

Entry points: ``comparison_frame`` and ``disagreement_frame`` (from an ``Evaluation``),
``worst_frame`` (the worst tokens as ``inspect`` lists them), ``audit_comparison`` (the Corpus
page's audit frame, combined exactly: docs/corrections.md).

Where it sits: shown by views/panels/corrections.py and views/panels/corpus.py.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rollout_graph.signals.corrections import LOG_BOUND, Evaluation


def comparison_frame(evaluation: Evaluation) -> pd.DataFrame:
    """One row per correction: tokens and rows affected, weight lost, ESS (side by side)."""
    rows = []
    for e in evaluation.as_list():
        rows.append(
            {
                "correction": e["label"], "tokens affected": e["tokens_affected"], "of tokens": e["n_tokens"],
                "share": e["share_tokens"], "rows affected": e["sequences_affected"], "of rows": e["n_sequences"],
                "weight lost": e["weight_lost"], "ESS": e["ess"],
            }
        )  # fmt: skip
    return pd.DataFrame(rows)


def disagreement_frame(evaluation: Evaluation) -> pd.DataFrame:
    """One row per pair of corrections: tokens only one touches, both, and masked by one, kept by the other."""
    return pd.DataFrame(
        [
            {
                "A": x["a"], "B": x["b"], "only A": x["only_a"], "only B": x["only_b"], "both": x["both"],
                "A masks, B keeps": x["a_masks_b_keeps"], "B masks, A keeps": x["b_masks_a_keeps"],
            }
            for x in evaluation.disagreements()
        ]
    )  # fmt: skip


def worst_frame(worst: list[dict], texts: list[str] | None = None) -> pd.DataFrame:
    """The worst tokens (largest |Δ|) as a table, each with its text when ``texts`` is given
    (``points.worst_token_texts``: what the token reads, escaped where it is drawn)."""
    return pd.DataFrame(
        [
            {
                "call": w["node_id"], **({"token": texts[k]} if texts is not None else {}),
                "row (leaf)": w["leaf_id"], "position": w["position"], "Δ": w["d"],
                "ratio": float(np.exp(np.clip(w["d"], -LOG_BOUND, LOG_BOUND))),
                "inference logprob": w["inference_logprob"], "trainer logprob": w["trainer_logprob"],
            }
            for k, w in enumerate(worst)
        ]
    )  # fmt: skip


def audit_comparison(frame: pd.DataFrame) -> pd.DataFrame | None:
    """The corrections side by side over a whole audit (its ``corrections`` column, combined
    exactly: docs/corrections.md); ``None`` when the audit was run without ``--correction``."""
    from rollout_graph.signals.corrections import combine

    if "corrections" not in frame:
        return None
    entries = [list(e) for e in frame["corrections"] if e is not None and len(e)]
    if not entries:
        return None
    return pd.DataFrame(
        [
            {
                "correction": t["label"], "tokens affected": t["tokens_affected"], "of tokens": t["n_tokens"],
                "share": t["share_tokens"], "rows affected": t["sequences_affected"], "of rows": t["n_sequences"],
                "weight lost": t["weight_lost"], "ESS": t["ess"],
            }
            for t in combine(entries)
        ]
    )  # fmt: skip
