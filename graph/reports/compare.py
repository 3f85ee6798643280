"""Two rollouts side by side (``rollout-graph compare``, the app's Compare page).

``stats`` on each side are exactly what ``inspect`` reports; ``main`` compares the two main agent
sequences (the row the app opens first): their common token prefix, each length, and the first
divergent position with the token, logprob and call on each side.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from rollout_graph.analysis.groups import common_prefix, group_key
from rollout_graph.analysis.story import main_row
from rollout_graph.core.rollout import Rollout
from rollout_graph.core.sequences import Sequence, SequenceTokens
from rollout_graph.core.types import LEVELS
from rollout_graph.reports.summary import signals_text
from rollout_graph.signals.corrections import text_lines


def _call_at(rollout: Rollout, seq: Sequence, tokens: SequenceTokens, position: int) -> str | None:
    """The call whose span (context or sampled) holds ``position`` of the sequence."""
    starts = tokens.turn_starts
    if not len(starts):
        return None
    turn = int(np.searchsorted(starts, position, side="right")) - 1
    return rollout.calls[seq.nodes[max(0, turn)]].node_id


def _token(rollout: Rollout, seq: Sequence, tokens: SequenceTokens, position: int) -> dict[str, Any] | None:
    if position >= tokens.input_ids.shape[0]:
        return None
    trained = bool(tokens.loss_mask[position])
    return {
        "token_id": int(tokens.input_ids[position]),
        "trained": trained,
        "logprob": float(tokens.logprobs[position]) if trained else None,
        "node_id": _call_at(rollout, seq, tokens, position),
    }


def side(rollout: Rollout) -> dict[str, Any]:
    """One side of the comparison: what ``inspect`` reports, the findings by code, the signals."""
    seq = main_row(rollout)
    out: dict[str, Any] = {
        "session_id": rollout.session_id,
        "stats": dict(rollout.stats),
        "finding_counts": rollout.finding_counts,
        "finding_codes": dict(sorted(Counter(f.code for f in rollout.findings).items())),
        "main_leaf_id": None if seq is None else rollout.calls[seq.leaf].node_id,
        "first_prompt": group_key(rollout),
    }
    if rollout.signals is not None:
        out["signals"] = rollout.signals.summary()
    return out


def compare_main(a: Rollout, b: Rollout) -> dict[str, Any]:
    """The two main agent sequences: common prefix, lengths, and the first divergence."""
    seq_a, seq_b = main_row(a), main_row(b)
    if seq_a is None or seq_b is None:
        n_a = 0 if seq_a is None else seq_a.n_context + seq_a.n_trainable
        n_b = 0 if seq_b is None else seq_b.n_context + seq_b.n_trainable
        return {"common_prefix_tokens": 0, "a_tokens": n_a, "b_tokens": n_b, "identical": False, "divergence": None}
    tok_a, tok_b = a.tokens(seq_a), b.tokens(seq_b)
    shared = common_prefix(tok_a.input_ids, tok_b.input_ids)
    n_a, n_b = int(tok_a.input_ids.shape[0]), int(tok_b.input_ids.shape[0])
    identical = shared == n_a == n_b
    return {
        "a_leaf_id": a.calls[seq_a.leaf].node_id,
        "b_leaf_id": b.calls[seq_b.leaf].node_id,
        "common_prefix_tokens": shared,
        "a_tokens": n_a,
        "b_tokens": n_b,
        "identical": identical,
        "divergence": None
        if identical
        else {"position": shared, "a": _token(a, seq_a, tok_a, shared), "b": _token(b, seq_b, tok_b, shared)},
    }


def compare(a: Rollout, b: Rollout) -> dict[str, Any]:
    """``compare --json``: ``{"a": side, "b": side, "main": ..., "differences": ...}`` (docs/cli.md)."""
    left, right = side(a), side(b)
    stats = [k for k in left["stats"] if left["stats"][k] != right["stats"].get(k)]
    codes = sorted(
        c
        for c in set(left["finding_codes"]) | set(right["finding_codes"])
        if left["finding_codes"].get(c) != right["finding_codes"].get(c)
    )
    return {
        "a": left,
        "b": right,
        "main": compare_main(a, b),
        "differences": {
            "stats": stats,
            "finding_codes": codes,
            "same_first_prompt": left["first_prompt"] is not None and left["first_prompt"] == right["first_prompt"],
        },
    }


def compare_lines(result: dict[str, Any]) -> list[str]:
    """The readable ``compare`` report."""
    a, b, main = result["a"], result["b"], result["main"]
    width = max(len("stat"), *(len(k) for k in a["stats"]))
    lines = [f"A {a['session_id']}  ·  B {b['session_id']}", ""]
    lines.append(f"{'':{width}}  {'A':>10}  {'B':>10}")
    for key in a["stats"]:
        mark = "  *" if key in result["differences"]["stats"] else ""
        lines.append(f"{key:{width}}  {a['stats'][key]:>10,}  {b['stats'][key]:>10,}{mark}")
    for level in LEVELS:
        mark = "  *" if a["finding_counts"][level] != b["finding_counts"][level] else ""
        lines.append(f"{level:{width}}  {a['finding_counts'][level]:>10,}  {b['finding_counts'][level]:>10,}{mark}")
    if result["differences"]["finding_codes"]:
        codes = ", ".join(
            f"{c} {a['finding_codes'].get(c, 0)}/{b['finding_codes'].get(c, 0)}"
            for c in result["differences"]["finding_codes"]
        )
        lines.append(f"findings that differ (A/B): {codes}")
    for name, s in (("A", a), ("B", b)):
        if "signals" in s:
            lines.append(f"signals {name}: {signals_text(s['signals'])}")
            lines += [f"  correction {name} {t}" for t in text_lines(s["signals"].get("corrections") or [])]
    lines.append("")
    same = (
        "the same first agent prompt" if result["differences"]["same_first_prompt"] else "different first agent prompts"
    )
    lines.append(f"{same}; main sequences: A {main['a_tokens']:,} tokens, B {main['b_tokens']:,} tokens")
    if main["identical"]:
        lines.append("the main sequences are identical")
    elif main["divergence"] is not None:
        d = main["divergence"]
        lines.append(
            f"common prefix {main['common_prefix_tokens']:,} tokens; first divergence at position {d['position']:,}"
        )
        for name in ("a", "b"):
            t = d[name]
            if t is None:
                lines.append(f"  {name.upper()}: ends here")
            else:
                lp = "context" if t["logprob"] is None else f"logprob {t['logprob']:.4f}"
                lines.append(f"  {name.upper()}: token {t['token_id']} in {t['node_id']} ({lp})")
    return lines
