"""NeMo-RL's splice: each call's prompt keeps the model's own earlier tokens up to the Nth EOS,
then NeMo Gym builds the rows (docs/reconcile.md, "NeMo-RL").

Follows NVIDIA-NeMo/RL at commit 7ea279abfbeb698b092856d0dab61e7cf39bc909:
``nemo_rl/models/generation/openai_server_utils.py`` ``replace_prefix_tokens`` (cut the model's
prefix before its final EOS, find the Nth EOS of the template's prompt where N counts the EOS
ids of the history rendered through the last assistant message, and join the two there),
``nemo_rl/models/generation/vllm/vllm_worker_async.py`` (``required_prefix_token_ids`` is the
prompt + generation of the latest message in the request that carries token ids: the last
assistant reply a model call produced; the spliced ids replace the engine prompt) and
``nemo_rl/environments/nemo_gym.py`` (the rollout's output items become one message log; Gym's
capture path builds them with ``prefix_merging``: rollout_graph.analysis.reconcile.nemo_gym).

A capture has no chat-template renderer, so N is read from the call's own prompt: its EOS ids less
one for each message after the last assistant message (the template closes each message with one). A call whose prompt holds fewer than N EOS ids fails NeMo-RL's assertion: its request
errors, so it and every call that continues it are left out. Tokens sampled after a splice that
changed the prompt were sampled under the other prompt: NeMo-RL trains them, off-policy.
Entry points: :func:`replace_prefix_tokens`, :func:`reconcile_nemo_rl`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from rollout_graph.analysis.reconcile.model import (
    OFF_POLICY,
    OUTPUT,
    Reconciled,
    Segment,
    output_segment,
    prompt_segment,
)
from rollout_graph.analysis.reconcile.nemo_gym import deliver
from rollout_graph.core.messages import canonical
from rollout_graph.core.records import Call
from rollout_graph.core.rollout import Rollout


class SpliceError(AssertionError):
    """``replace_prefix_tokens``' assertion: the Nth EOS is not in the template's ids."""


def replace_prefix_tokens(
    eos: int, model_prefix: np.ndarray, template_prefix_eos: int, template: np.ndarray
) -> tuple[int, int]:
    """Where ``replace_prefix_tokens`` joins the two: ``(model_cut_end, template_cut_start)``; the
    spliced prompt is ``model_prefix[:model_cut_end] + template[template_cut_start:]``.

    ``template_prefix_eos`` is ``template_prefix_token_ids.count(eos)``.

    Raises:
        SpliceError: the template holds fewer EOS ids than that.
    """
    if model_prefix.shape[0] == 0:
        return 0, 0
    cut = model_prefix.shape[0] - 1 if int(model_prefix[-1]) == eos else model_prefix.shape[0]
    positions = np.flatnonzero(template == eos)
    if template_prefix_eos < 1 or positions.shape[0] < template_prefix_eos:
        raise SpliceError(
            f"EOS token #{template_prefix_eos} not found in template_token_ids "
            f"(only found {positions.shape[0]} EOS tokens total)"
        )
    return cut, int(positions[template_prefix_eos - 1])


def eos_from_calls(calls: list[Call]) -> int | None:
    """The id most calls that stopped (``finish_reason`` stop) ended with: the EOS id when no
    tokenizer names it."""
    counts: dict[int, int] = {}
    for c in calls:
        if c.finish_reason == "stop" and c.n_sampled:
            last = int(c.sampled_ids[-1])
            counts[last] = counts.get(last, 0) + 1
    return max(counts, key=lambda t: (counts[t], -t)) if counts else None


def replies_before(calls: list[Call], k: int) -> dict[Any, int]:
    """Each reply (as linking compares messages) of a call with prompt ids before ``k``: the latest call that gave it."""
    replies: dict[Any, int] = {}
    for j in range(k):
        add_reply(replies, calls, j)
    return replies


def add_reply(replies: dict[Any, int], calls: list[Call], j: int) -> None:
    """Note call ``j``'s reply (the latest call with a reply wins)."""
    reply = calls[j].response_message
    if isinstance(reply, dict) and calls[j].prompt_ids is not None:
        replies[canonical(reply, "assistant")] = j


def predecessor(
    calls: list[Call], k: int, parents: list[int | None], replies: dict[Any, int] | None = None
) -> int | None:
    """The call whose prompt + generation NeMo-RL takes as ``required_prefix_token_ids`` for call
    ``k``: the latest assistant message of the request that an earlier call produced (its reply,
    compared as linking compares messages), else the exact token parent. ``replies`` is
    :func:`replies_before` ``k``, when the caller keeps it."""
    messages = calls[k].request_messages
    if messages:
        if replies is None:
            replies = replies_before(calls, k)
        for message in reversed(messages):
            if isinstance(message, dict) and message.get("role") == "assistant":
                found = replies.get(canonical(message, "assistant"))
                if found is not None:
                    return found
        return None
    return parents[k]


def template_prefix_eos(call: Call, template: np.ndarray, prior: Call, eos: int) -> int:
    """``template_prefix_token_ids.count(eos)``: the EOS ids of the history rendered through its last
    assistant message. Read from the call's own prompt: its EOS ids less one for each message after
    that assistant message (the template closes every message with one; the generation prompt has
    none). Without messages: the previous call's prompt EOS ids plus the one closing its reply."""
    messages = call.request_messages or []
    last = next(
        (
            i
            for i in range(len(messages) - 1, -1, -1)
            if isinstance(messages[i], dict) and messages[i].get("role") == "assistant"
        ),
        None,
    )
    if last is None:
        assert prior.prompt_ids is not None
        return int((np.asarray(prior.prompt_ids) == eos).sum()) + 1
    return int((template == eos).sum()) - (len(messages) - 1 - last)


