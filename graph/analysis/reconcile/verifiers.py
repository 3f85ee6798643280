"""verifiers' message graph: one node per distinct message, a new branch at the first token
divergence, every branch a training sample (docs/reconcile.md, "verifiers").

Follows ``verifiers/v1/graph.py`` and ``verifiers/v1/trace.py`` of verifiers 0.4.0 (PyPI), for a
captured turn (token ids from the engine, no renderer attribution: ``TurnTokens.message_spans`` is
None). ``prepare_turn`` walks the request's messages down the graph by key (parent, the tools'
hash at a root, ``message_hash``: role type, text, reasoning, tool calls with their ids and
canonical arguments, tool call id); ``_commit_turn`` keeps that prefix only while each node's
token ids are exactly the next prompt ids (the first divergence ends it), extends it with an
existing child whose ids match (``_matching_prefix_node``), adds the rest of the request as
nodes without tokens, and puts the prompt's remaining ids (context) and the sampled ids (mask 1,
logprobs) on the assistant node. ``Trace.branches``: one branch per leaf, in node order; its
ids are its nodes' ids, 0.0 logprobs off the sampled positions.

Turns are committed in arrival order, each prepared just before (a capture does not say when a
harness sent a request). Messages are read as ``verifiers.v1.dialects.chat.parse_message`` reads
a chat request (any role but system, assistant and tool is a user message). Entry point:
:func:`reconcile_verifiers`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
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

REASONING_FIELDS = ("reasoning", "reasoning_content", "reasoning_details")
_PROVIDER_STATE_FIELDS = ("encrypted_content", "signature", "data", "phase")


def _reasoning_text(data: dict[str, Any]) -> str | None:
    for name in REASONING_FIELDS:
        value = data.get(name)
        if isinstance(value, str) and value:
            return value
    details = data.get("reasoning_details")
    if isinstance(details, list):
        parts = []
        for detail in details:
            if isinstance(detail, dict):
                value = detail.get("text") or detail.get("summary")
                if isinstance(value, str) and value:
                    parts.append(value)
        return "\n".join(parts) or None
    return None


def _parts(content: Any) -> tuple:
    """``content_to_parts`` as ``message_hash`` reads it."""
    if not isinstance(content, list):
        return ("content_text", str(content or ""))
    parts: list[tuple[str, str]] = []
    for p in content:
        if not isinstance(p, dict):
            continue
        if p.get("type") == "text":
            parts.append(("text", str(p.get("text", ""))))
        elif p.get("type") == "image_url":
            parts.append(("image_url", str((p.get("image_url") or {}).get("url", ""))))
    return ("content_parts", tuple(parts))


def _canonical_tool_arguments(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), sort_keys=True, separators=(",", ":"))
    except (json.JSONDecodeError, ValueError, TypeError):
        return arguments


def message_key(message: Any) -> tuple:
    """What ``message_hash`` distinguishes, for a chat message as ``parse_message`` reads it: two
    messages have the same key exactly when verifiers hashes them equal."""
    if not isinstance(message, dict):
        return ("UserMessage", "content_text", str(message))
    role = message.get("role")
    content = message.get("content")
    if role == "system":
        return ("SystemMessage", *_parts(content))
    if role == "tool":
        return ("ToolMessage", *_parts(content), "tool_call_id", str(message.get("tool_call_id", "")))
    if role != "assistant":
        return ("UserMessage", *_parts(content))
    text = (
        "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        if isinstance(content, list)
        else content or ""
    )
    key: list[Any] = ["AssistantMessage", "content_text", str(text or "")]
    reasoning = _reasoning_text(message)
    if reasoning is not None:
        key += ["reasoning_content", reasoning]
    calls = []
    for call in message.get("tool_calls") or []:
        if not isinstance(call, dict):
            continue
        kind = call.get("type") or ("custom" if call.get("custom") is not None else "function")
        found = call.get(kind)
        native: dict[str, Any] = found if isinstance(found, dict) else {}
        raw = native.get("input" if kind == "custom" else "arguments", "")
        arguments = raw if isinstance(raw, str) else json.dumps(raw, sort_keys=True)
        calls.append(
            (
                str(kind),
                str(call.get("id", "")),
                str(native.get("name", "")),
                str(native.get("namespace") or ""),
                arguments if kind == "custom" else _canonical_tool_arguments(arguments),
            )
        )
    details = message.get("reasoning_details")
    state = details if isinstance(details, list) and details else None
    ids = {c[1] for c in calls}
    for item in state or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type") or ("message" if item.get("role") == "assistant" else "")
        hashed = {k: item[k] for k in _PROVIDER_STATE_FIELDS if item.get(k) is not None}
        if kind == "message" and isinstance(item.get("content"), list):
            unparsed = [p for p in item.get("content") or [] if p.get("type") not in ("input_text", "output_text")]
            if unparsed:
                hashed["content"] = unparsed
        represented = kind in ("message", "reasoning") or (
            kind in ("function_call", "custom_tool_call") and item.get("call_id") in ids
        )
        if represented and not hashed:
            continue
        key += ["provider_state", kind, json.dumps(hashed if represented else item, sort_keys=True)]
    for c in calls:
        key += ["tool_call", *c]
    return tuple(key)


def tools_key(tools: Any) -> str:
    """What ``_tools_hash`` distinguishes: the tool declarations as ``parse_tools`` types them,
    dumped without None fields."""
    payload = []
    for declaration in tools or []:
        if not isinstance(declaration, dict):
            continue
        kind = declaration.get("type", "function")
        tool = declaration.get(kind, declaration)
        if not isinstance(tool, dict):
            tool = {}
        if kind == "mcp":
            tool = {k: v for k, v in tool.items() if str(k).lower() not in ("authorization", "headers")}
        dumped = {"description": "", "parameters": {}, **tool, "type": kind}
        dumped["name"] = tool.get("name") or tool.get("server_label") or kind
        payload.append({k: v for k, v in dumped.items() if v is not None})
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)


@dataclass(slots=True)
class _Node:
    parent: int | None
    key: tuple
    call: int | None = None  # the call whose assistant node this is (None: an input message)
    gen_start: int = 0  # its ids: that call's prompt from here, then its sampled ids
    n_tokens: int = 0
    children: list[int] = field(default_factory=list)


class MessageGraph:
    """``Trace.nodes`` and its head index, built turn by turn (``prepare_turn`` then ``commit``)."""

    def __init__(self, calls: list[Call]) -> None:
        self.calls = calls
        self.nodes: list[_Node] = []
        self.index: dict[tuple, int] = {}
        self.assistant: dict[int, int] = {}  # call -> its assistant node
        self._keys: dict[int, tuple] = {}

    def _message(self, message: Any) -> tuple:
        key = self._keys.get(id(message))
        if key is None:
            key = self._keys[id(message)] = message_key(message)
        return key

    def _node_key(self, parent: int | None, message: tuple, tools: str) -> tuple:
        return (parent, tools if parent is None else None, message)

    def _ids_match(self, node: _Node, prompt: np.ndarray, start: int) -> bool:
        """``prompt_ids[start : start + len(node.token_ids)] == node.token_ids``."""
        if node.n_tokens == 0:
            return True
        if start + node.n_tokens > prompt.shape[0]:
            return False
        assert node.call is not None
        call = self.calls[node.call]
        head = call.n_prompt - node.gen_start
        assert call.prompt_ids is not None
        if not np.array_equal(prompt[start : start + head], call.prompt_ids[node.gen_start :]):
            return False
        return bool(np.array_equal(prompt[start + head : start + node.n_tokens], call.sampled_ids))

    def _matching_prefix_node(
        self, parent: int | None, message: tuple, tools: str, prompt: np.ndarray, start: int
    ) -> int | None:
        key = self._node_key(parent, message, tools)
        indexed = self.index.get(key)
        candidates = [indexed] if indexed is not None else []
        candidates += [i for i in range(len(self.nodes) - 1, -1, -1) if i != indexed and self.nodes[i].key == key]
        matches = [
            i for i in candidates
            if start + self.nodes[i].n_tokens <= prompt.shape[0] and self._ids_match(self.nodes[i], prompt, start)
        ]  # fmt: skip
        return max(matches, key=lambda i: self.nodes[i].n_tokens, default=None)

    def commit(self, k: int) -> int:
        """Prepare and commit call ``k``'s turn; returns its assistant node."""
        call = self.calls[k]
        messages = call.request_messages or []
        prompt = [self._message(m) for m in messages]
        tools = tools_key(call.tools)
        tokens = call.prompt_ids is not None
        prompt_ids = (
            np.asarray(call.prompt_ids, dtype=np.int64) if call.prompt_ids is not None else np.empty(0, np.int64)
        )
        # prepare_turn: the longest message prefix by key
        parent: int | None = None
        path_len = 0
        prefix: list[int] = []
        for message in prompt:
            existing = self.index.get(self._node_key(parent, message, tools))
            if existing is None:
                break
            prefix.append(existing)
            parent = existing
            path_len += self.nodes[existing].n_tokens
        # _commit_turn: the prefix holds while its nodes' ids are the prompt's
        if tokens and prefix:
            keep = off = 0
            for nid in prefix:
                if not self._ids_match(self.nodes[nid], prompt_ids, off):
                    break
                off += self.nodes[nid].n_tokens
                keep += 1
            prefix = prefix[:keep]
            path_len = off
        while len(prefix) < len(prompt):
            i = len(prefix)
            end = path_len
            parent = prefix[-1] if prefix else None
            if tokens:
                existing = self._matching_prefix_node(parent, prompt[i], tools, prompt_ids, path_len)
                if existing is not None:
                    end += self.nodes[existing].n_tokens
            else:
                existing = self.index.get(self._node_key(parent, prompt[i], tools))
            if existing is None:
                break
            prefix.append(existing)
            path_len = end
        parent = prefix[-1] if prefix else None
        for message in prompt[len(prefix) :]:  # new input messages: no ids of their own (no spans)
            key = self._node_key(parent, message, tools)
            self.nodes.append(_Node(parent, key))
            if parent is not None:
                self.nodes[parent].children.append(len(self.nodes) - 1)
            parent = len(self.nodes) - 1
            self.index[key] = parent
        response = call.response_message if isinstance(call.response_message, dict) else {}
        reply = message_key({**response, "role": "assistant"})  # the Response's AssistantMessage
        key = self._node_key(parent, reply, tools)
        n_tokens = (call.n_prompt - path_len + call.n_sampled) if tokens else 0
        self.nodes.append(_Node(parent, key, k, path_len if tokens else call.n_prompt, n_tokens))
        node = len(self.nodes) - 1
        if parent is not None:
            self.nodes[parent].children.append(node)
        self.index[key] = node
        self.assistant[k] = node
        return node

    def leaves(self) -> list[int]:
        """``graph.leaves``: nodes that are no node's parent, in node order."""
        return [i for i, n in enumerate(self.nodes) if not n.children]

    def path(self, node: int) -> list[int]:
        """Root -> ``node``, by node index."""
        out = [node]
        while (p := self.nodes[out[-1]].parent) is not None:
            out.append(p)
        return out[::-1]


