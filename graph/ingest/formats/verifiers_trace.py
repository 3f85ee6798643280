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

from typing import Any

import numpy as np

from rollout_graph.core.records import Call
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


def _reward(trace: dict) -> float | None:
    rewards = trace.get("rewards")
    if type(trace.get("reward")) in (int, float):
        return float(trace["reward"])
    if not isinstance(rewards, dict):
        return None
    total, seen = 0.0, False
    for value in rewards.values():
        value = as_dict(value)
        score, weight = value.get("score"), value.get("weight", 1.0)
        if isinstance(score, (int, float)) and isinstance(weight, (int, float)) and not isinstance(score, bool):
            total += float(score) * float(weight)
            seen = True
    return total if seen else None


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


def _trace_calls(trace: dict, session: str, source: str, line: int, step: int | None) -> list[Call]:
    nodes = [n if isinstance(n, dict) else {} for n in trace["nodes"]]
    reward = _reward(trace)
    tools = tool_list(trace.get("tools"), Problems()) if trace.get("tools") else None
    model_calls = {c.get("node"): c for c in trace.get("calls") or [] if isinstance(c, dict)}
    ids_of: list[np.ndarray | None] = []
    for i, node in enumerate(nodes):
        problems = Problems()
        ids = token_ids(node.get("token_ids") or [], f"nodes[{i}].token_ids", problems)
        ids_of.append(None if problems.invalid_ids else ids)
    out = []
    for i, node in enumerate(nodes):
        if not node.get("sampled"):
            continue
        path = _path(nodes, i)
        call = new_call({"session_id": session, "node_id": f"n{i}"}, source, line, FORMAT, session)
        problems = Problems()
        call.request_messages = [m for m in (_message(nodes[p].get("message")) for p in path[:-1]) if m is not None]
        call.response_message = _message(node.get("message"))
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
        _tokens(call, nodes, ids_of, path, problems)
        signals: dict[str, Any] = {"reward": reward}
        n = call.n_sampled
        for name, key in (("advantages", "advantages"), ("trainer_logprobs", "trainer_logprobs")):
            values = float_array(node.get(key), n) if n else None
            if values is not None:
                signals[name] = listed(values)
        call.claims.update(format=FORMAT, signals=signals)
        if step is not None:
            call.claims["step"] = step
        record_problems(call, problems)
        out.append(call)
    return out


def _path(nodes: list[dict], leaf: int) -> list[int]:
    path, seen = [], set()
    at: int | None = leaf
    while at is not None and at not in seen and 0 <= at < len(nodes):
        seen.add(at)
        path.append(at)
        parent = nodes[at].get("parent")
        at = parent if type(parent) is int else None
    return path[::-1]


def _tokens(
    call: Call, nodes: list[dict], ids_of: list[np.ndarray | None], path: list[int], problems: Problems
) -> None:
    """Prompt = the path's tokens before the completion; sampled = the node's masked span."""
    leaf = path[-1]
    ids = ids_of[leaf]
    if ids is None or ids.shape[0] == 0 or any(ids_of[p] is None for p in path):
        return  # no tokens: the call is read at message level
    mask = nodes[leaf].get("mask")
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
    before = [ids_of[p] for p in path[:-1]]
    call.prompt_ids = np.concatenate([*[b for b in before if b is not None], ids[:first]]).astype(ids.dtype)
    call.sampled_ids = ids[first:last].copy()
    lps = nodes[leaf].get("logprobs")
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
