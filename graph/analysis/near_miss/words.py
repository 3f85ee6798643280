"""A near miss in words: the one sentence every surface prints, the JSON contract's objects, and
the findings the pass adds.

- :func:`describe`: the sentence ``tail``, ``explain``, ``inspect --json`` (``why``) and the app
  print, always worded from the LATER call's side ("c20 re-sends c04's prompt"), the evidence in
  brackets.
- :func:`dropped_words`: why an earlier call looks dropped, for ``replaced_by`` ("c04 is
  discarded: c20 re-sent its prompt").
- :func:`near_miss_json` / :func:`replaced_json`: the ``near_miss`` and ``replaced_by`` objects of
  the JSON contract (docs/cli.md), with each fact the kind was read from.
- :func:`rewrite_finding`, :func:`retokenized_finding`: WARN ``history_rewritten`` and
  ``retokenized_replay`` (FATAL past ``RETOKENIZED_FATAL_SHARE``).
"""

from __future__ import annotations

from rollout_graph.analysis.near_miss.ids import prompt_of, replay_alignment
from rollout_graph.analysis.near_miss.search import replay_chains
from rollout_graph.core.records import FATAL, WARN, Call, Finding, NearMiss
from rollout_graph.core.types import (
    COMPACTION,
    NEW_CONVERSATION,
    PARALLEL_SAMPLE,
    REJECTED,
    RESUMED,
    RETOKENIZED,
    RETRY,
    REWRITTEN,
    SIDE_CALL,
    SPAWNED,
    SUBAGENT,
    UNKNOWN,
)

RETOKENIZED_FATAL_SHARE = 0.25  # a replay changing more of the reply's ids than this is FATAL

LABELS = {
    PARALLEL_SAMPLE: "parallel sample",
    RETRY: "retry",
    RETOKENIZED: "broken replay (re-tokenized)",
    REWRITTEN: "broken replay (rewritten)",
    REJECTED: "rejected",
    COMPACTION: "compaction",
    RESUMED: "resumed",
    NEW_CONVERSATION: "new conversation",
    SUBAGENT: "subagent",
    SIDE_CALL: "side call",
    UNKNOWN: "unknown cause",
}


def describe(calls: list[Call], miss: NearMiss) -> str:
    """The one sentence every surface prints for a near miss (``tail``, ``inspect --json``'s
    ``why``, ``explain``, the app): its kind, worded from the later call's side, and the evidence."""
    e, l_ = calls[miss.earlier], calls[miss.later]
    earlier, later, at = e.node_id, l_.node_id, miss.common_prefix
    kept = max(0, min(e.n_sampled, at - e.n_prompt))
    if miss.kind == PARALLEL_SAMPLE:
        text = f"{later} is another sample of {earlier}'s request"
    elif miss.kind == RETRY:
        text = f"{later} re-sends {earlier}'s prompt"
    elif miss.kind == RETOKENIZED:
        text = f"{later} re-tokenizes {earlier}'s reply: the same text, other ids from token {at:,}"
        if miss.where == "sampled":
            found = replay_alignment(e, l_, at)
            text += f" ({found.changed:,} of {e.n_sampled:,} sampled tokens change ids"
            if found.segments:
                a, b, c, d = found.segments[0]
                ids = prompt_of(l_)
                sampled = "|".join(str(t) for t in e.sampled_ids[a : max(b, a + 1)][:8].tolist())
                replayed = "|".join(str(t) for t in ids[c : max(d, c + 1)][:8].tolist())
                text += f"; ids {sampled} became {replayed}"
            text += ")"
    elif miss.kind == REWRITTEN:
        if miss.where == "prompt":
            text = f"{later} replays {earlier}'s reply rewritten (the ids break at token {at:,}, inside {earlier}'s prompt)"
        elif miss.where == "sampled":
            text = f"{later} replays {earlier}'s reply cut at token {at:,} ({kept:,} of {e.n_sampled:,} sampled tokens kept)"
        else:
            text = f"{later} replays {earlier}'s reply, then breaks at token {at:,} ({kept:,} of {e.n_sampled:,} sampled tokens kept)"
    elif miss.kind == REJECTED:
        text = f"{later} asks again without {earlier}'s reply"
    elif miss.kind == COMPACTION:
        text = f"{later} compacts {earlier}'s history: {at:,} tokens shared, then replaced"
    elif miss.kind == RESUMED:
        text = f"{later} resumes {earlier}'s conversation ({at:,} tokens shared)"
    elif miss.kind == NEW_CONVERSATION and any(key == "conversation_over" for key, _ in miss.facts):
        text = f"{later} begins a new conversation after {earlier}'s ended"
    elif miss.kind == NEW_CONVERSATION:
        text = f"{later} begins the main conversation after {earlier}"
    elif miss.kind == SUBAGENT and miss.rule == SPAWNED:
        text = f"{later} is the subagent {earlier}'s tool call started"
    elif miss.kind == SUBAGENT:
        text = f"{later} starts a conversation of its own beside {earlier}'s"
    elif miss.kind == SIDE_CALL:
        text = f"{later} is a single call of its own beside {earlier}'s conversation"
    else:
        text = f"{later} breaks from {earlier} after {at:,} tokens"
    evidence = f" [{miss.evidence}]" if miss.evidence else ""
    return f"{LABELS.get(miss.kind, miss.kind)}: {text}{evidence}"


