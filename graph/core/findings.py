"""Graded findings (docs/semantics.md, "Findings"): what is wrong with a call, a sequence or a whole rollout."""

from __future__ import annotations

from collections import Counter
from typing import Any

from rollout_graph.core.records import FATAL, INFO, LEVELS, WARN, Call, Finding
from rollout_graph.core.roles import AGENT
from rollout_graph.core.sequences import Sequence
from rollout_graph.core.topology import Topology

# Keys that change the distribution tokens are sampled from; length limits and seeds do not.
DISTRIBUTION_KEYS = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
)


def turn_findings(calls: list[Call]) -> list[list[Finding]]:
    """Per call: the loader's findings plus those derived from its tokens and params."""
    token_trace = any(c.prompt_ids is not None for c in calls)
    return [list(c.issues) + _derived(c, token_trace) for c in calls]


def _derived(call: Call, token_trace: bool) -> list[Finding]:
    out: list[Finding] = []
    node_id = call.node_id
    if call.claims and call.claims.get("tokens_omitted"):
        return _omitted(call) + out
    if token_trace and call.prompt_ids is None:
        out.append(
            Finding(
                FATAL,
                "no_prompt_ids",
                "no prompt token ids in a trace that otherwise has them; linked by messages",
                node_id=node_id,
            )
        )
    n_sampled = call.n_sampled
    if n_sampled:
        if call.sampled_logprobs is None:
            why = " (the document masked this span)" if call.claims.get("masked_in_document") else ""
            out.append(
                Finding(FATAL, "no_logprobs", f"{n_sampled} sampled tokens but no logprobs{why}", node_id=node_id)
            )
        elif not call.logprobs_aligned:
            detail = f"{call.sampled_logprobs.shape[0]} logprobs for {n_sampled} sampled tokens"
            out.append(Finding(FATAL, "logprob_misalign", detail, node_id=node_id))
    elif token_trace:
        out.append(Finding(WARN, "no_sampled_ids", "the call sampled nothing", node_id=node_id))
    if call.finish_reason == "length":
        out.append(
            Finding(
                WARN,
                "truncated_turn",
                "finish_reason is length: the call's reply was cut at max tokens",
                node_id=node_id,
            )
        )
    if call.submitted_params is not None:  # nothing neutralised without submitted params (_param_changes)
        changed = _param_changes(call.requested_params, call.submitted_params)
        if changed:
            out.append(
                Finding(WARN, "sampling_neutralised", "requested vs submitted: " + ", ".join(changed), node_id=node_id)
            )
    return out


def _omitted(call: Call) -> list[Finding]:
    """A rollout document's turn that none of its sequences holds (OpenEnv's default export leaves
    discarded rows out): its tokens are not in the file, which is what the document chose, not a
    capture failure (docs/formats.md, "Rollout documents")."""
    claims = call.claims
    known = (
        f"its prompt ids (those of {claims.get('prompt_from')}, which it re-sent)"
        if call.prompt_ids is not None
        else "no ids: it is linked by its messages"
    )
    detail = (
        f"in none of the document's sequences (exported without its discarded rows): "
        f"{claims.get('n_prompt')} prompt and {claims.get('n_sampled')} sampled tokens, of which the file holds {known}"
    )
    out = [Finding(WARN, "document_omits_tokens", detail, node_id=call.node_id)]
    if call.submitted_params is not None:
        changed = _param_changes(call.requested_params, call.submitted_params)
        if changed:
            out.append(
                Finding(
                    WARN, "sampling_neutralised", "requested vs submitted: " + ", ".join(changed), node_id=call.node_id
                )
            )
    return out


def _param_changes(requested: dict[str, Any], submitted: dict[str, Any] | None) -> list[str]:
    if submitted is None:
        return []
    return [
        f"{k} {requested[k]!r} -> {submitted[k]!r}"
        for k in requested
        if k in submitted and requested[k] != submitted[k]
    ]


def is_trainable(call: Call, findings: list[Finding]) -> bool:
    """Sampled tokens are trained only with aligned logprobs and no FATAL finding on the call."""
    return call.logprobs_aligned and (not findings or not any(f.level == FATAL for f in findings))


