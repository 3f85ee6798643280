"""verifiers v1 traces (``verifiers/v1/trace.py`` ``Trace.to_record``; message graph in ``verifiers/v1/graph.py``).

A trace is a message graph: ``nodes[i] = {parent, message, sampled, token_ids, mask, logprobs, ...}``
where each node stores only the tokens it adds, so a root-to-node path concatenates to the exact
``prompt_ids + completion_ids`` the model saw. Every ``sampled`` node is one call: its prompt is the
path's tokens before it plus its own leading scaffold (mask false), its sampled span the masked
completion. Exact-prefix linking then rebuilds the graph, branches (compaction, subagents) included.
An *episode* (``{"id", "traces": [...]}``, what prime-rl's rollout monitor writes under
``rollouts/step_{N}/.../traces.jsonl``) holds several traces, one session each.

Per-sampled-token ``advantages``, ``trainer_logprobs`` and ``reference_logprobs`` on a node, and
the trace's ``rewards`` (``{name: {score, weight}}``), ride as ``claims["signals"]``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rollout_graph.core.records import Call
from rollout_graph.ingest import limits
from rollout_graph.ingest.formats.fidelity import float_array, listed, step_of
from rollout_graph.ingest.formats.fields import RecordError, as_dict, new_call, record_problems, tool_list
from rollout_graph.ingest.tokens import Problems, token_ids

FORMAT = "verifiers trace"


def _is_trace(value: Any) -> bool:
    nodes = value.get("nodes") if isinstance(value, dict) else None
    return isinstance(nodes, list) and (not nodes or (isinstance(nodes[0], dict) and "message" in nodes[0]))


def is_verifiers(record: dict) -> bool:
    """A verifiers trace (``nodes`` of messages) or an episode of them (``traces``)."""
    if _is_trace(record):
        return True
    traces = record.get("traces")
    return isinstance(traces, list) and bool(traces) and all(_is_trace(t) for t in traces)


def _reward(trace: dict, problems: Problems) -> float | None:
    rewards = trace.get("rewards")
    if type(trace.get("reward")) in (int, float) and abs(trace["reward"]) < 2**1023:
        return float(trace["reward"])
    if trace.get("reward") is not None:
        problems.malformed.append(f"reward {_shown(trace.get('reward'))} is not a number; not used")
    if rewards is None:
        return None
    if not isinstance(rewards, dict):
        problems.malformed.append(f"rewards is a {type(rewards).__name__}, not an object of named scores; not used")
        return None
    total, seen, bad = 0.0, False, []
    for name, value in rewards.items():
        value = as_dict(value)
        score, weight = value.get("score"), value.get("weight", 1.0)
        product = math.nan
        if isinstance(score, int | float) and isinstance(weight, int | float) and not isinstance(score, bool):
            try:  # an integer beyond a float's range is no score either
                product = float(score) * float(weight)
            except OverflowError:
                pass
        if math.isfinite(product):
            total += product
            seen = True
        else:
            bad.append(str(name))
    if bad:
        problems.malformed.append(f"rewards {bad[0]!r}: score or weight is not a finite number; left out of the reward")
    return total if seen else None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:30] + f"… ({len(text):,} characters)"


def _message(value: Any) -> dict | None:
    """A verifiers message as a chat message (tool calls as ``{"id", "function": {"name", "arguments"}}``)."""
    if not isinstance(value, dict):
        return None
    out = dict(value)
    calls = out.get("tool_calls")
    if isinstance(calls, list):
        out["tool_calls"] = [
            {
                "id": c.get("id"),
                "type": "function",
                "function": {"name": c.get("name"), "arguments": c.get("arguments")},
            }
            if isinstance(c, dict) and "function" not in c
            else c
            for c in calls
        ]
    return out


def parse(record: dict, source: str, line: int, default_session: str) -> list[Call]:
    """A trace or an episode -> one call per sampled node of each trace."""
    traces = [record] if _is_trace(record) else list(record["traces"])
    episode = record.get("id") if not _is_trace(record) else None
    step = step_of(record)
    calls: list[Call] = []
    for k, trace in enumerate(traces):
        name = trace.get("id") or as_dict(trace.get("agent")).get("name") or k
        session = f"{episode}/{name}" if episode is not None else str(trace.get("id") or default_session)
        calls += _trace_calls(trace, session, source, line, step if step is not None else step_of(trace))
    if not calls:
        raise RecordError(f"{FORMAT}: no sampled message in any trace; nothing to show")
    return calls


def _parents(nodes: list[dict], problems: Problems) -> list[int | None]:
    """Each node's parent index (None: a root), as a forest: a ``parent`` that is not a node's
    index, or that closes a cycle, is cut with a warning (one pass, linear)."""
    n = len(nodes)
    parent: list[int | None] = []
    bad: list[int] = []
    for i, node in enumerate(nodes):
        p = node.get("parent")
        ok = type(p) is int and 0 <= p < n and p != i
        if p is not None and not ok:
            bad.append(i)
        parent.append(p if ok else None)
    if bad:
        problems.malformed.append(
            f"nodes[{bad[0]}].parent {_shown(nodes[bad[0]].get('parent'))} is not another node's index; "
            f"read as a root" + (f" (and {len(bad) - 1} more nodes)" if len(bad) > 1 else "")
        )
    state = [0] * n  # 0 unseen, 1 on the walk now, 2 done
    cut: list[int] = []
    for start in range(n):
        walk = []
        at: int | None = start
        while at is not None and state[at] == 0:
            state[at] = 1
            walk.append(at)
            at = parent[at]
        if at is not None and state[at] == 1:  # the walk met itself: a cycle, cut where it closed
            cut.append(walk[-1])
            parent[walk[-1]] = None
        for k in walk:
            state[k] = 2
    if cut:
        problems.malformed.append(
            f"the nodes' parents form a cycle; nodes[{cut[0]}] is read as a root"
            + (f" (and {len(cut) - 1} more)" if len(cut) > 1 else "")
        )
    return parent


def _order(parent: list[int | None]) -> list[int]:
    """Node indexes with every parent before its children (linear)."""
    children: list[list[int]] = [[] for _ in parent]
    roots: list[int] = []
    for i, p in enumerate(parent):
        (roots if p is None else children[p]).append(i)
    order, stack = [], roots[::-1]
    while stack:
        i = stack.pop()
        order.append(i)
        stack.extend(children[i][::-1])
    return order


def _trace_calls(trace: dict, session: str, source: str, line: int, step: int | None) -> list[Call]:
    """One call per sampled node. Linear in the trace: each node's message is converted once and
    shared, and the calls' prompts, sampled spans and request messages are views and slices of one
    sequence per branch (the ids and message references they expand to are checked against
    ``max_expanded_ids`` before any call is built)."""
    trace_problems = Problems()
    not_objects = [i for i, n in enumerate(trace["nodes"]) if not isinstance(n, dict)]
    if not_objects:
        trace_problems.malformed.append(
            f"nodes[{not_objects[0]}] is not an object ({len(not_objects)} such nodes); read as empty nodes"
        )
    nodes = [n if isinstance(n, dict) else {} for n in trace["nodes"]]
    parent = _parents(nodes, trace_problems)
    order = _order(parent)
    reward = _reward(trace, trace_problems)
    tools = tool_list(trace.get("tools"), trace_problems) if trace.get("tools") else None
    model_calls = {c.get("node"): c for c in trace.get("calls") or [] if isinstance(c, dict)}
    ids_of: list[np.ndarray | None] = []
    for i, node in enumerate(nodes):
        problems = Problems()
        ids = token_ids(node.get("token_ids") or [], f"nodes[{i}].token_ids", problems)
        ids_of.append(None if problems.invalid_ids else ids)
        if problems.invalid_ids or problems.malformed:  # the calls through it are read at message level
            trace_problems.malformed += [
                f"{p}; the calls through nodes[{i}] are read without tokens"
                for p in (problems.invalid_ids + problems.malformed)[:1]
            ]
    messages = [_message(node.get("message")) for node in nodes]
    dropped = [i for i, node in enumerate(nodes) if node.get("message") is not None and messages[i] is None]
    if dropped:
        trace_problems.malformed.append(
            f"nodes[{dropped[0]}].message is a {type(nodes[dropped[0]].get('message')).__name__}, not an object "
            f"({len(dropped)} such nodes); left out of the messages"
        )
    # per node, in parent-first order: tokens and messages on its path before it, and whether
    # every node of the path has valid token ids
    n = len(nodes)
    tokens_before, messages_before, depth, valid = [0] * n, [0] * n, [0] * n, [False] * n
    for i in order:
        p = parent[i]
        if p is not None:
            tokens_before[i] = tokens_before[p] + _length(ids_of[p])
            messages_before[i] = messages_before[p] + (messages[p] is not None)
            depth[i] = depth[p] + 1
        valid[i] = ids_of[i] is not None and (p is None or valid[p])
    sampled = [i for i in range(n) if nodes[i].get("sampled")]
    expanded = sum(tokens_before[i] + _length(ids_of[i]) + messages_before[i] for i in sampled)
    cap = limits.active().max_expanded_ids
    if expanded > cap:
        raise RecordError(
            f"over a limit: this verifiers trace's {len(sampled):,} sampled nodes expand to {expanded:,} token ids "
            f"and message references (limit max_expanded_ids {cap:,}, --max-expanded-ids); the trace is not loaded"
        )
    seqs = _sequences(sampled, parent, depth, ids_of, messages, valid)
    out = []
    for i in sampled:
        node = nodes[i]
        arena, arena_messages = seqs[i]
        call = new_call({"session_id": session, "node_id": f"n{i}"}, source, line, FORMAT, session)
        problems = Problems()
        call.request_messages = arena_messages[: messages_before[i]]
        call.response_message = messages[i]
        call.tools = tools
        meta = as_dict(model_calls.get(i))
        call.finish_reason = node.get("finish_reason") or meta.get("finish_reason")
        if isinstance(meta.get("model"), str):
            call.model = meta["model"]
        if isinstance(meta.get("usage"), dict):
            call.usage = meta["usage"]
        span = as_dict(meta.get("time"))
        if type(span.get("start")) in (int, float) and span["start"]:
            call.timing["started_at"] = span["start"]
        if arena is not None:
            _tokens(call, node, ids_of[i], arena, tokens_before[i], problems)
        signals: dict[str, Any] = {"reward": reward}
        n_sampled = call.n_sampled
        for name, key in (("advantages", "advantages"), ("trainer_logprobs", "trainer_logprobs")):
            values = float_array(node.get(key), n_sampled) if n_sampled else None
            if values is not None:
                signals[name] = listed(values)
            elif n_sampled and node.get(key) not in (None, []):
                problems.malformed.append(
                    f"{key} is not a list of {n_sampled} numbers (one per sampled token); not used"
                )
        call.claims.update(format=FORMAT, signals=signals)
        if step is not None:
            call.claims["step"] = step
        problems.malformed += trace_problems.malformed
        record_problems(call, problems)
        out.append(call)
    return out


def _length(ids: np.ndarray | None) -> int:
    return 0 if ids is None else int(ids.shape[0])


def _sequences(
    sampled: list[int],
    parent: list[int | None],
    depth: list[int],
    ids_of: list[np.ndarray | None],
    messages: list[dict | None],
    valid: list[bool],
) -> dict[int, tuple[np.ndarray | None, list[dict]]]:
    """Per sampled node, a sequence its path is a prefix of: the path's token ids concatenated
    (None when a node of its path has no valid ids) and the path's messages. The deepest sampled
    node not yet covered starts one; every sampled ancestor not yet covered takes the same, so a
    chain is one sequence and each further branch one more (what ``max_expanded_ids`` bounded)."""
    wanted = set(sampled)
    out: dict[int, tuple[np.ndarray | None, list[dict]]] = {}
    for leaf in sorted(sampled, key=lambda i: -depth[i]):
        if leaf in out:
            continue
        path = []
        at: int | None = leaf
        while at is not None:
            path.append(at)
            at = parent[at]
        path.reverse()
        path_messages = [m for m in (messages[p] for p in path) if m is not None]
        arena: np.ndarray | None = None
        for k in reversed(path):
            if k in out:
                break  # it and every node above it are covered already
            if k not in wanted:
                continue
            if valid[k] and arena is None:  # valid ids form a prefix of the path: k's covers it
                good = [a for a in (ids_of[p] for p in path[: depth[k] + 1]) if a is not None]
                arena = np.concatenate(good)
                arena.flags.writeable = False
            out[k] = (arena if valid[k] else None, path_messages)
    return out


def _tokens(call: Call, node: dict, ids: np.ndarray | None, arena: np.ndarray, offset: int, problems: Problems) -> None:
    """Prompt = the path's tokens before the completion; sampled = the node's masked span (both
    views of ``arena``, where the node's own ids start at ``offset``)."""
    if ids is None or ids.shape[0] == 0:
        return  # no tokens: the call is read at message level
    mask = node.get("mask")
    mask = np.asarray(mask, dtype=bool) if isinstance(mask, list) and len(mask) == ids.shape[0] else None
    if mask is None or not mask.any():
        problems.malformed.append("the sampled node's mask is missing or marks no token; its tokens are not used")
        return
    first = int(np.argmax(mask))
    last = int(len(mask) - np.argmax(mask[::-1]))
    if not mask[first:last].all():
        problems.malformed.append(
            "the sampled node's mask has holes; its span is read from first to last sampled token"
        )
    call.prompt_ids = arena[: offset + first]
    call.sampled_ids = arena[offset + first : offset + last]
    lps = node.get("logprobs")
    if isinstance(lps, list) and lps:
        values = float_array(lps, len(lps))
        if values is not None and values.shape[0] == call.n_sampled and np.isfinite(values).all():
            if (values > 0).any():
                problems.positive_logprobs.append("a sampled logprob is > 0")
            call.sampled_logprobs = values
        else:
            problems.malformed.append(
                f"logprobs has {len(lps)} values for {call.n_sampled} sampled tokens (or non-numbers); not used"
            )
