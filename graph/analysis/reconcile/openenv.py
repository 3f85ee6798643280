"""OpenEnv's reconciler: the exact-prefix rollout graph, every path a row, roles as labels
(docs/reconcile.md, "OpenEnv").

Follows openenv 0.10.0 (PyPI): ``openenv/core/harness/capture/graph.py`` (``RolloutGraph``: a call's
parent is the earlier call whose prompt + completion is the longest exact prefix of its prompt,
late ancestors adopt, the message fallback for a call without prompt ids; ``sequence_for``: context
then sampled ids per node, mask 1 only where logprobs align), ``capture/server.py`` (a call whose
``check_turn`` has a FATAL finding keeps its ids but loses its logprobs), ``capture/export.py``
(``_assign_roles``: discarded, agent, auxiliary; a row is ``trainable`` when its role is agent and
``check_sequence`` finds nothing FATAL) and ``capture/contract.py`` (``to_training_trace``: the
agent turns a trainer gets, each once, in arrival order; TRL's OpenEnv harness reads them).

The graph is this project's own exact-prefix graph (docs/semantics.md follows the same rules; the
oracle tests compare every row): the topology is reused when every call has prompt ids, and
OpenEnv's ``add_turn`` is walked literally otherwise (its message fallback and an empty prompt differ
from the project's at the edges). Entry points: :func:`reconcile_openenv`, :func:`training_turns`.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from rollout_graph.analysis.reconcile.model import (
    Reconciled,
    Segment,
    TrainerRow,
    call_fates,
    output_segment,
    prompt_segment,
)
from rollout_graph.core.records import Call
from rollout_graph.core.rollout import Rollout

AGENT, AUXILIARY, DISCARDED = "agent", "auxiliary", "discarded"


def turn_ok(call: Call) -> bool:
    """``check_turn`` has no FATAL finding: valid ids, finite non-positive logprobs, prompt ids
    present, logprobs present (when anything was sampled) and aligned."""
    prompt = call.prompt_ids
    if prompt is None or prompt.shape[0] == 0:
        return False
    if (np.asarray(prompt) < 0).any() or (np.asarray(call.sampled_ids) < 0).any():
        return False
    lps = call.sampled_logprobs
    if lps is None:
        return call.n_sampled == 0
    values = np.asarray(lps, dtype=np.float64)
    if not np.isfinite(values).all() or (values > 0).any():
        return False
    return values.shape[0] == call.n_sampled


def usable_logprobs(call: Call) -> bool:
    """The node keeps logprobs (the server dropped them on a FATAL turn; ``[]`` is None) and
    ``sequence_for`` finds them aligned: its sampled span is masked 1."""
    return turn_ok(call) and call.n_sampled > 0


def _prompt(call: Call) -> np.ndarray:
    p = call.prompt_ids
    return np.empty(0, dtype=np.int64) if p is None else np.asarray(p, dtype=np.int64)


def _identity(message: Any) -> tuple:
    """``_message_identity``: role, stripped text (text parts joined), tool calls as (name, canonical arguments)."""
    if not isinstance(message, dict):
        return ("", str(message), ())
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") in {"text", "input_text"}
        )
    calls = tuple(
        (
            str((c.get("function") or {}).get("name", "")),
            _canonical_arguments((c.get("function") or {}).get("arguments")),
        )
        for c in (message.get("tool_calls") or [])
        if isinstance(c, dict)
    )
    return (str(message.get("role") or ""), (str(content) if content is not None else "").strip(), calls)


def _canonical_arguments(arguments: Any) -> str:
    if arguments is None:
        return ""
    if not isinstance(arguments, str):
        try:
            return json.dumps(arguments, sort_keys=True)
        except (TypeError, ValueError):
            return str(arguments)
    try:
        return json.dumps(json.loads(arguments), sort_keys=True)
    except (json.JSONDecodeError, TypeError, ValueError):
        return arguments.strip()


def _without_leading_system(messages: Any) -> list:
    if not isinstance(messages, list):
        return []
    i = 0
    while i < len(messages) and isinstance(messages[i], dict) and (messages[i].get("role") or "") == "system":
        i += 1
    return list(messages[i:])


def literal_parents(calls: list[Call]) -> list[int | None]:
    """``RolloutGraph.add_turn`` over the calls in arrival order: the parents it ends with."""
    parents: list[int | None] = []
    prompts = [_prompt(c) for c in calls]
    ends = [np.concatenate([p, np.asarray(c.sampled_ids, dtype=np.int64)]) for p, c in zip(prompts, calls, strict=True)]
    for k, call in enumerate(calls):
        prompt = prompts[k]
        parent: int | None = None
        if prompt.shape[0] == 0:  # _find_parent_by_messages
            best_len = 0
            mine = call.request_messages or []
            for j in range(k):
                other = calls[j]
                reply = other.response_message
                end = [*(other.request_messages or []), *([{"role": "assistant", **reply}] if reply else [])]
                if not end or len(end) > len(mine) or len(end) <= best_len:
                    continue
                a, b = _without_leading_system(end), _without_leading_system(mine)
                if not a or len(a) > len(b):
                    continue
                if all(_identity(x) == _identity(y) for x, y in zip(a, b, strict=False)):
                    parent, best_len = j, len(end)
        else:
            candidates = sorted(
                (
                    j
                    for j in range(k)
                    if 0 < ends[j].shape[0] <= prompt.shape[0] and prompts[j].shape[0] < prompt.shape[0]
                ),
                key=lambda j: (-ends[j].shape[0], j),
            )
            for j in candidates:
                if np.array_equal(prompt[: ends[j].shape[0]], ends[j]):
                    parent = j
                    break
        parents.append(parent)
        # _adopt_orphaned_roots
        mine_end = ends[k]
        if mine_end.shape[0] == 0:
            continue
        for j in range(k):
            cand = prompts[j]
            if prompt.shape[0] >= cand.shape[0]:
                continue
            current = parents[j]
            if current is not None and ends[current].shape[0] >= mine_end.shape[0]:
                continue
            if mine_end.shape[0] > cand.shape[0]:
                continue
            if np.array_equal(cand[: mine_end.shape[0]], mine_end):
                parents[j] = k
    return parents


def _graph(rollout: Rollout) -> list[int | None]:
    calls = rollout.calls
    if all(c.prompt_ids is not None and c.prompt_ids.shape[0] > 0 for c in calls):
        return list(rollout.topology.parents)
    return literal_parents(calls)


def _structure(parents: list[int | None]) -> tuple[list[list[int]], list[int]]:
    """Children and leaves, in arrival order."""
    n = len(parents)
    children: list[list[int]] = [[] for _ in range(n)]
    for k, p in enumerate(parents):
        if p is not None:
            children[p].append(k)
    return children, [k for k in range(n) if not children[k]]


def discarded_nodes(calls: list[Call], parents: list[int | None], children: list[list[int]]) -> set[int]:
    """Childless members of a sibling group (a fork's children; roots with one identical,
    non-empty prompt) when another member continued."""
    groups = [kids for kids in children if len(kids) > 1]
    by_prompt: dict[bytes, list[int]] = {}
    for k, p in enumerate(parents):
        prompt = calls[k].prompt_ids
        if p is None and prompt is not None and prompt.shape[0]:
            by_prompt.setdefault(np.asarray(prompt, dtype=np.int64).tobytes(), []).append(k)
    groups.extend(g for g in by_prompt.values() if len(g) > 1)
    out: set[int] = set()
    for kids in groups:
        if any(children[k] for k in kids):
            out.update(k for k in kids if not children[k])
    return out


def _path(parents: list[int | None], leaf: int) -> list[int]:
    path = [leaf]
    while (p := parents[path[-1]]) is not None:
        path.append(p)
    return path[::-1]


def capture_level(rollout: Rollout) -> str:
    """What the upstream returned: ``tokens`` when calls carry prompt and sampled ids."""
    return "tokens" if any(c.prompt_ids is not None and c.n_sampled for c in rollout.calls) else "messages"


def reconcile_openenv(rollout: Rollout) -> Reconciled:
    """OpenEnv's rows for one rollout: every root-to-leaf path, labelled; agent rows that pass
    ``check_sequence`` are trained (docs/reconcile.md, "OpenEnv")."""
    calls = rollout.calls
    parents = _graph(rollout)
    children, leaves = _structure(parents)
    discarded = discarded_nodes(calls, parents, children)
    usable = [usable_logprobs(c) for c in calls]
    level = capture_level(rollout)
    trainable_capture = level == "tokens"
    paths = [_path(parents, leaf) for leaf in leaves]
    rows: list[TrainerRow] = []
    masks_per_path = []
    for path in paths:
        segments: list[Segment] = []
        prev: int | None = None
        for k in path:
            call = calls[k]
            n_prompt = call.n_prompt
            start = 0 if prev is None else calls[prev].n_prompt + calls[prev].n_sampled  # len(parent.end_ids)
            if n_prompt > start:
                segments.append(prompt_segment(k, start, n_prompt))
            if call.n_sampled:
                segments.append(output_segment(k, 0, call.n_sampled, usable[k] and trainable_capture))
            prev = k
        masks_per_path.append(sum(s.stop - s.start for s in segments if s.mask))
        rows.append(TrainerRow(calls[path[-1]].node_id, segments, False, "", None, {"path": path}))
    # _assign_roles
    live = [i for i, path in enumerate(paths) if path[-1] not in discarded]
    any_tools = any(calls[k].has_tools for i in live for k in paths[i])
    for i, (row, path) in enumerate(zip(rows, paths, strict=True)):
        if path[-1] in discarded:
            role = DISCARDED
        elif not any_tools:
            usable_row = masks_per_path[i] if trainable_capture else bool(path)
            role = AGENT if usable_row else AUXILIARY
        else:
            role = AGENT if any(calls[k].has_tools for k in path) else AUXILIARY
        row.label = role
        problem = _sequence_problem(rollout, row, path) if trainable_capture else "an eval capture (no token ids)"
        row.trained = role == AGENT and problem is None
        if not row.trained:
            row.why_not = f"labelled {role}" if role != AGENT else f"check_sequence: {problem}"
    reasons = _reasons(rollout, rows, discarded, usable)
    fates = call_fates(rollout, rows, reasons)
    events: list[tuple[str, list[int], int, int | None]] = [
        ("discarded", [k], calls[k].n_sampled, k) for k in sorted(discarded) if calls[k].n_sampled
    ]
    notes = {
        "capture_level": level,
        "n_turns": len(calls),
        "n_roots": sum(1 for p in parents if p is None),
        "n_leaves": len(leaves),
        "n_discarded": len(discarded),
        "roles": {r.row_id: r.label for r in rows},
        "n_trainable_sequences": sum(1 for r in rows if r.trained),
    }
    return Reconciled("openenv", {"include_discarded": True}, rows, fates, notes, events=events)


def _sequence_problem(rollout: Rollout, row: TrainerRow, path: list[int]) -> str | None:
    """``check_sequence``'s first FATAL finding for a row, or None."""
    n = row.length
    mask = row.n_mask
    first = row.segments[0] if row.segments else None
    prompt_len = len(first) if first is not None and first.part == 0 else 0
    for s in row.segments:
        call = rollout.calls[s.call]
        ids = call.sampled_ids if s.part else call.prompt_ids
        if ids is not None and s.stop > s.start and (np.asarray(ids[s.start : s.stop]) < 0).any():
            return "invalid_training_sequence (an invalid token id)"
    if mask < 1:
        return f"nothing_trainable ({mask} trainable tokens in a {n}-token sequence)"
    if prompt_len >= n:
        return "empty_response"
    return None


