"""NeMo Gym's trajectory builder: ``prefix_merging`` or ``per_request`` over the captured
``TokenEntry`` records, the ambiguity quarantine, retry resolution, one delivered chain and its
``BuildNotes`` (docs/reconcile.md, "NeMo Gym").

Follows ``nemo_gym/token_id_capture/`` of NVIDIA-NeMo/Gym at commit
07d6b0d07b22fcf530b4c211dae2ee23100428e4: ``builder.py`` (``prefix_merging``: entries without
generated tokens set aside; the rest in order of (prompt length, model_call_id); each takes as
parent the entry whose prompt + generation is the longest prefix of its prompt, ambiguous, and
quarantined, when several identical ones qualify; retry siblings (the same parent and the same
prompt) keep the one a later call extended, or the smallest id with the retry marked unresolved;
every root-to-leaf chain without a quarantined call; the chain whose root was created first is
``main``; ``delivered_fraction`` = its generated tokens over all captured ones), ``consumer.py``
(``_assemble``: only ``main`` is delivered, and the sample is masked when a retry is unresolved,
when there is not exactly one root or one chain, or when ``per_request`` is asked of single-response
delivery) and ``sink.py`` (a call whose response lacks token ids or logprobs is not recorded and
marks the capture incomplete: masked too).

How a captured call becomes a ``TokenEntry`` (:func:`token_entries`): ``model_call_id`` its node
id, ``created_at`` its recorded end time (every call's arrival index when some call has none).
The longest-prefix search hashes prefixes instead of walking a trie (the same answer; the oracle
tests compare the builder's own). Entry point: :func:`reconcile_nemo_gym`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rollout_graph.analysis.reconcile.model import (
    EMPTY,
    QUARANTINED,
    TRAINED,
    Reconciled,
    Segment,
    TrainerRow,
    call_fates,
    output_segment,
    prompt_segment,
)
from rollout_graph.core.records import Call
from rollout_graph.core.rollout import Rollout

BUILDERS = ("prefix_merging", "per_request")


def capturable(call: Call) -> bool:
    """Whether NeMo Gym's sink records the call: prompt ids, sampled ids and one logprob per sampled id."""
    if call.prompt_ids is None:
        return False
    if call.n_sampled == 0:
        return True
    return call.logprobs_aligned


def created_at(calls: list[Call]) -> list[float]:
    """Each call's ``created_at``: its recorded end time, or its arrival index when some call has none."""
    times = []
    for call in calls:
        t = call.timing.get("ended_at")
        if isinstance(t, bool) or not isinstance(t, (int, float)):
            return [float(i) for i in range(len(calls))]
        times.append(float(t))
    return times


def token_entries(session_id: str, calls: list[Call]) -> list[dict[str, Any]]:
    """The ``TokenEntry`` records NeMo Gym's sink writes for the capturable calls (fields as in
    ``records.py``; the oracle feeds these to the builder itself)."""
    times = created_at(calls)
    out = []
    for k, call in enumerate(calls):
        if not capturable(call):
            continue
        assert call.prompt_ids is not None
        lps = call.sampled_logprobs
        out.append(
            {
                "rollout_id": session_id,
                "model_call_id": call.node_id,
                "model": call.model or "",
                "prompt_token_ids": [int(t) for t in call.prompt_ids.tolist()],
                "generation_token_ids": [int(t) for t in call.sampled_ids.tolist()],
                "generation_log_probs": [] if lps is None or not call.n_sampled else [float(x) for x in lps.tolist()],
                "created_at": times[k],
            }
        )
    return out


@dataclass(eq=False, slots=True)
class _Node:
    k: int
    parent: _Node | None = None
    children: list[_Node] = field(default_factory=list)
    quarantined: bool = False


@dataclass(slots=True)
class Build:
    """``BuildOutput``: chains (call indices, root first), quarantined calls and the notes."""

    chains: list[list[int]]
    chain_ids: list[str]
    quarantined: list[int]
    notes: dict[str, Any]
    why: dict[int, str]  # why each quarantined call is


def _key(calls: list[Call], k: int) -> tuple[int, str]:
    return (calls[k].n_prompt, calls[k].node_id)


