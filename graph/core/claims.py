"""What a rollout document claims (edges, roles, trainable tokens) versus our own analysis."""

from __future__ import annotations

from graph.core.records import WARN, Call, Finding
from graph.core.sequences import Sequence


def claimed_parents(calls: list[Call], fallback: list[int | None]) -> list[int | None]:
    """The document's edges for nodes in its sequences; ``fallback`` for the others."""
    index = {c.node_id: i for i, c in enumerate(calls)}
    parents = list(fallback)
    for i, call in enumerate(calls):
        if call.claims.get("in_sequences"):
            claimed = call.claims.get("parent")
            parents[i] = index.get(claimed) if claimed is not None else None
    return parents


def disagreements(
    calls: list[Call], claimed: list[int | None], ours: list[int | None], sequences: list[Sequence], document: dict
) -> list[Finding]:
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
