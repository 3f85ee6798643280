"""The open rollout's headline numbers (pure): one tile per count, each with its one-line meaning.

Entry points: ``headline_tiles(rollout) -> [(label, value, help)]`` (calls, roots, forks, retries,
broken replays, trainable tokens (rows), FATAL · WARN: the glossary's words, docs/semantics.md),
``compact(n)`` (1,234 / 12.3k / 1.89M: numbers that fit a tile).

Where it sits: drawn by the overview panel (views/panels/overview.py); the counts are the
rollout's own (``Rollout.stats``), never computed here.
"""

from __future__ import annotations

from rollout_graph.core.records import FATAL, WARN
from rollout_graph.core.rollout import Rollout


def compact(n: int) -> str:
    """1,234 / 12.3k / 1.89M: numbers that fit a metric tile."""
    if n < 10_000:
        return f"{n:,}"
    if n < 1_000_000:
        return f"{n / 1000:.1f}k"
    return f"{n / 1_000_000:.2f}M"


def headline_tiles(rollout: Rollout) -> list[tuple[str, str | int, str | None]]:
    """(label, value, help) per headline tile: retries the harness made are counted apart from
    replays of the model's own reply that broke the token prefix (pure)."""
    s, counts = rollout.stats, rollout.finding_counts
    return [
        ("calls", s["n_calls"], None),
        ("roots", s["n_roots"], None),
        ("forks", s["n_forks"], None),
        ("retries", s["n_discarded_retries"], "discarded calls the harness re-sent with the same prompt"),
        ("broken replays", s["n_broken_replays"],
         "the model's own reply replayed so that the token prefix broke (edited or re-tokenized): "
         "a new root or a call that only looks discarded"),
        ("trainable tokens (rows)", compact(s["n_trainable_tokens"]),
         "loss-mask-1 tokens summed over the training rows (a call in several rows counts in each; "
         f"{s['n_trainable_tokens_in_discarded_rows']:,} of them in discarded rows). Each call once: "
         f"{s['n_trainable_call_tokens']:,} trainable tokens (calls), the Audit panel's count"),
        ("FATAL · WARN", f"{counts[FATAL]} · {counts[WARN]}", "findings by level (the findings panel lists every code)"),
    ]  # fmt: skip
