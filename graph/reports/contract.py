"""The ``inspect --json`` contract (docs/cli.md, "The JSON contract"). Keys may be added here, never renamed."""

from __future__ import annotations

from typing import Any

from rollout_graph.analysis.near_miss import near_miss_json, replaced_json
from rollout_graph.core.engine import engines
from rollout_graph.core.records import LoadResult
from rollout_graph.core.rollout import Rollout
from rollout_graph.ingest.formats.fidelity import fidelity_json


def node_json(rollout: Rollout, i: int) -> dict[str, Any]:
    """The JSON of one call in ``inspect --json``: parent, kind, role, tokens and findings.

    One call on its own; a session's calls are built by :class:`_Nodes`, which gives the same
    objects (tests/reports/test_contract_fast.py compares the two)."""
    call = rollout.calls[i]
    topo = rollout.topology
    parent = topo.parents[i]
    kept = topo.discarded.get(i)
    out = {
        "node_id": call.node_id,
        "index": i,
        "parent_id": None if parent is None else rollout.calls[parent].node_id,
        "root_id": rollout.calls[topo.root_of[i]].node_id,
        "n_prompt": call.n_prompt,
        "n_sampled": call.n_sampled,
        "discarded": kept is not None,
        "continued_by": None if kept is None else rollout.calls[kept].node_id,
        "n_children": len(topo.children[i]),
        "linked_by": rollout.linked_by[i],
        "n_context": call.n_prompt - rollout.context_start(i),
        "trainable": bool(rollout.trainable[i]),
        "finish_reason": call.finish_reason,
        "model": call.model,
        "shape": call.shape,
        "source": {"file": call.source, "line": call.line},
    }
    out["unfinished"] = any(i in group for group in topo.unfinished)
    out.update(break_keys(rollout, i))
    if rollout.signals is not None and i in rollout.signals.calls:
        out["signals"] = rollout.signals.calls[i].as_dict()
    return out


def break_keys(rollout: Rollout, i: int) -> dict[str, Any]:
    """A call's near-miss keys (docs/cli.md): ``near_miss`` (the EARLIER call it nearly continued),
    ``replaced_by`` (the LATER call that replaced it, and why it looks dropped), and the deprecated
    alias ``near_miss_legacy`` (what ``near_miss`` said before 0.3: on a discarded call its
    ``replaced_by``, elsewhere its ``near_miss``)."""
    calls, discarded = rollout.calls, rollout.topology.discarded
    out: dict[str, Any] = {}
    miss, replaced = rollout.near_misses.get(i), rollout.replaced_by.get(i)
    if miss is not None:
        out["near_miss"] = near_miss_json(calls, miss)
    if replaced is not None:
        out["replaced_by"] = replaced_json(calls, replaced, discarded)
    legacy = replaced if replaced is not None and i in discarded else miss
    if legacy is not None:
        out["near_miss_legacy"] = (
            out["near_miss"] if legacy is miss else {k: v for k, v in out["replaced_by"].items() if k != "dropped"}
        )
    return out


