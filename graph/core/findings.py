"""Graded findings (docs/semantics.md, "Findings"): what is wrong with a call, a sequence or a whole rollout."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from rollout_graph.core.engine import RAW, engine_of, logprobs_mode
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
    out += call_validator_findings(call)
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
    out += rollout_validator_findings(calls, topology, sequences, document)
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


# --- The upstream's validators (OpenEnv 0.10's capture validators, names kept) ------------------
# docs/semantics.md, "Findings": length_mismatch, invalid_loss_mask, trainable_prompt (training
# rows), empty_completion, empty_response, certain_tokens, root_count, forks,
# context_budget_exhausted, sampling_policy_changed, and the ones the capture proxy's engine
# probes decide (raw_logprobs, no_tool_calling, no_tool_call_emitted, behaviour_changed;
# rollout_graph.core.engine). call_validator_findings runs per call (from turn_findings'
# _derived), rollout_validator_findings once per rollout (from rollout_findings).

# A sampling setting under which raw (pre-temperature) logprobs differ from the sampled distribution.
_NEUTRAL = {"temperature": 1.0, "top_p": 1.0, "min_p": 0.0}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _shaping(call: Call) -> list[str]:
    """The distribution settings of a call that raw logprobs do not reflect (temperature != 1,
    top_p < 1, top_k > 0, min_p > 0), as ``key value`` strings."""
    params = {**call.requested_params, **(call.submitted_params or {})}
    out = []
    for key, neutral in _NEUTRAL.items():
        value = _number(params.get(key))
        if value is not None and value != neutral:
            out.append(f"{key} {value:g}")
    top_k = _number(params.get("top_k"))
    if top_k is not None and top_k > 0:
        out.append(f"top_k {top_k:g}")
    return out


def _zero_logprobs(call: Call) -> int:
    """How many of a call's sampled logprobs are exactly 0.0 (p = 1)."""
    values = call.sampled_logprobs
    if values is None or not call.logprobs_aligned or not call.n_sampled:
        return 0
    return int(np.count_nonzero(values == 0.0))


def row_shape(input_len: int | None, mask: Any, logprobs_len: int | None, prompt_len: Any) -> dict[str, Any]:
    """What the training-row checks need of a row (a rollout document's sequence, a trace entry):
    its lengths, whether its mask is all integer 0 / 1, how many prompt positions it trains."""
    values = list(mask) if isinstance(mask, list | tuple) else (mask.tolist() if hasattr(mask, "tolist") else None)
    shape: dict[str, Any] = {"n_input": input_len, "n_logprobs": logprobs_len}
    if values is not None:
        shape["n_mask"] = len(values)
        shape["mask_ok"] = all(type(v) is int and v in (0, 1) for v in values)
        if type(prompt_len) is int and prompt_len >= 0 and shape["mask_ok"]:
            shape["prompt_trained"] = sum(1 for v in values[:prompt_len] if v)
    return shape


def row_findings(shape: dict[str, Any], node_id: str | None, leaf_id: str | None = None) -> list[Finding]:
    """``length_mismatch``, ``invalid_loss_mask`` and ``trainable_prompt`` (FATAL each) for one
    training row, as OpenEnv's ``validate_training_turn`` rejects it: the mask must cover prompt
    plus completion, hold only integer 0 or 1, and train no prompt token."""
    n_input, n_mask, n_lp = shape.get("n_input"), shape.get("n_mask"), shape.get("n_logprobs")
    if n_mask is None:
        return []
    sizes = {n for n in (n_input, n_mask, n_lp) if n is not None}
    if len(sizes) > 1:
        detail = f"input_ids={n_input} loss_mask={n_mask} logprobs={n_lp}: the mask must cover prompt plus completion"
        return [Finding(FATAL, "length_mismatch", detail, node_id=node_id, leaf_id=leaf_id)]
    if not shape.get("mask_ok", True):
        return [Finding(FATAL, "invalid_loss_mask", "loss_mask must hold only integer 0 or 1", node_id, leaf_id)]
    if shape.get("prompt_trained"):
        detail = f"{shape['prompt_trained']} prompt position(s) have loss_mask 1: prompt tokens must stay context"
        return [Finding(FATAL, "trainable_prompt", detail, node_id=node_id, leaf_id=leaf_id)]
    return []


