"""Findings triage: one group per (level, code) with a one-line explanation and its calls.

The explanations say what a finding means for training, in one line each; the decisions behind
them are in docs/semantics.md (Findings).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rollout_graph.core.records import LEVELS, Finding
from rollout_graph.core.rollout import Rollout
from rollout_graph.core.types import Level

EXPLANATIONS = {
    "no_prompt_ids": "The call carries no prompt token ids, so it cannot be linked or trained by token.",
    "invalid_token_id": "A token id is not a non-negative integer; the position is kept as -1.",
    "invalid_logprob": "A logprob is null, not a number or infinite; the call's sampled tokens are not trained.",
    "positive_logprob": "A logprob is above 0, which no probability can have; the call is not trained.",
    "logprob_misalign": "The logprobs do not line up one per sampled token; the call is not trained.",
    "no_logprobs": "Sampled tokens without logprobs cannot be trained with importance weights.",
    "no_sampled_ids": "The call records no sampled token ids: there is nothing to train on.",
    "truncated_turn": "Generation stopped at the length limit (finish_reason length): the call's reply is cut off.",
    "token_strings": "Logprob tokens are named by their text, not token_id:N: alternatives are known by text only.",
    "sampling_neutralised": "The engine received different sampling params than the harness asked for.",
    "sampling_changed": "The sampling distribution (temperature, top_p, ...) changed within the rollout.",
    "degenerate_rollout": "An agentic rollout with a single call: nothing links, nothing to learn across calls.",
    "per_turn_roots": "Every call is its own root: no call extends another's tokens (re-tokenized history?).",
    "multiple_roots": "More than one conversation root: subagents, side calls, compactions or a broken replay.",
    "discarded_turns": "Discarded calls: a sibling continued instead (a retry only if the same prompt was re-sent).",
    "masked_has_logprob": "A rollout document gives logprobs to tokens it masks out of training.",
    "nothing_trainable": "An agent sequence has no trainable token.",
    "malformed_field": "A field has the wrong type and was ignored.",
    "duplicate_node_id": "Two records share a call id; the later one was renamed.",
    "document_disagrees": "The rollout document's edges, roles or counts differ from the analysis.",
    "history_rewritten": "Broken replays: the harness rewrote the model's own replies, so prefixes broke into new roots.",
    "retokenized_replay": (
        "Broken replays (re-tokenized): the harness replayed the model's text unchanged, but the engine "
        "tokenized it again with other ids, the train/inference skew: replay token ids, not text."
    ),
    "document_invalid_parent": "A rollout document names an impossible parent (itself, a missing node, a cycle); it was dropped.",
    "document_omits_tokens": "A rollout document's turn is in none of its rows (exported without discarded rows): placed by its claims.",
    "document_validation": "The rollout document's writer found a FATAL problem itself and refused to train this rollout.",
    "logprob_mismatch": "The trainer's logprob for a sampled token differs from the engine's by more than the threshold.",
    "signals_misaligned": "A signals row does not match the training row it names; its signals were ignored.",
    "unfinished_attempts": (
        "Sibling attempts none of which continued, not even in text: each becomes a training row unless left out."
    ),
    # OpenEnv's capture validators (docs/semantics.md, Findings), under their names
    "length_mismatch": "A training row's loss mask does not cover prompt plus completion; the row is refused.",
    "invalid_loss_mask": "A training row's loss mask holds something other than integer 0 or 1; the row is refused.",
    "trainable_prompt": "A training row trains prompt tokens, which must stay context; the row is refused.",
    "empty_completion": "The reply has no text and no tool call: the harness had nothing to act on.",
    "empty_response": "A training row without one sampled token: nothing to train.",
    "certain_tokens": "Sampled tokens with logprob 0 (p = 1): all of a call's means forced or cached output.",
    "root_count": "The graph has calls but no root.",
    "forks": "Fork points: calls that two or more later calls continued.",
    "context_budget_exhausted": "The reply was cut because prompt plus output filled the engine's context window.",
    "sampling_policy_changed": "The call was not sent with the sampling policy pinned for the capture.",
    "raw_logprobs": "Raw (pre-temperature) logprobs at a shaped temperature: not the sampled distribution's.",
    "no_tool_calling": "The engine refuses a tool manifest, and this rollout offers tools.",
    "no_tool_call_emitted": "The engine answers tool manifests in prose, and no call here made a tool call.",
    "behaviour_changed": "The capture proxy changed the call (another model than the harness asked for).",
}


def explanation(code: str) -> str:
    """The one-line explanation of a finding code (a generic line for an unknown code)."""
    return EXPLANATIONS.get(code, "See the finding's detail.")


@dataclass(slots=True)
class FindingGroup:
    """Every finding of one level and code in a rollout."""

    level: Level
    code: str
    findings: list[Finding] = field(default_factory=list)
    nodes: list[int] = field(default_factory=list)  # arrival indices of the calls named, in order, once each

    @property
    def explanation(self) -> str:
        """One line: what this code means."""
        return explanation(self.code)


def finding_groups(rollout: Rollout, most_severe_first: bool = True) -> list[FindingGroup]:
    """Groups by (level, code), by level (FATAL first unless ``most_severe_first`` is False), then
    the largest group first, then code."""
    groups: dict[tuple[str, str], FindingGroup] = {}
    for f in rollout.findings:
        group = groups.setdefault((f.level, f.code), FindingGroup(f.level, f.code))
        group.findings.append(f)
        if f.node_id is not None:
            i = rollout.index_of(f.node_id)
            if i not in group.nodes:
                group.nodes.append(i)
    for group in groups.values():
        group.nodes.sort()
    rank = {level: k for k, level in enumerate(LEVELS)}
    sign = 1 if most_severe_first else -1
    return sorted(groups.values(), key=lambda g: (sign * rank.get(g.level, len(LEVELS)), -len(g.findings), g.code))
