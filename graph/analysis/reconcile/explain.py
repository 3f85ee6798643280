"""One sentence per difference between what a framework trains and the exact graph, naming the
break that caused it (docs/reconcile.md, "Differences").

A reconciler records events as it builds (a TRL realign or fork, a NeMo Gym quarantine, a branch
Gym drops, a NeMo-RL splice, a row OpenEnv labels discarded, a call verifiers splits off); each is
worded here, and where a call's near miss names why the harness broke the prefix there (a
re-tokenized replay, a retry, a compaction, ...), its sentence (rollout_graph.analysis.near_miss
``describe``, the one every surface prints) follows. Calls whose sampled tokens the framework
does not train, and that no event covers, get a sentence of their own from their fate.
Entry point: :func:`differences`.
"""

from __future__ import annotations

from typing import Any

from rollout_graph.analysis.near_miss import describe
from rollout_graph.analysis.reconcile.model import DROPPED, PARTLY, QUARANTINED, Reconciled
from rollout_graph.core.records import NearMiss
from rollout_graph.core.rollout import Rollout

NAMES = {"trl": "TRL", "nemo-gym": "NeMo Gym", "verifiers": "verifiers", "openenv": "OpenEnv", "nemo-rl": "NeMo-RL"}


def cause(rollout: Rollout, node: int | None) -> NearMiss | None:
    """The near miss that explains why call ``node`` broke the prefix: its own, else one where it
    is the later call."""
    if node is None:
        return None
    miss = rollout.near_misses.get(node)
    if miss is not None:
        return miss
    return next((m for m in rollout.near_misses.values() if m.later == node), None)


def _because(rollout: Rollout, node: int | None) -> str:
    miss = cause(rollout, node)
    return f" Because {describe(rollout.calls, miss)}." if miss is not None else ""


def _n(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def _sentence(rollout: Rollout, result: Reconciled, kind: str, calls: list[int], tokens: int) -> str:
    name = NAMES.get(result.framework, result.framework)
    ids = [rollout.calls[k].node_id for k in calls]
    params = result.params
    if kind == "realign":
        return (
            f"{name} realigns {ids[1]}'s prompt over {ids[0]}'s reply: {_n(tokens, 'sampled token')} of {ids[0]} "
            f"become context with the prompt's ids (a drift under fork_threshold_tokens "
            f"{params.get('fork_threshold_tokens', 0):,})."
        )
    if kind == "fork":
        return (
            f"{name} starts a new row at {ids[1]}: its prompt drifts {_n(tokens, 'token')} from {ids[0]}'s end "
            f"(fork_threshold_tokens {params.get('fork_threshold_tokens', 0):,}); the earlier row keeps its tokens."
        )
    if kind == "quarantined":
        why = result.fates[calls[0]].reason.removeprefix("quarantined: ")
        return f"{name} quarantines {ids[0]} ({why}): its {_n(tokens, 'sampled token')} and every call below it are left out."
    if kind == "branch":
        span = ids[0] if len(ids) == 1 else f"{ids[0]} … {ids[-1]}"
        return (
            f"{name} drops the chain through {span} ({_n(len(ids), 'call')} outside the main chain, "
            f"{_n(tokens, 'sampled token')}): only one chain is delivered per rollout."
        )
    if kind == "masked":
        reasons = "; ".join(result.notes.get("mask_reasons", [])) or "an incomplete capture"
        return f"{name} masks the whole sample (mask_sample: {reasons}): nothing of this rollout is trained."
    if kind == "discarded":
        kept = rollout.topology.discarded.get(calls[0])
        by = f" ({rollout.calls[kept].node_id} continued)" if kept is not None else ""
        return f"{name} labels {ids[0]}'s row discarded{by}: its {_n(tokens, 'sampled token')} are not trained."
    if kind == "split":
        return (
            f"{name} splits {ids[1]} off {ids[0]}'s branch (a message of the history hashes or tokenizes "
            f"differently): {ids[0]}'s {_n(tokens, 'sampled token')} are context in {ids[1]}'s branch, trained in a "
            "branch of their own."
        )
    if kind == "trains_discarded":
        sibling = rollout.calls[calls[1]].node_id if len(calls) > 1 else "a sibling"
        return (
            f"{name} trains {ids[0]}'s {_n(tokens, 'sampled token')} in a branch of their own, though the harness "
            f"discarded it ({sibling} continued)."
        )
    if kind == "no_logprob":
        return f"{name} trains {ids[0]}'s {_n(tokens, 'sampled token')} with logprob 0.0: the call recorded no logprob per token."
    if kind == "spliced":
        return (
            f"{name} splices {ids[0]}'s prompt at an EOS, keeping the model's own earlier tokens: its "
            f"{_n(tokens, 'sampled token')} are trained after a prompt the model never saw."
        )
    if kind == "error":
        return f"{name}: {result.error}"
    return f"{name}: {kind} at {', '.join(ids)}."


def differences(rollout: Rollout, result: Reconciled) -> list[dict[str, Any]]:
    """Every difference, worded: ``{"kind", "node_ids", "tokens", "sentence"}``, events first, then
    the calls whose sampled tokens are dropped that no event names."""
    out: list[dict[str, Any]] = []
    named: set[int] = set()
    if result.error is not None and not any(kind == "error" for kind, *_ in result.events):
        out.append(
            {"kind": "error", "node_ids": [], "tokens": 0, "sentence": f"{NAMES.get(result.framework)}: {result.error}"}
        )
    for kind, calls, tokens, caused_by in result.events:
        sentence = _sentence(rollout, result, kind, calls, tokens) + _because(rollout, caused_by)
        out.append(
            {
                "kind": kind,
                "node_ids": [rollout.calls[k].node_id for k in calls],
                "tokens": tokens,
                "sentence": sentence,
            }
        )
        if kind in ("realign", "quarantined", "branch", "discarded"):
            named.update(calls if kind != "realign" else calls[:1])
        if kind == "masked":  # the delivered row's calls: the mask says it once
            named.update(k for row in result.rows if row.label == "main" for k in row.extra.get("chain", ()))
    name = NAMES.get(result.framework, result.framework)
    for k, fate in enumerate(result.fates):
        if k in named or fate.status not in (DROPPED, PARTLY, QUARANTINED) or result.error is not None:
            continue
        lost = fate.n_sampled - fate.n_trained
        sentence = f"{name} does not train {_n(lost, 'sampled token')} of {rollout.calls[k].node_id}: {fate.reason or 'in no trained row'}."
        out.append(
            {
                "kind": "dropped",
                "node_ids": [rollout.calls[k].node_id],
                "tokens": lost,
                "sentence": sentence + _because(rollout, k),
            }
        )
    return out