class _PrefixIndex:
    """``_PrefixIndex``: the entries' cumulative sequences (prompt + generation), found again as
    the longest one that prefixes a prompt. Polynomial hashes (64-bit, wrapping) of every prefix
    length an entry has select the candidates; an exact comparison decides."""

    BASE = np.uint64(1_000_003)

    def __init__(self, calls: list[Call], entries: list[int]) -> None:
        self.calls = calls
        self.ends = {k: self._end(k) for k in entries}
        longest = max((e.shape[0] for e in self.ends.values()), default=0)
        longest = max(longest, max((c.n_prompt for c in calls), default=0))
        with np.errstate(over="ignore"):
            self.powers = (
                np.cumprod(np.full(longest + 1, self.BASE, dtype=np.uint64)) if longest else np.ones(1, np.uint64)
            )
        self.groups: dict[tuple[int, int], list[int]] = {}
        for k in entries:  # in the builder's order: a group lists identical sequences as its trie node does
            end = self.ends[k]
            self.groups.setdefault((end.shape[0], self._hash(end)), []).append(k)
        self.lengths = np.array(sorted({length for length, _ in self.groups}), dtype=np.int64)

    def _end(self, k: int) -> np.ndarray:
        call = self.calls[k]
        assert call.prompt_ids is not None
        return np.concatenate(
            [np.asarray(call.prompt_ids, dtype=np.int64), np.asarray(call.sampled_ids, dtype=np.int64)]
        )

    def _prefix_hashes(self, ids: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            return np.cumsum(ids.astype(np.uint64) * self.powers[: ids.shape[0]], dtype=np.uint64)

    def _hash(self, ids: np.ndarray) -> int:
        return int(self._prefix_hashes(ids)[-1]) if ids.shape[0] else 0

    def parent(self, prompt: np.ndarray, inserted: set[int]) -> tuple[int | None, bool]:
        """The longest inserted cumulative sequence that prefixes ``prompt`` (the first of its
        identical copies) and whether it is ambiguous (several identical ones)."""
        n = prompt.shape[0]
        if not n:
            return None, False
        lengths = self.lengths[self.lengths <= n]
        if not lengths.shape[0]:
            return None, False
        hashes = self._prefix_hashes(prompt)[lengths - 1]
        for length, h in zip(lengths[::-1].tolist(), hashes[::-1].tolist(), strict=True):
            group = [j for j in self.groups.get((length, h), ()) if j in inserted]
            same = [j for j in group if np.array_equal(self.ends[j], prompt[:length])]
            if same:
                return same[0], len(same) > 1
        return None, False


def prefix_merging(calls: list[Call], entries: list[int]) -> Build:
    """``builder.prefix_merging`` over the calls ``entries`` (arrival indices)."""
    empty = [k for k in entries if calls[k].n_sampled == 0]
    entries = [k for k in entries if calls[k].n_sampled]
    if not entries:
        notes = _notes("prefix_merging", 0, 0, 0, 0, [], [calls[k].node_id for k in empty])
        return Build([], [], [], notes, {})
    ordered = sorted(entries, key=lambda k: _key(calls, k))
    index = _PrefixIndex(calls, ordered)
    inserted: set[int] = set()
    nodes: dict[int, _Node] = {}
    order: list[_Node] = []
    roots: list[_Node] = []
    quarantined: list[int] = []
    why: dict[int, str] = {}
    for k in ordered:
        node = _Node(k)
        prompt = calls[k].prompt_ids
        assert prompt is not None
        parent, ambiguous = index.parent(np.asarray(prompt, dtype=np.int64), inserted)
        if parent is not None:
            node.parent = nodes[parent]
            if ambiguous:
                node.quarantined = True
                quarantined.append(k)
                why[k] = f"ambiguous parent: several captured calls end with {calls[parent].node_id}'s ids"
            nodes[parent].children.append(node)
        else:
            roots.append(node)
        nodes[k] = node
        order.append(node)
        inserted.add(k)
    unresolved: list[int] = []
    groups: dict[object, list[_Node]] = {}
    for node in order:
        groups.setdefault("roots" if node.parent is None else id(node.parent), []).append(node)
    for group in groups.values():
        by_prompt: dict[bytes, list[_Node]] = {}
        for node in group:
            prompt = calls[node.k].prompt_ids
            assert prompt is not None
            by_prompt.setdefault(np.asarray(prompt, dtype=np.int64).tobytes(), []).append(node)
        for retry in by_prompt.values():
            if len(retry) < 2:
                continue
            extended = [n for n in retry if any(not c.quarantined for c in n.children)]
            if extended:
                keep = set(extended)
                kept = "a later call extended " + ", ".join(calls[n.k].node_id for n in extended)
            else:
                keep = {min(retry, key=lambda n: calls[n.k].node_id)}
                unresolved.extend(n.k for n in retry)
                kept = f"none was extended: {calls[next(iter(keep)).k].node_id} kept, the retry unresolved"
            for n in retry:
                if n not in keep and not n.quarantined:
                    n.quarantined = True
                    quarantined.append(n.k)
                    why[n.k] = f"a retry sibling with the same prompt ({kept})"
    chains: list[list[int]] = []
    for leaf in (n for n in order if not n.children):
        path: list[_Node] = []
        current: _Node | None = leaf
        while current is not None:
            path.append(current)
            current = current.parent
        path.reverse()
        if any(n.quarantined for n in path):
            continue
        chains.append([n.k for n in path])
    times = created_at(calls)
    chain_ids = [""] * len(chains)
    delivered = 0
    if chains:
        main = min(range(len(chains)), key=lambda i: (times[chains[i][0]], calls[chains[i][0]].node_id))
        chain_ids[main] = "main"
        branch = 0
        for i in range(len(chains)):
            if i != main:
                chain_ids[i] = f"branch-{branch}"
                branch += 1
        delivered = sum(calls[k].n_sampled for k in chains[main])
    captured = sum(calls[k].n_sampled for k in entries)
    notes = _notes(
        "prefix_merging",
        len(roots),
        len(chains),
        captured,
        delivered,
        [calls[k].node_id for k in unresolved],
        [calls[k].node_id for k in empty],
    )
    return Build(chains, chain_ids, quarantined, notes, why)


def _notes(
    builder: str, roots: int, chains: int, captured: int, delivered: int, unresolved: list[str], empty: list[str]
) -> dict[str, Any]:
    """``BuildNotes`` as NeMo Gym fills it."""
    return {
        "builder": builder,
        "roots": roots,
        "chains": chains,
        "generated_tokens_captured": captured,
        "generated_tokens_delivered": delivered,
        "delivered_fraction": round(delivered / captured, 4) if captured else 0.0,
        "unresolved_retries": unresolved,
        "empty_generation_calls": empty,
    }


def per_request(calls: list[Call], entries: list[int]) -> Build:
    """``builder.per_request``: one chain per entry, in order of (prompt length, model_call_id)."""
    ordered = sorted(entries, key=lambda k: _key(calls, k))
    chains = [[k] for k in ordered]
    notes = {"builder": "per_request", "roots": 0, "chains": len(chains), "generated_tokens_captured": 0,
             "generated_tokens_delivered": 0, "delivered_fraction": 0.0, "unresolved_retries": [],
             "empty_generation_calls": []}  # fmt: skip
    return Build(chains, [f"req-{i}" for i in range(len(chains))], [], notes, {})


def chain_segments(calls: list[Call], chain: list[int]) -> list[Segment]:
    """A chain as one row: the root's prompt, then each link's interstitial (context) and generation (trained)."""
    segments: list[Segment] = []
    prev_end = 0
    for step, k in enumerate(chain):
        call = calls[k]
        start = 0 if step == 0 else prev_end
        if call.n_prompt > start:
            segments.append(prompt_segment(k, start, call.n_prompt))
        if call.n_sampled:
            segments.append(output_segment(k, 0, call.n_sampled, True))
        prev_end = call.n_prompt + call.n_sampled
    return segments


def reconcile_nemo_gym(rollout: Rollout, builder: str = "prefix_merging") -> Reconciled:
    """NeMo Gym's rows for one rollout (docs/reconcile.md, "NeMo Gym").

    Args:
        builder: ``prefix_merging`` (Gym's default: one delivered chain, the sample masked unless
            the capture is one clean chain) or ``per_request`` (one row per call, every row trained:
            a framework reading the records through its own ``TokenSource``; Gym's own
            single-response delivery refuses it).
    """
    return deliver(rollout, rollout.calls, builder, "nemo-gym", lambda chain: chain_segments(rollout.calls, chain))


def deliver(
    rollout: Rollout,
    calls: list[Call],
    builder: str,
    framework: str,
    segments_of: Callable[[list[int]], list[Segment]],
    params: dict[str, Any] | None = None,
    missing_reasons: dict[int, str] | None = None,
) -> Reconciled:
    """Build ``calls`` (the rollout's, or NeMo-RL's spliced copies) with ``builder`` and deliver as
    Gym's consumer does; ``segments_of`` turns a chain into the row's segments over the rollout's calls."""
    if builder not in BUILDERS:
        raise ValueError(f"unknown NeMo Gym builder {builder!r} (known: {', '.join(BUILDERS)})")
    missing_reasons = missing_reasons or {}
    entries = [k for k, c in enumerate(calls) if capturable(c) and k not in missing_reasons]
    chosen = set(entries)
    missing = [k for k in range(len(calls)) if k not in chosen]
    build = prefix_merging(calls, entries) if builder == "prefix_merging" else per_request(calls, entries)
    reasons: dict[int, str] = {}
    for k in missing:
        reasons[k] = missing_reasons.get(
            k, "not recorded: the response lacks prompt ids or a logprob per token (capture incomplete)"
        )
    for k in build.quarantined:
        reasons[k] = "quarantined: " + build.why[k]
    why: list[str] = []
    if builder == "prefix_merging":
        unresolved = build.notes["unresolved_retries"]
        if unresolved:
            why.append(f"an unresolved retry ({', '.join(unresolved[:3])})")
        if build.notes["roots"] != 1:
            why.append(f"{build.notes['roots']} roots")
        if build.notes["chains"] != 1:
            why.append(f"{build.notes['chains']} chains")
    if missing:
        why.append(f"capture incomplete ({len(missing)} call(s) not recorded)")
    mask_sample = bool(why)
    error = "capture produced no safe trainable chain" if not build.chains else None
    rows: list[TrainerRow] = []
    for chain, chain_id in zip(build.chains, build.chain_ids, strict=True):
        row = TrainerRow(chain_id, segments_of(chain), True, chain_id.split("-")[0], None, {"chain": chain})
        if builder == "prefix_merging" and chain_id != "main":
            row.trained = False
            row.why_not = "only the main chain is delivered per rollout"
        elif builder == "prefix_merging" and mask_sample:
            row.trained = False
            row.why_not = "mask_sample: " + "; ".join(why)
        elif builder == "per_request" and missing:
            row.trained = False
            row.why_not = f"capture incomplete ({len(missing)} call(s) not recorded)"
        rows.append(row)
    for row in rows:
        if not row.trained:
            for k in row.extra["chain"]:
                reasons.setdefault(k, f"only in {row.row_id} ({row.why_not})")
    fates = call_fates(rollout, rows, reasons)
    for k in build.quarantined:
        if fates[k].n_trained == 0 and fates[k].n_sampled:
            fates[k].status = QUARANTINED
    placed = {k for chain in build.chains for k in chain}
    for k, fate in enumerate(fates):
        if fate.status not in (TRAINED, EMPTY) and not fate.reason:
            fate.reason = "in no trained row" if k in placed else "in no chain: a call below it is quarantined"
    notes = dict(build.notes)
    notes["mask_sample"] = mask_sample if builder == "prefix_merging" else bool(missing)
    notes["mask_reasons"] = why
    if builder == "per_request":
        notes["delivery"] = (
            "every row: per_request returns one trajectory per call (Gym's single-response delivery refuses it)"
        )
    notes["quarantined"] = [calls[k].node_id for k in build.quarantined]
    if missing:
        notes["capture_incomplete"] = True
    events: list[tuple[str, list[int], int, int | None]] = [
        ("quarantined", [k], calls[k].n_sampled, k) for k in build.quarantined
    ]
    main = next((set(r.extra["chain"]) for r in rows if r.row_id == "main"), set())
    for row in rows:
        if row.row_id.startswith("branch"):
            own = [k for k in row.extra["chain"] if k not in main]
            if own:  # the calls of the branch no delivered chain has, from where it leaves the main one
                events.append(("branch", own, sum(calls[k].n_sampled for k in own), own[0]))
    if builder == "prefix_merging" and mask_sample and rows:
        events.append(("masked", [], 0, None))
    return Reconciled(
        framework, params or {"builder": builder}, rows, fates, notes, list(build.quarantined), error, events
    )