def _slice(segments: list[Segment], start: int, stop: int) -> list[Segment]:
    out: list[Segment] = []
    at = 0
    for s in segments:
        n = s.stop - s.start
        lo, hi = max(start, at), min(stop, at + n)
        if lo < hi:
            out.append(Segment(s.call, s.part, s.start + lo - at, s.start + hi - at, s.mask, s.logprobs, s.provenance))
        at += n
    return out


def _ids(calls: list[Call], segments: list[Segment]) -> np.ndarray:
    parts = []
    for s in segments:
        c = calls[s.call]
        src = c.sampled_ids if s.part == OUTPUT else c.prompt_ids
        assert src is not None
        parts.append(np.asarray(src[s.start : s.stop], dtype=np.int64))
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)


@dataclass(slots=True)
class Splices:
    """Every call's prompt as NeMo-RL's server would send it: over the calls' ids (``composite``),
    as a copy of the call (``spliced``), the calls it refuses and why, the calls it changed, and
    each call's predecessor and EOS count (None where it kept the prompt as it was)."""

    composite: list[list[Segment] | None]
    spliced: list[Call]
    failed: dict[int, str]
    changed: set[int]
    predecessors: list[int | None]
    needed: list[int | None]


def splice(rollout: Rollout, eos: int) -> Splices:
    """``replace_prefix_tokens`` on every call, in arrival order, each after its predecessor."""
    calls = rollout.calls
    parents = list(rollout.topology.parents)
    out = Splices([None] * len(calls), list(calls), {}, set(), [None] * len(calls), [None] * len(calls))
    replies: dict[Any, int] = {}
    for k, call in enumerate(calls):
        if k:
            add_reply(replies, calls, k - 1)
        if call.prompt_ids is None:
            continue
        own = [prompt_segment(k, 0, call.n_prompt)] if call.n_prompt else []
        pred = out.predecessors[k] = predecessor(calls, k, parents, replies)
        if pred is not None and pred in out.failed:
            out.failed[k] = f"continues {calls[pred].node_id}, whose request NeMo-RL's server refused"
            continue
        if pred is None or out.composite[pred] is None:
            out.composite[k] = own
            continue
        prior = calls[pred]
        pred_end = (out.composite[pred] or []) + (
            [output_segment(pred, 0, prior.n_sampled, False)] if prior.n_sampled else []
        )
        template = np.asarray(call.prompt_ids, dtype=np.int64)
        needed = out.needed[k] = template_prefix_eos(call, template, prior, eos)
        try:
            cut, cut_start = replace_prefix_tokens(eos, _ids(calls, pred_end), needed, template)
        except SpliceError as exc:
            out.failed[k] = f"NeMo-RL's server refuses the request: {exc}"
            continue
        segs = _slice(pred_end, 0, cut) + (
            [prompt_segment(k, cut_start, call.n_prompt)] if call.n_prompt > cut_start else []
        )
        ids = _ids(calls, segs)
        if ids.shape[0] == template.shape[0] and np.array_equal(ids, template):
            out.composite[k] = own
            continue
        out.composite[k] = segs
        out.spliced[k] = replace(call, prompt_ids=ids)
        out.changed.add(k)
    return out


def reconcile_nemo_rl(rollout: Rollout, eos_token_id: int | None = None) -> Reconciled:
    """NeMo-RL's rows for one rollout (docs/reconcile.md, "NeMo-RL").

    Args:
        eos_token_id: the tokenizer's EOS id; None reads it from the calls (:func:`eos_from_calls`).
    """
    calls = rollout.calls
    eos = eos_token_id if eos_token_id is not None else eos_from_calls(calls)
    params: dict[str, Any] = {"eos_token_id": eos, "eos_from": "given" if eos_token_id is not None else "calls"}
    if eos is None:
        return Reconciled("nemo-rl", params, [], [], {}, error="no EOS id: give the tokenizer (no call stopped on one)")
    done = splice(rollout, eos)
    # a call sampled after a prompt it did not see: its spliced ids differ from its own (a call that
    # continues a spliced one carries the splice in its prefix, so it differs too)
    off_context = done.changed

    def segments_of(chain: list[int]) -> list[Segment]:
        out: list[Segment] = []
        prev_end = 0
        for step, k in enumerate(chain):
            c = done.spliced[k]
            start = 0 if step == 0 else prev_end
            out.extend(_as_context(_slice(done.composite[k] or [], start, c.n_prompt)))
            if c.n_sampled:
                seg = output_segment(k, 0, c.n_sampled, True)
                if k in off_context:
                    seg = Segment(seg.call, seg.part, seg.start, seg.stop, 1, True, OFF_POLICY)
                out.append(seg)
            prev_end = c.n_prompt + c.n_sampled
        return out

    result = deliver(rollout, done.spliced, "prefix_merging", "nemo-rl", segments_of, params, done.failed)
    result.notes["spliced"] = [calls[k].node_id for k in sorted(done.changed)]
    result.notes["refused"] = {calls[k].node_id: why for k, why in done.failed.items()}
    for k in sorted(done.changed):
        result.events.append(("spliced", [k], calls[k].n_sampled, k))
    return result


def _as_context(segments: list[Segment]) -> list[Segment]:
    """Prompt slices as they stand in a row: every id is context (mask 0), sampled ids kept in place."""
    return [Segment(s.call, s.part, s.start, s.stop, 0, False, None) for s in segments]
