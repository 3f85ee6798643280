"""The first-run guide: what the shapes mean, and one click to each kind of interesting call."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from graph.core.roles import AGENT
from graph.core.rollout import Rollout
from views import state
from views.escape import md


@dataclass(frozen=True)
class Example:
    label: str
    node: int
    why: str


def _system_prompt(rollout: Rollout, node: int) -> str | None:
    messages = rollout.calls[node].request_messages or []
    return messages[0].get("content") if messages and messages[0].get("role") == "system" else None


def interesting_calls(rollout: Rollout) -> list[Example]:
    """One example of each structure worth seeing, found from the graph itself (pure)."""
    topo, calls = rollout.topology, rollout.calls
    agent_rows = [s for s in rollout.sequences if s.role == AGENT]
    main_root = (
        max(agent_rows, key=lambda s: s.n_trainable).nodes[0] if agent_rows else (topo.roots[0] if topo.roots else None)
    )
    found: list[Example] = []

    def first(label: str, nodes, why) -> None:
        node = next(iter(nodes), None)
        if node is not None:
            found.append(Example(label, node, why(node)))

    first(
        "a retry",
        (d for d in sorted(topo.discarded) if topo.parents[d] is not None),
        lambda d: f"{calls[d].node_id} was sampled, then resampled; {calls[topo.discarded[d]].node_id} continued",
    )
    first(
        "a resampled first call",
        (d for d in sorted(topo.discarded) if topo.parents[d] is None),
        lambda d: f"{calls[d].node_id} has the same prompt as {calls[topo.discarded[d]].node_id}, which continued",
    )
    others = [r for r in topo.roots if r != main_root and r not in topo.discarded]
    main_system = _system_prompt(rollout, main_root) if main_root is not None else None
    own_prompt = [r for r in others if _system_prompt(rollout, r) != main_system]
    first(
        "a subagent",
        (r for r in own_prompt if topo.children[r]),
        lambda r: f"{calls[r].node_id} starts a conversation of its own, with its own system prompt",
    )
    first(
        "a side call",
        (r for r in own_prompt if not topo.children[r]),
        lambda r: f"{calls[r].node_id} is a single call with its own system prompt (a title, a summary, ...)",
    )
    first(
        "a compaction or rewrite",
        (r for r in others if main_system is not None and _system_prompt(rollout, r) == main_system),
        lambda r: f"{calls[r].node_id} has the agent's system prompt but a history that is not a token prefix",
    )
    truncated = [i for i, c in enumerate(calls) if c.finish_reason == "length"]
    first(
        "a truncated turn",
        sorted(truncated, key=lambda i: rollout.node_roles[i] != AGENT),
        lambda i: f"{calls[i].node_id} stopped at max tokens",
    )
    return found


GUIDE = (
    "Every node is one model call. Calls are linked by exact token prefix: a **root** (◆) starts a new "
    "conversation, a **fork** (■) was continued by more than one call, a **leaf** (●) ends a training "
    "sequence (one row per leaf), and a **discarded** call (grey) is a retry that led nowhere while a sibling "
    "continued. Blue calls are the agent's work, amber ones auxiliary (titles, summaries, side calls)."
)


def render(rollout: Rollout, expanded: bool) -> None:
    examples = interesting_calls(rollout)
    with st.expander("New here? What you are looking at, and where to click", expanded=expanded):
        st.markdown(GUIDE)
        if examples:
            cols = st.columns(len(examples))
            for col, example in zip(cols, examples, strict=True):
                col.button(
                    md(example.label),
                    key=f"tour-{rollout.session_id}-{example.label}",
                    help=md(example.why, 300),
                    on_click=state.select_node,
                    args=(rollout, example.node),
                    width="stretch",
                )
