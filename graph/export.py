"""Analysed rollouts -> other formats: OpenEnv-style rollout documents."""

from __future__ import annotations

from typing import Any

from graph.rollout import Rollout


def rollout_document(rollout: Rollout, include_discarded: bool = True, include_messages: bool = True) -> dict[str, Any]:
    """The rollout as ``{"turns": [...], "sequences": [...]}`` (docs/formats.md, rollout documents)."""
    turns = []
    for i, call in enumerate(rollout.calls):
        turn: dict[str, Any] = {
            "node_id": call.node_id,
            "n_prompt": call.n_prompt,
            "n_sampled": call.n_sampled,
            "finish_reason": call.finish_reason,
            "model": call.model,
            "discarded": i in rollout.topology.discarded,
        }
        if include_messages:
            turn["messages"] = call.request_messages
            turn["tools"] = call.tools
            turn["response_message"] = call.response_message
        turns.append(turn)
    sequences = []
    for seq in rollout.sequences:
        if seq.role == "discarded" and not include_discarded:
            continue
        tokens = rollout.tokens(seq)
        sequences.append(
            {
                "leaf_id": rollout.calls[seq.leaf].node_id,
                "node_ids": [rollout.calls[k].node_id for k in seq.nodes],
                "role": seq.role,
                "trainable": seq.n_trainable > 0,
                "input_ids": tokens.input_ids.tolist(),
                "loss_mask": tokens.loss_mask.tolist(),
                "logprobs": tokens.logprobs.tolist(),
            }
        )
    fatal = [f.as_dict() for f in rollout.findings if f.level == "FATAL"]
    return {
        "session_id": rollout.session_id,
        "capture_level": "tokens",
        "rollout_type": "agentic" if any(c.has_tools for c in rollout.calls) else "chat",
        "include_discarded": include_discarded,
        "include_messages": include_messages,
        "validation": {"ok": not fatal, "fatal": fatal},
        "turns": turns,
        "sequences": sequences,
    }