def reconcile_verifiers(rollout: Rollout) -> Reconciled:
    """verifiers' rows for one rollout: every branch of its message graph, trained
    (docs/reconcile.md, "verifiers")."""
    calls = rollout.calls
    graph = MessageGraph(calls)
    for k in range(len(calls)):
        graph.commit(k)
    rows: list[TrainerRow] = []
    on_path: dict[int, set[int]] = {}
    for b, leaf in enumerate(graph.leaves()):
        segments: list[Segment] = []
        path = graph.path(leaf)
        for nid in path:
            node = graph.nodes[nid]
            if node.call is None or not node.n_tokens:
                continue
            call = calls[node.call]
            if call.n_prompt > node.gen_start:
                segments.append(prompt_segment(node.call, node.gen_start, call.n_prompt))
            if call.n_sampled:
                segments.append(output_segment(node.call, 0, call.n_sampled, True, call.logprobs_aligned))
        path_calls = [graph.nodes[n].call for n in path if graph.nodes[n].call is not None]
        for c in path_calls:
            assert c is not None
            on_path.setdefault(c, set()).update(x for x in path_calls if x is not None)
        rows.append(TrainerRow(f"branch-{b}", segments, True, "", None, {"calls": path_calls}))
    reasons = {k: "no prompt ids: its node carries no token ids" for k, c in enumerate(calls) if c.prompt_ids is None}
    fates = call_fates(rollout, rows, reasons)
    events: list[tuple[str, list[int], int, int | None]] = []
    topo = rollout.topology
    for k in range(len(calls)):
        p = topo.parents[k]
        mine = graph.assistant.get(k)
        if p is None or mine is None or calls[k].prompt_ids is None:
            continue
        if graph.assistant.get(p) not in graph.path(mine):
            events.append(("split", [p, k], calls[p].n_sampled, k))
    for k, kept in topo.discarded.items():
        if calls[k].n_sampled:
            events.append(("trains_discarded", [k, kept], calls[k].n_sampled, k))
    for k, call in enumerate(calls):
        if call.n_sampled and call.prompt_ids is not None and not call.logprobs_aligned:
            events.append(("no_logprob", [k], call.n_sampled, k))
    notes = {"n_nodes": len(graph.nodes), "n_branches": len(rows)}
    return Reconciled("verifiers", {"message_spans": None}, rows, fates, notes, events=events)
