"""Search hits in words (pure): where a hit is, which hit a click on its call opens, and the hit
list grouped by call.

Entry points: ``describe(hit)`` (``message 3 (tool)``, ``sampled token 12``), ``best_hit(hits)``
(a token position when there is one: the token view can ring it), ``by_call(hits)``.

Where it sits: the matching itself is graph/analysis/search.py; the search box and its hit list
are drawn by views/panels/find.py.
"""

from __future__ import annotations

from rollout_graph.analysis.search import Hit


def best_hit(hits: list[Hit]) -> Hit:
    """The hit a click on its call opens: a token position when there is one (the token view can
    ring it), else the first."""
    return next((h for h in hits if h.token_index is not None), hits[0])


def describe(hit: Hit) -> str:
    """Where a hit is, in words: ``message 3 (tool)``, ``sampled token 12``, ``response``."""
    if hit.message_index is not None:
        place = f"message {hit.message_index} ({hit.role})"
    elif hit.token_index is not None:
        place = f"{hit.where} token {hit.token_index}"
    else:
        place = hit.where
    return place + (f" ×{hit.count}" if hit.count > 1 else "")


def by_call(hits: list[Hit]) -> dict[int, list[Hit]]:
    """The hits grouped by call (arrival index), in the order their calls first appear."""
    out: dict[int, list[Hit]] = {}
    for hit in hits:
        out.setdefault(hit.index, []).append(hit)
    return out
