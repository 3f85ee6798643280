"""Rollout groups (GRPO groups: the same first agent prompt), cached per workspace.

Entry points: ``groups(workspace)``, ``labels``, ``group_by_toggle`` (the Rollouts table's switch),
``ordered`` and ``extra_columns`` (the table grouped), ``groups_frame``.

Where it sits: read by views/panels/rollouts.py and views/panels/groups.py; the grouping is
graph/analysis's."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from rollout_graph.analysis.groups import Group, rollout_groups
from rollout_graph.ui import state
from rollout_graph.ui.state.lru import LRU
from rollout_graph.ui.state.sources import Workspace

_CACHE: LRU[str, list[Group]] = LRU(8)


def groups(workspace: Workspace) -> list[Group]:
    """The workspace's groups (computed once per workspace)."""
    return _CACHE.get_or_compute(workspace.key, lambda: rollout_groups(list(workspace.rollouts.values())))


def labels(workspace: Workspace) -> dict[str, tuple[str, Group]]:
    """Per session: its group's label (G1 is the largest) and the group."""
    return {sid: (f"G{i + 1}", g) for i, g in enumerate(groups(workspace)) for sid in g.members}


def group_by_toggle() -> bool:
    """The rollouts table's "group by first prompt" switch."""
    return st.toggle(
        "Group by first agent prompt (GRPO groups)",
        key=state.GROUP_BY,
        help="Rollouts whose first agent prompt is identical form a group; 'shared' is how many tokens each "
        "member's main sequence shares with the group's first member.",
    )


def ordered(workspace: Workspace, ids: list[str], by_group: bool) -> list[str]:
    """Session ids, grouped (largest group first, members in load order) when ``by_group``."""
    if not by_group:
        return ids
    rank = {sid: (i, g.members.index(sid)) for i, g in enumerate(groups(workspace)) for sid in g.members}
    return sorted(ids, key=lambda sid: rank.get(sid, (len(rank), 0)))


def extra_columns(workspace: Workspace, sid: str, by_group: bool) -> dict:
    """The rollouts table's extra columns: reward and mismatch with signals, the group when grouped."""
    rollout = workspace.rollouts[sid]
    out: dict = {}
    if by_group:
        label, group = labels(workspace).get(sid, ("—", None))
        out["group"] = label
        out["shared"] = None if group is None else group.divergence[sid]
    if rollout.signals is not None:
        s = rollout.signals.summary()
        out["reward"] = s["reward"]
        out["max |Δ|"] = s["max_abs_diff"]
        out["mismatched calls"] = s["n_mismatch_calls"]
    return out


def groups_frame(workspace: Workspace) -> pd.DataFrame:
    """One row per group: members, rewards, shared prompt and where the main sequences part."""
    rows = []
    for label, group in ((f"G{i + 1}", g) for i, g in enumerate(groups(workspace))):
        rewards = [
            workspace.rollouts[sid].signals.reward if workspace.rollouts[sid].signals is not None else None
            for sid in group.members
        ]
        known = [r for r in rewards if r is not None]
        rows.append(
            {
                "group": label, "rollouts": len(group.members), "members": ", ".join(group.members),
                "rewards": ", ".join("—" if r is None else f"{r:.3g}" for r in rewards),
                "mean reward": sum(known) / len(known) if known else None,
                "reward spread": max(known) - min(known) if known else None,
                "first prompt tokens": group.prompt_tokens,
                "main sequences shared": group.common_prefix,
            }
        )  # fmt: skip
    return pd.DataFrame(rows)
