"""Search hits in words (pure): where a hit is, which hit a click on its call opens, and the hit
list grouped by call.

Entry points: ``describe(hit)`` (``message 3 (tool)``, ``sampled token 12``), ``best_hit(hits)``
(a token position when there is one: the token view can ring it), ``by_call(hits)``, ``hit_rows``
(calls whose hits read the same, one row: a message every later call repeats is one line, not 15).

Where it sits: the matching itself is graph/analysis/search.py; the search box and its hit list
are drawn by views/panels/find.py.
"""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True, slots=True)
class HitRow:
    """One row of the hit list: the calls whose hits read the same (same places, same snippet)."""

    calls: tuple[int, ...]
    target: Hit  # what a click on the row opens: the first call's best hit
    label: str  # trace text: escape before drawing


def hit_rows(grouped: dict[int, list[Hit]], ids: list[str]) -> list[HitRow]:
    """The hit list's rows: consecutive calls whose hits have the same places and snippet share one."""
    rows: list[tuple[list[int], Hit, str, str]] = []
    for i, found in grouped.items():
        target = best_hit(found)
        places = ", ".join(describe(h) for h in found)
        if rows and rows[-1][2] == places and rows[-1][1].snippet == target.snippet:
            rows[-1][0].append(i)
            continue
        rows.append(([i], target, places, target.snippet))
    out = []
    for calls, target, places, snippet in rows:
        more = f" and {len(calls) - 1} later call{'s' if len(calls) > 2 else ''}" if len(calls) > 1 else ""
        out.append(HitRow(tuple(calls), target, f"{ids[calls[0]]} · #{calls[0]}{more} · {places} — {snippet}"))
    return out
