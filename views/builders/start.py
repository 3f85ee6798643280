"""What the detail pane offers before a call is selected (pure): the calls worth a look, most
severe first, each with the words of its button and why.

Entry point: ``calls_worth_a_look(rollout, limit=8) -> [Start]``: one per finding code at the
first call that has it (FATAL, then WARN, then INFO; the most frequent code first), then roots the
near-miss classifier explained as broken replays or compactions, then the first fork and the
last leaf, so even a clean rollout offers somewhere to start.

Where it sits: drawn as buttons by views/panels/start.py."""

from __future__ import annotations

from dataclasses import dataclass

from rollout_graph.analysis.near_miss import BROKEN_REPLAYS, COMPACTION
from rollout_graph.core.rollout import Rollout
from rollout_graph.core.types import LEVELS

START_CALLS = 8  # buttons in the pane: enough to start, short enough to read at a glance


@dataclass(frozen=True, slots=True)
class Start:
    index: int  # the call's arrival index
    label: str  # the button's words (trace text: escape before drawing)
    why: str  # its tooltip


def calls_worth_a_look(rollout: Rollout, limit: int = START_CALLS) -> list[Start]:
    """Up to ``limit`` calls to open first (see the module docstring for the order)."""
    calls, topo = rollout.calls, rollout.topology
    out: list[Start] = []
    seen: set[int] = set()
    rank = {level: k for k, level in enumerate(LEVELS)}
    # one button per finding code, at its first call: the most severe codes first, then the most
    # frequent (a code on every call takes one button, not all of them)
    codes: dict[str, tuple[int, list[int], list]] = {}  # code -> (rank, its calls, their findings)
    for i in range(len(calls)):
        for f in rollout.findings_for(i):
            level, at, found = codes.get(f.code, (len(LEVELS), [], []))
            if not at or at[-1] != i:
                at.append(i)
                found.append(f)
            codes[f.code] = (min(level, rank.get(f.level, len(LEVELS))), at, found)
    for code, (_, at, found) in sorted(codes.items(), key=lambda kv: (kv[1][0], -len(kv[1][1]), kv[1][1][0])):
        k = next((k for k, i in enumerate(at) if i not in seen), 0)  # a call of its own when it can
        i, f = at[k], found[k]
        more = f" · {len(at):,} calls" if len(at) > 1 else ""
        out.append(Start(i, f"{calls[i].node_id} · {f.level} {code}{more}", f.detail))
        seen.add(i)
    # one button per kind of break at its first root: broken replays, compactions
    for kind, kinds, why in (
        ("broken replay", BROKEN_REPLAYS, "a replay of the model's own reply that broke the token prefix"),
        ("compaction", (COMPACTION,), "a compaction: the history summarised, drawn after the call it compacted"),
    ):
        roots = [i for i, m in sorted(rollout.near_misses.items()) if m.kind in kinds and topo.parents[i] is None]
        first = next((i for i in roots if i not in seen), None)
        if first is not None:
            more = f" · {len(roots):,} calls" if len(roots) > 1 else ""
            out.append(Start(first, f"{calls[first].node_id} · {kind}{more}", why))
            seen.add(first)
    forks = [i for i in range(len(calls)) if len(topo.children[i]) > 1 and i not in seen]
    if forks:
        out.append(Start(forks[0], f"{calls[forks[0]].node_id} · first fork", "more than one call extends its ids"))
        seen.add(forks[0])
    leaves = [i for i in range(len(calls)) if not topo.children[i] and i not in seen and i not in topo.discarded]
    if leaves:
        out.append(Start(leaves[-1], f"{calls[leaves[-1]].node_id} · last leaf", "the end of the last training row"))
    return out[:limit]
