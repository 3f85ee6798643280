"""What a rollout document claims (edges, roles, trainable tokens) versus our own analysis."""

from __future__ import annotations

from typing import Any

from rollout_graph.core.records import WARN, Call, Finding
from rollout_graph.core.sequences import Sequence


def validated_parents(calls: list[Call], fallback: list[int | None]) -> tuple[list[int | None], list[Finding]]:
    """The document's edges for the turns it places, ``fallback`` for the others, made a forest.

    A document is untrusted: a node named as its own parent, a parent that is no turn of the
    document (dangling), or parents that form a cycle would make every walk up the graph loop.
    Each such claim is dropped (the node falls back to the token-prefix parent, or becomes a root
    when that would close a cycle too) and reported as ``document_invalid_parent`` (docs/semantics.md).
    """
    index = {c.node_id: i for i, c in enumerate(calls)}
    parents = list(fallback)
    findings: list[Finding] = []

    def drop(i: int, why: str) -> None:
        findings.append(Finding(WARN, "document_invalid_parent", why, node_id=calls[i].node_id))
        parents[i] = fallback[i] if fallback[i] != i else None

    for i, call in enumerate(calls):
        # a turn the document's rows hold, or one it places by its own claims (a turn its rows
        # omit: ingest/formats/rollout_document.py)
        if not (call.claims.get("in_sequences") or call.claims.get("placed_by_document")):
            continue
        claimed = call.claims.get("parent")
        if claimed is None:
            parents[i] = None
        elif claimed not in index:
            drop(i, f"the document's parent {str(claimed)[:80]!r} is not a turn of this document; ignored")
        elif index[claimed] == i:
            drop(i, "the document names this node as its own parent; ignored")
        else:
            parents[i] = index[claimed]
    # Cycles: walk up from every node; a node met twice on one walk closes a cycle.
    state = [0] * len(calls)  # 0 unseen, 1 on the current walk, 2 known to reach a root
    for start in range(len(calls)):
        path = []
        node: int | None = start
        while node is not None and state[node] == 0:
            state[node] = 1
            path.append(node)
            node = parents[node]
        if node is not None and state[node] == 1:  # back on this walk: a cycle through `node`
            cut = node
            findings.append(
                Finding(
                    WARN,
                    "document_invalid_parent",
                    f"the document's parents form a cycle through {calls[cut].node_id!r}; this node is made a root",
                    node_id=calls[cut].node_id,
                )
            )
            parents[cut] = None
        for k in path:
            state[k] = 2
    return parents, findings


def disagreements(
    calls: list[Call],
    claimed: list[int | None],
    ours: list[int | None],
    sequences: list[Sequence],
    document: dict[str, Any],
) -> list[Finding]:
    """WARN ``document_disagrees`` wherever the document's edges, roles or trainable counts differ from ours."""
    out = []

    def name(i: int | None) -> str:
        return "none (a root)" if i is None else calls[i].node_id

    for i, call in enumerate(calls):
        if call.claims.get("in_sequences") and claimed[i] != ours[i]:
            out.append(
                Finding(
                    WARN,
                    "document_disagrees",
                    f"the document's parent is {name(claimed[i])}; the token prefix says {name(ours[i])}",
                    node_id=call.node_id,
                )
            )
    stats = document.get("stats")
    if isinstance(stats, dict):  # OpenEnv's counts of its own graph
        for key, value in _counts(calls, claimed).items():
            theirs = stats.get(key)
            if type(theirs) is int and theirs != value:
                out.append(
                    Finding(WARN, "document_disagrees", f"the document counts {key} {theirs}; the graph has {value}")
                )
    by_leaf = {seq["node_ids"][-1]: seq for seq in document.get("sequences", ()) if seq.get("node_ids")}
    for seq in sequences:
        leaf = calls[seq.leaf].node_id
        claim = by_leaf.get(leaf)
        if claim is None:
            continue
        if "role" in claim and claim["role"] != seq.role:
            out.append(
                Finding(
                    WARN,
                    "document_disagrees",
                    f"the document's role is {claim['role']!r}; ours is {seq.role!r}",
                    node_id=leaf,
                    leaf_id=leaf,
                )
            )
        if claim.get("n_trainable") is not None and claim["n_trainable"] != seq.n_trainable:
            out.append(
                Finding(
                    WARN,
                    "document_disagrees",
                    f"the document trains {claim['n_trainable']} tokens; ours trains {seq.n_trainable}",
                    node_id=leaf,
                    leaf_id=leaf,
                )
            )
    return out


def _counts(calls: list[Call], parents: list[int | None]) -> dict[str, int]:
    """Roots, leaves and forks of a parent list, as a document's ``stats`` names them."""
    children = [0] * len(calls)
    for p in parents:
        if p is not None:
            children[p] += 1
    return {
        "n_turns": len(calls),
        "n_roots": sum(p is None for p in parents),
        "n_leaves": sum(c == 0 for c in children),
        "n_forks": sum(c > 1 for c in children),
    }