def call_validator_findings(call: Call) -> list[Finding]:
    """The per-call checks: a trace entry's own row, an empty answer, all-certain tokens, a context
    filled, a pinned policy not kept, a change the capture proxy made."""
    out: list[Finding] = []
    node_id = call.node_id
    row = call.claims.get("row")  # a trace entry's own training row (its mask over prompt + completion)
    if isinstance(row, dict):
        out += row_findings(row, node_id)
    message = call.response_message
    if isinstance(message, dict) and not message.get("tool_calls"):
        text = message.get("content")
        if not (text.strip() if isinstance(text, str) else text):
            out.append(
                Finding(
                    WARN,
                    "empty_completion",
                    f"no text and no tool call (finish_reason {call.finish_reason}): the harness has nothing "
                    "to act on (a length cap, a content filter or a stop string)",
                    node_id=node_id,
                )
            )
    zeros = _zero_logprobs(call)
    if zeros >= 2 and zeros == call.n_sampled:
        out.append(
            Finding(
                WARN,
                "certain_tokens",
                f"all {zeros} sampled tokens have logprob 0.0 (p = 1): forced or cached output, not sampled",
                node_id=node_id,
            )
        )
    engine = call.claims.get("engine")
    window = engine.get("max_model_len") if isinstance(engine, dict) else None
    if (
        call.finish_reason == "length"
        and type(window) is int
        and call.prompt_ids is not None
        and call.n_prompt + call.n_sampled >= window
    ):
        out.append(
            Finding(
                WARN,
                "context_budget_exhausted",
                f"prompt {call.n_prompt:,} + sampled {call.n_sampled:,} tokens filled the engine's context window "
                f"({window:,}): the reply was cut by the context, not by max_tokens",
                node_id=node_id,
            )
        )
    options = call.claims.get("capture_options")
    pins = options.get("pin_sampling") if isinstance(options, dict) else None
    if isinstance(pins, dict) and pins:
        sent = call.submitted_params if call.submitted_params is not None else call.requested_params
        broken = [f"{k} {sent.get(k)!r} (pinned {v!r})" for k, v in sorted(pins.items()) if sent.get(k) != v]
        if broken:
            out.append(
                Finding(
                    FATAL,
                    "sampling_policy_changed",
                    "the call was not sent with the pinned sampling policy: " + ", ".join(broken),
                    node_id=node_id,
                )
            )
    changes = call.claims.get("behaviour_changed")
    if isinstance(changes, list) and changes:
        text = "; ".join(str(c) for c in changes[:5])
        out.append(Finding(WARN, "behaviour_changed", f"the capture proxy changed the call: {text}", node_id=node_id))
    return out


