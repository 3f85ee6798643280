"""A readable transcript of one training sequence: each call's context span, then its sampled span."""

from __future__ import annotations

from rollout_graph.analysis.decode import Decoder
from rollout_graph.core.roles import main_sequence
from rollout_graph.core.rollout import Rollout
from rollout_graph.core.sequences import Sequence


def default_sequence(rollout: Rollout) -> Sequence:
    """The sequence a reader wants first: the agent row with the most trainable tokens."""
    return main_sequence(rollout.sequences)


def sequence_through(rollout: Rollout, node_id: str) -> Sequence:
    """The first sequence whose path contains the node (for a leaf, its own)."""
    index = rollout.index_of(node_id)
    return next(s for s in rollout.sequences if index in s.nodes)


def _rule(label: str, width: int = 78) -> str:
    return f"── {label} " + "─" * max(3, width - len(label) - 4)


def transcript(rollout: Rollout, seq: Sequence, decoder: Decoder) -> str:
    """A sequence as readable text: each call's own context and sampled tokens, decoded, with what is trained."""
    leaf = rollout.calls[seq.leaf]
    lines = [
        f"session {rollout.session_id} · sequence to {leaf.node_id} ({seq.role}, {seq.n_calls} calls, "
        f"{seq.n_trainable:,} trainable tokens)",
        f"decoded with {decoder.label}",
    ]
    for k in seq.nodes:
        call = rollout.calls[k]
        start = rollout.context_start(k)
        context = call.prompt_ids[start:] if call.prompt_ids is not None else None
        if context is not None and context.shape[0]:
            lines += ["", _rule(f"{call.node_id} · context · {context.shape[0]} tokens"), decoder.text(context)]
        if call.n_sampled:
            trained = "trained" if rollout.trainable[k] else "NOT trained"
            label = f"{call.node_id} · sampled · {call.n_sampled} tokens · {trained} · finish {call.finish_reason}"
            lines += ["", _rule(label), decoder.text(call.sampled_ids)]
    return "\n".join(lines) + "\n"
