"""The pinned token inspector's numbers: every number of one token as copyable text (pure).

Entry points: ``token_facts(strip, pos, decoder)`` (label, value rows) and ``facts_text``.

Where it sits: drawn by views/panels/tokens.py ``inspector`` when a token is pinned (a click on
it, views/panels/keyboard)."""

from __future__ import annotations

import math

from rollout_graph.analysis.decode import Decoder
from rollout_graph.ui.builders.tokens import TokenStrip, alternatives_at, rank_of

PANEL_HEIGHT = 290


def _rank(strip: TokenStrip, pos: int) -> str:
    rank, known = rank_of(strip, pos)
    if not known:
        return "unknown (no alternatives recorded)"
    return f"{rank} of {known} recorded" if rank is not None else f"not among the {known} recorded"


def token_facts(strip: TokenStrip, pos: int, decoder: Decoder) -> list[tuple[str, str]]:
    """(label, value) rows for the token at ``pos``: id, text, logprob, probability, rank, the
    recorded alternatives, loss mask, and where a context token came from (origin view)."""
    token_id = int(strip.ids[pos])
    text = decoder.pieces(strip.ids[max(0, pos - 4) : pos + 1])[-1]
    rows = [("position", f"{pos:,} of {len(strip):,}"), ("id", str(token_id)), ("text", repr(text))]
    if not strip.sampled[pos]:
        rows.append(("span", "context: conditioned on, not trained"))
        rows.append(("loss mask", "0"))
        if strip.origin is not None:
            source = int(strip.origin[pos])
            if source < 0:
                rows.append(("origin", "inserted by the harness (tool output, user text, template glue)"))
            else:
                lp = float(strip.origin_logprob[pos]) if strip.origin_logprob is not None else math.nan
                at = "" if math.isnan(lp) else f" at logprob {lp:.4f} (p {math.exp(lp):.4f})"
                rows.append(("origin", f"sampled earlier by the policy in {strip.origin_names[source]}{at}"))
        return rows
    lp = float(strip.logprobs[pos])
    rows.append(("span", "sampled"))
    if math.isnan(lp):
        rows.append(("logprob", "not recorded (or invalid)"))
    else:
        rows += [("logprob", f"{lp:.6f}"), ("probability", f"{math.exp(lp):.6f}")]
    if strip.overlay is not None:  # with signals joined: the trainer's logprob, from the row shown
        rows += strip.overlay.facts(pos)
    rows.append(("rank", _rank(strip, pos)))
    rows.append(("loss mask", "1 (trained)" if strip.trained[pos] else "0 (sampled but NOT trained)"))
    alternatives = alternatives_at(strip, pos)
    if alternatives:
        texts = decoder.pieces([i for i, _ in alternatives])
        for k, ((i, a), t) in enumerate(zip(alternatives, texts, strict=True), start=1):
            chosen = "  <- sampled" if i == token_id else ""
            rows.append((f"top {k}", f"{t!r} id {i} logprob {a:.4f} p {math.exp(a):.4f}{chosen}"))
    return rows


def facts_text(rows: list[tuple[str, str]]) -> str:
    """The rows as aligned plain text (what the copy button copies)."""
    width = max(len(label) for label, _ in rows)
    return "\n".join(f"{label:<{width}}  {value}" for label, value in rows)
