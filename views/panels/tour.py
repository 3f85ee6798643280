"""The tour: what the graph's shapes mean, and one click to each kind of interesting call.

Entry points: ``render(rollout)`` (the guide and its buttons) and ``interesting_calls(rollout)``
(one example per near-miss kind the library names: a retry, a broken replay, a subagent, a side
call, a compaction, a truncated call; pure).

Where it sits: in the "Take the tour" popover at the top of the explorer's first screen
(views/panels/overview.py), reachable without scrolling."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from rollout_graph.analysis.near_miss import (
    BROKEN_REPLAYS,
    COMPACTION,
    REJECTED,
    RESUMED,
    RETRY,
    SIDE_CALL,
    SUBAGENT,
    UNKNOWN,
    describe,
)
from rollout_graph.core.roles import AGENT
from rollout_graph.core.rollout import Rollout
from rollout_graph.escape import md
from rollout_graph.ui import state


@dataclass(frozen=True)
class Example:
    label: str
    node: int
    why: str


def interesting_calls(rollout: Rollout) -> list[Example]:
    """One example of each structure worth seeing, as the near-miss classifier
    (graph/analysis/near_miss.py) names them; this view decides nothing itself (pure)."""
    topo, calls = rollout.topology, rollout.calls
    kinds = {node: miss.kind for node, miss in rollout.near_misses.items()}
    found: list[Example] = []

    def first(label: str, nodes, why) -> None:
        node = next(iter(nodes), None)
        if node is not None:
            found.append(Example(label, node, why(node)))

    def of_kind(*wanted: str, roots: bool | None = None):
        return (
            n for n in sorted(kinds)
            if kinds[n] in wanted and (roots is None or (topo.parents[n] is None) == roots)
        )  # fmt: skip

    def sentence(n: int) -> str:  # the library's one sentence, worded from the later call's side
        return describe(calls, rollout.near_misses[n])

    # a retry's near miss is the re-send's (the later call); the call it re-sent is the discarded one
    def resent(roots: bool):
        return (n for n in of_kind(RETRY, roots=roots) if rollout.near_misses[n].earlier in topo.discarded)

    first("a retry", resent(False), sentence)
    first("a retry of the first call", resent(True), sentence)
    first("a broken replay", of_kind(*BROKEN_REPLAYS), sentence)
    first("a rejected reply", of_kind(REJECTED), sentence)
    first("a subagent", of_kind(SUBAGENT), sentence)
    first("a side call", of_kind(SIDE_CALL), sentence)
    first("a compaction or resume", of_kind(COMPACTION, RESUMED), sentence)
    first(
        "a break with thin evidence",
        of_kind(UNKNOWN),
        lambda n: f"{sentence(n)}; the evidence is thin, so the cause is not named",
    )
    truncated = [i for i, c in enumerate(calls) if c.finish_reason == "length"]
    first(
        "a truncated call",
        sorted(truncated, key=lambda i: rollout.node_roles[i] != AGENT),
        lambda i: f"{calls[i].node_id} stopped at max tokens",
    )
    return found


GUIDE = (
    "Every node is one model call, linked to the calls before it by the exact tokens the model saw. A **root** (◆) "
    "starts a new conversation, a **fork** (■) was continued by more than one call, a **leaf** (●) ends a training "
    "row, and a **discarded** call (grey, crossed) is one no row continues as trained: a sibling went on instead (a "
    "**retry** when the same prompt was re-sent). Blue calls are the agent's work, amber ones auxiliary (titles, "
    "summaries, side calls). **Story** (above the graph) tells the same calls as conversations you read."
)


def render(rollout: Rollout) -> None:
    """The guide and one button per kind of interesting call found in the rollout (the content
    of the first screen's "Take the tour" popover)."""
    examples = interesting_calls(rollout)
    with st.container(key="rg-tour", width=560):
        st.markdown(GUIDE)
        if not examples:
            return
        st.markdown("**One click to each kind of call worth seeing:**")
        for example in examples:
            st.button(
                md(f"{example.label}: {rollout.calls[example.node].node_id}"),
                key=f"tour-{rollout.session_id}-{example.label}",
                help=md(example.why, 600),
                on_click=state.select_node,
                args=(rollout, example.node),
                width="stretch",
            )