def _specified_distribution(call: Call) -> dict[str, str]:
    """Distribution params the call set explicitly (submitted values win over requested ones)."""
    params = {**call.requested_params, **(call.submitted_params or {})}
    return {k: repr(params[k]) for k in DISTRIBUTION_KEYS if k in params}


def _sampling_change(calls: list[Call]) -> Finding | None:
    """A call that sets a distribution param to a different value than an earlier call did."""
    if len(calls) < 2:  # a change needs two calls
        return None
    first_seen: dict[str, tuple[str, str]] = {}
    for call in calls:
        for key, value in _specified_distribution(call).items():
            seen = first_seen.setdefault(key, (value, call.node_id))
            if seen[0] != value:
                return Finding(
                    WARN,
                    "sampling_changed",
                    f"{key} changes within the rollout: {seen[0]} at {seen[1]}, {value} here",
                    node_id=call.node_id,
                )
    return None


def rollout_findings(
    calls: list[Call], topology: Topology, sequences: list[Sequence], document: dict[str, Any] | None
) -> list[Finding]:
    """Findings about the rollout as a whole rather than one call (e.g. a single call, nothing linked)."""
    out: list[Finding] = []
    n_turns, n_roots = len(calls), len(topology.roots)
    if n_turns == 1 and _is_agentic(calls[0]):
        out.append(
            Finding(FATAL, "degenerate_rollout", "one call for a whole agentic rollout", node_id=calls[0].node_id)
        )
    if n_turns > 1 and n_roots == n_turns:
        out.append(
            Finding(WARN, "per_turn_roots", f"every one of the {n_turns} calls is its own root: linking found nothing")
        )
    elif n_roots > 1:
        level = WARN if n_roots * 2 > n_turns else INFO
        out.append(
            Finding(
                level,
                "multiple_roots",
                f"{n_roots} roots in {n_turns} calls (subagents, auxiliary calls, compactions or rewrites)",
            )
        )
    for node, kept in sorted(topology.discarded.items()):
        out.append(
            Finding(
                WARN,
                "discarded_turns",
                f"discarded: sibling {calls[kept].node_id} continued",
                node_id=calls[node].node_id,
            )
        )
    for group in topology.unfinished:
        names = ", ".join(calls[m].node_id for m in group)
        out.append(
            Finding(
                WARN,
                "unfinished_attempts",
                f"{len(group)} sibling attempts and none continued ({names}): the harness gave up on them, "
                "yet each is a training row (export --drop-unfinished leaves them out)",
                node_id=calls[group[0]].node_id,
            )
        )
    change = _sampling_change(calls)
    if change is not None:
        out.append(change)
    for seq in sequences:
        if seq.role == AGENT and seq.n_trainable == 0:
            out.append(
                Finding(
                    FATAL,
                    "nothing_trainable",
                    "agent sequence with no trainable token",
                    node_id=calls[seq.leaf].node_id,
                    leaf_id=calls[seq.leaf].node_id,
                )
            )
    if document is not None:
        out.extend(document.get("findings", ()))
        for seq in document.get("sequences", ()):
            if seq.get("masked_logprob_positions"):
                leaf = seq["node_ids"][-1] if seq["node_ids"] else None
                out.append(
                    Finding(
                        FATAL,
                        "masked_has_logprob",
                        f"the document's sequence has {seq['masked_logprob_positions']} mask-0 positions with a non-zero logprob",
                        node_id=leaf,
                        leaf_id=leaf,
                    )
                )
    return out


def _is_agentic(call: Call) -> bool:
    message = call.response_message or {}
    return call.has_tools or bool(message.get("tool_calls"))


def count_by_level(findings: list[Finding]) -> dict[str, int]:
    """Number of findings at each level (FATAL, WARN, INFO), every level present."""
    counts = Counter(f.level for f in findings)
    return {level: counts.get(level, 0) for level in LEVELS}


def top_codes(findings: list[Finding], level: str, limit: int | None = 3) -> list[tuple[str, int]]:
    """The most frequent finding codes at ``level``, with their counts (every code with ``limit=None``)."""
    return Counter(f.code for f in findings if f.level == level).most_common(limit)