def _reasons(rollout: Rollout, rows: list[TrainerRow], discarded: set[int], usable: list[bool]) -> dict[int, str]:
    calls = rollout.calls
    out: dict[int, str] = {}
    for k in discarded:
        out[k] = "discarded: a sibling continued (OpenEnv labels the row, a trainer skips it)"
    for k, ok in enumerate(usable):
        if not ok and calls[k].n_sampled:
            out.setdefault(k, "its logprobs fail check_turn (missing, misaligned or invalid): kept as context")
    for row in rows:
        if not row.trained:
            for s in row.segments:
                out.setdefault(s.call, f"only in rows not trained ({row.why_not})")
    return out


def training_turns(rollout: Rollout) -> tuple[list[int], str | None]:
    """``to_training_trace``: the agent turns, each once, in arrival order, or why it raises."""
    result = reconcile_openenv(rollout)
    if result.notes["capture_level"] != "tokens":
        return [], "OpenEnv refuses an eval rollout (capture_level below tokens)"
    keep: set[int] = set()
    for row in result.rows:
        if row.label == AGENT:
            keep.update(row.extra["path"])
    nodes = [k for k in range(len(rollout.calls)) if k in keep]
    bad = [rollout.calls[k].node_id for k in nodes if not (usable_logprobs(rollout.calls[k]))]
    if bad:
        return (
            [],
            f"OpenEnv's to_training_trace raises: agent capture has missing or invalid engine tokens/logprobs ({', '.join(bad[:3])})",
        )
    return nodes, None