def rollout_validator_findings(
    calls: list[Call], topology: Topology, sequences: list[Sequence], document: dict[str, Any] | None
) -> list[Finding]:
    """The per-rollout and per-row checks: roots, forks, empty and certain rows, the rows a
    rollout document carries, raw logprobs, a pinned policy that changed, the engine's tool calling."""
    out: list[Finding] = []
    if calls and not topology.roots:
        out.append(Finding(FATAL, "root_count", f"{len(calls)} calls and no root: the graph has no start"))
    if topology.forks:
        out.append(Finding(INFO, "forks", f"{len(topology.forks)} fork point(s) in the graph"))
    token_trace = any(c.prompt_ids is not None for c in calls)
    zeros = [_zero_logprobs(c) for c in calls]
    for seq in sequences:
        leaf = calls[seq.leaf].node_id
        first = calls[seq.nodes[0]] if seq.nodes else None
        if (
            token_trace
            and first is not None
            and first.n_prompt
            and all(calls[n].prompt_ids is not None for n in seq.nodes)
        ):
            omitted = any(calls[n].claims.get("tokens_omitted") for n in seq.nodes)  # unknown, not empty
            if not omitted and not any(calls[n].n_sampled for n in seq.nodes):
                detail = f"prompt_len={seq.prompt_len} covers the whole row: not one sampled token"
                out.append(Finding(FATAL, "empty_response", detail, node_id=leaf, leaf_id=leaf))
        certain = sum(zeros[n] for n in seq.nodes)
        if certain and seq.n_trainable:
            detail = f"{certain}/{seq.n_trainable} trainable tokens have logprob 0.0 (p = 1.0)"
            out.append(Finding(INFO, "certain_tokens", detail, node_id=leaf, leaf_id=leaf))
    if document is not None:
        for row in document.get("sequences", ()):
            shape = row.get("row")
            if isinstance(shape, dict):
                end: str | None = row["node_ids"][-1] if row.get("node_ids") else None
                out += row_findings(shape, end, end)
    out += _raw_logprob_findings(calls, document)
    out += _pinned_policy_change(calls)
    out += _tool_calling_findings(calls)
    return out


def _raw_logprob_findings(calls: list[Call], document: dict[str, Any] | None) -> list[Finding]:
    """``raw_logprobs`` (FATAL) on every call whose logprobs an engine probe (or its document)
    says are raw while the call was sampled with a shaped distribution."""
    out = []
    for call in calls:
        if call.sampled_logprobs is None or not call.n_sampled or logprobs_mode(call, document) != RAW:
            continue
        shaping = _shaping(call)
        if shaping:
            out.append(
                Finding(
                    FATAL,
                    "raw_logprobs",
                    f"the engine returns RAW (pre-temperature) logprobs and this call sampled with "
                    f"{', '.join(shaping)}: its logprobs are not the distribution its tokens came from, so an "
                    "importance ratio on them is wrong for every token (vLLM: --logprobs-mode processed_logprobs)",
                    node_id=call.node_id,
                )
            )
    return out


def _pinned_policy_change(calls: list[Call]) -> list[Finding]:
    """``sampling_policy_changed`` (FATAL) when calls of one rollout were pinned to different policies."""
    first: tuple[str, str] | None = None
    for call in calls:
        options = call.claims.get("capture_options")
        pins = options.get("pin_sampling") if isinstance(options, dict) else None
        if not isinstance(pins, dict):
            continue
        policy = ", ".join(f"{k}={v!r}" for k, v in sorted(pins.items()))
        if first is None:
            first = (policy, call.node_id)
        elif policy != first[0]:
            detail = f"the pinned sampling policy changed within the rollout: {first[0]} at {first[1]}, {policy} here"
            return [Finding(FATAL, "sampling_policy_changed", detail, node_id=call.node_id)]
    return []


def _tool_calling_findings(calls: list[Call]) -> list[Finding]:
    """``no_tool_calling`` (FATAL) / ``no_tool_call_emitted`` (WARN): tools were offered to an engine
    whose probe found it refuses a tool manifest / answers one in prose (and no call made a tool call)."""
    offered = next((c for c in calls if c.has_tools), None)
    if offered is None:
        return []
    engine = engine_of(offered) or {}
    if engine.get("tool_calling") == "rejected":
        detail = "the engine probe found the engine refuses a tool manifest (tool_choice auto), and this rollout offers tools"
        return [Finding(FATAL, "no_tool_calling", detail, node_id=offered.node_id)]
    emitted = any(isinstance(c.response_message, dict) and c.response_message.get("tool_calls") for c in calls)
    if engine.get("tool_calling") == "no-tool-call" and not emitted:
        detail = (
            "the engine probe found the engine answers a tool manifest in prose, and no call of this rollout made a "
            "tool call: the agent may stall"
        )
        return [Finding(WARN, "no_tool_call_emitted", detail, node_id=offered.node_id)]
    return []