def dropped_words(calls: list[Call], miss: NearMiss, discarded: dict[int, int]) -> str:
    """Why ``miss.earlier`` looks dropped, from the later call that replaced it (``replaced_by``)."""
    e, l_ = calls[miss.earlier].node_id, calls[miss.later].node_id
    state = f"{e} is discarded" if miss.earlier in discarded else f"{e} was not continued"
    if miss.kind == PARALLEL_SAMPLE:
        return f"{state}: {l_} is another sample of the same request"
    if miss.kind == RETRY:
        return f"{state}: {l_} re-sent its prompt"
    if miss.kind in (RETOKENIZED, REWRITTEN):
        how = "re-tokenized" if miss.kind == RETOKENIZED else "rewritten"
        return f"{e} only looks dropped: {l_} replays its reply ({how}), so its text lives on in {l_}'s history"
    if miss.kind == REJECTED:
        return f"{state}: {l_} asked again without its reply (the reply was rejected)"
    if miss.kind == COMPACTION:
        return f"{state}: {l_} compacted its history"
    if miss.kind == RESUMED:
        return f"{state}: {l_} resumed its conversation"
    if miss.kind == SUBAGENT and miss.rule == SPAWNED:
        return f"{e} only looks dropped: {l_} is the subagent its tool call started (the same prompt)"
    continued = discarded.get(miss.earlier)
    if continued is not None:
        return f"{state}: {calls[continued].node_id} continued instead ({LABELS.get(miss.kind, miss.kind)} of it)"
    return f"{state}: {l_} came after it ({LABELS.get(miss.kind, miss.kind)})"


def near_miss_json(calls: list[Call], miss: NearMiss) -> dict:
    """The ``near_miss`` object of ``inspect --json`` (docs/cli.md): ``node_id`` names the earlier
    call (it arrived before this one); ``facts`` lists what the kind was read from."""
    return {
        "node_id": calls[miss.other].node_id,
        "common_prefix": miss.common_prefix,
        "kept": round(miss.kept, 4),
        "kind": miss.kind,
        "where": miss.where,
        "text_checked": miss.text_checked,
        "earlier_id": calls[miss.earlier].node_id,
        "later_id": calls[miss.later].node_id,
        "evidence": miss.evidence,
        "rule": miss.rule,
        "facts": [{"fact": code, "says": words} for code, words in miss.facts],
        "why": describe(calls, miss),
    }


def replaced_json(calls: list[Call], miss: NearMiss, discarded: dict[int, int]) -> dict:
    """The ``replaced_by`` object of ``inspect --json`` (docs/cli.md): ``node_id`` names the LATER
    call that replaced this one, ``why`` is that call's sentence, ``dropped`` why this one looks
    dropped."""
    return {**near_miss_json(calls, miss), "dropped": dropped_words(calls, miss, discarded)}


def rewrite_finding(calls: list[Call], found: dict[int, NearMiss], discarded: dict[int, int]) -> Finding | None:
    """WARN ``history_rewritten``: how many calls replayed an edited assistant turn, and how many
    sampled tokens that left only in discarded rows (never trained as the agent's work)."""
    rewritten = sorted((m for m in found.values() if m.kind == REWRITTEN), key=lambda m: m.later)
    if not rewritten:
        return None
    lost = sum(calls[m.earlier].n_sampled for m in rewritten if m.earlier in discarded)
    looks = sum(1 for m in rewritten if m.earlier in discarded)
    return Finding(
        WARN,
        "history_rewritten",
        f"{len(rewritten)} broken replays: calls replayed a rewritten reply of the model ({len(rewritten) - looks} "
        f"became new roots, {looks} made the original call look discarded); "
        f"{lost:,} sampled tokens are left only in discarded rows",
        node_id=calls[rewritten[0].later].node_id,
    )


def retokenized_finding(calls: list[Call], found: dict[int, NearMiss]) -> Finding | None:
    """``retokenized_replay``: the harness replayed the model's text and the engine tokenized it
    again with other ids (train/inference skew). WARN; FATAL when a replay changes the ids of more
    than ``RETOKENIZED_FATAL_SHARE`` of the reply's sampled tokens."""
    misses = sorted((m for m in found.values() if m.kind == RETOKENIZED), key=lambda m: m.later)
    if not misses:
        return None
    changed = total = 0
    worst = 0.0
    for m in misses:
        earlier = calls[m.earlier]
        n = earlier.n_sampled
        c = replay_alignment(earlier, calls[m.later], m.common_prefix).changed if m.where == "sampled" else 0
        changed, total = changed + c, total + n
        worst = max(worst, c / n if n else 0.0)
    chains = replay_chains(calls, found)
    longest = f"; the longest chain has {len(chains[0])} calls" if chains and len(chains[0]) > 2 else ""
    level = FATAL if worst > RETOKENIZED_FATAL_SHARE else WARN
    first = misses[0]
    return Finding(
        level,
        "retokenized_replay",
        f"{len(misses)} calls replay the model's own reply as text that the engine tokenized again with other "
        f"ids: {changed:,} of the {total:,} replayed sampled tokens change ids (first: {calls[first.later].node_id} "
        f"re-tokenizes {calls[first.earlier].node_id}'s reply at token {first.common_prefix:,}){longest}",
        node_id=calls[first.later].node_id,
    )