class _Nodes:
    """Every call's JSON in a session, with what they all read worked out once: the node ids,
    the calls' lengths, the trainable flags as Python bools and the calls of the unfinished groups
    (one set, where :func:`node_json` scans every group for each call: 0.05 s on 5,000 calls). The
    objects are :func:`node_json`'s, key for key, in the same order (tests/reports/test_contract_fast.py)."""

    __slots__ = ("rollout", "ids", "trainable", "unfinished", "has_signals")

    def __init__(self, rollout: Rollout) -> None:
        self.rollout = rollout
        self.ids = [c.node_id for c in rollout.calls]
        self.trainable = [bool(t) for t in rollout.trainable]
        self.unfinished = {k for group in rollout.topology.unfinished for k in group}
        self.has_signals = rollout.signals is not None

    def all(self) -> list[dict[str, Any]]:
        rollout, ids, trainable, unfinished = self.rollout, self.ids, self.trainable, self.unfinished
        calls = rollout.calls
        topo = rollout.topology
        discarded, misses, replaced = topo.discarded, rollout.near_misses, rollout.replaced_by
        signals = rollout.signals.calls if self.has_signals else None
        out: list[dict[str, Any]] = []
        append = out.append
        # the columns read in step (one tuple per call): no list indexing per key
        columns = (ids, topo.parents, topo.root_of, topo.children, rollout.linked_by, trainable, rollout.context_starts)
        for i, call, node_id, parent, root, kids, via, train, start in zip(
            range(len(calls)), calls, *columns, strict=True
        ):
            kept = discarded.get(i) if discarded else None
            prompt = call.prompt_ids
            size = 0 if prompt is None else prompt.shape[0]
            node = {
                "node_id": node_id,
                "index": i,
                "parent_id": None if parent is None else ids[parent],
                "root_id": ids[root],
                "n_prompt": size,
                "n_sampled": call.sampled_ids.shape[0],
                "discarded": kept is not None,
                "continued_by": None if kept is None else ids[kept],
                "n_children": len(kids),
                "linked_by": via,
                # the prompt after the parent's end ids (rollout_graph.core.sequences.context_start)
                "n_context": size - start,
                "trainable": train,
                "finish_reason": call.finish_reason,
                "model": call.model,
                "shape": call.shape,
                "source": {"file": call.source, "line": call.line},
                "unfinished": i in unfinished,
            }
            if (misses or replaced) and (i in misses or i in replaced):
                node.update(break_keys(rollout, i))
            if signals is not None and i in signals:
                node["signals"] = signals[i].as_dict()
            append(node)
        return out


def session_json(rollout: Rollout, with_tokens: bool) -> dict[str, Any]:
    """The JSON of one session in ``inspect --json``; ``with_tokens`` adds each sequence's token arrays."""
    nodes = _Nodes(rollout)
    ids = nodes.ids
    sequences = []
    for seq in rollout.sequences:
        row: dict[str, Any] = {
            "leaf_id": ids[seq.leaf],
            "node_ids": [ids[k] for k in seq.nodes],
            "role": seq.role,
            "prompt_len": seq.prompt_len,
            "n_trainable": seq.n_trainable,
            "n_calls": seq.n_calls,
            "n_turns": seq.n_calls,  # deprecated alias of n_calls
            "n_context": seq.n_context,
            "input_ids": [],
            "loss_mask": [],
            "logprobs": [],
        }
        if with_tokens:
            tokens = rollout.tokens(seq)
            row.update(input_ids=tokens.input_ids, loss_mask=tokens.loss_mask, logprobs=tokens.logprobs)
        sequences.append(row)
    out: dict[str, Any] = {
        "session_id": rollout.session_id,
        "stats": dict(rollout.stats),
        "finding_counts": rollout.finding_counts,
        "nodes": nodes.all(),
        "sequences": sequences,
        "findings": [f.as_dict() for f in rollout.findings],
    }
    # What the source can support, the framework it came from and its training step (docs/formats.md).
    detail = fidelity_json(rollout.calls)
    out["fidelity"] = detail["grade"]
    out["fidelity_detail"] = detail
    out["step"] = detail["step"]
    out["engine"] = engines(rollout.calls)  # what the capture probes found of the engine (docs/live.md)
    if rollout.signals is not None:
        out["signals"] = rollout.signals.as_dict(rollout)
    if rollout.document is not None:
        out["document"] = {k: v for k, v in rollout.document.items() if k not in ("findings",)}
    return out


def inspect_json(
    loaded: LoadResult, rollouts: list[Rollout], with_tokens: bool, signals_load: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The whole ``inspect --json`` object; ``signals_load`` is the signals file's join report."""
    out: dict[str, Any] = {"load": loaded.report()}
    if signals_load is not None:
        out["signals_load"] = signals_load
    out["sessions"] = [session_json(r, with_tokens) for r in rollouts]
    return out
