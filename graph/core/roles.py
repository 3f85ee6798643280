"""Sequence roles (docs/semantics.md, "Roles"): agent, auxiliary or discarded; every row is labelled, none dropped."""

from __future__ import annotations

from rollout_graph.core.records import Call
from rollout_graph.core.sequences import Sequence
from rollout_graph.core.topology import Topology
from rollout_graph.core.types import AGENT as AGENT
from rollout_graph.core.types import AUXILIARY as AUXILIARY
from rollout_graph.core.types import DISCARDED as DISCARDED
from rollout_graph.core.types import ROLES as ROLES
from rollout_graph.core.types import Role


def assign_roles(calls: list[Call], topology: Topology, sequences: list[Sequence]) -> None:
    """Give each sequence its role: discarded, else agent or auxiliary by tools offered (or trainability without tools)."""
    live = [s for s in sequences if s.leaf not in topology.discarded]
    tools_signal = any(calls[k].has_tools for s in live for k in s.nodes)
    for seq in sequences:
        if seq.leaf in topology.discarded:
            seq.role = DISCARDED
        elif tools_signal:
            seq.role = AGENT if any(calls[k].has_tools for k in seq.nodes) else AUXILIARY
        else:
            # Harnesses that parse tool calls out of text send no manifest: tools say nothing.
            seq.role = AGENT if seq.n_trainable else AUXILIARY


def main_sequence(sequences: list[Sequence]) -> Sequence:
    """The row a reader (and the app) opens first: the agent row with the most trainable tokens."""
    return max(sequences, key=lambda s: (s.role == AGENT, s.n_trainable, s.n_turns))


def node_roles(n_calls: int, topology: Topology, sequences: list[Sequence]) -> list[Role]:
    """A role per call: discarded if it is, else agent if any agent sequence runs through it,
    else auxiliary."""
    roles: list[Role] = [AUXILIARY] * n_calls
    for seq in sequences:
        if seq.role == AGENT:
            for k in seq.nodes:
                roles[k] = AGENT
    for k in topology.discarded:
        roles[k] = DISCARDED
    return roles
