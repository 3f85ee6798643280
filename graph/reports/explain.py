"""`rollout-graph explain`: the audit tools as text (the app's Audit panel, in a terminal)."""

from __future__ import annotations

from collections import Counter

from rollout_graph.analysis.breaks import (
    broken_replays,
    fix_for,
    prefix_breaks,
    reason_for,
    replay_details,
    token_boundaries,
)
from rollout_graph.analysis.decode import Decoder, TokenizerDecoder
from rollout_graph.analysis.forks import fork_diffs
from rollout_graph.analysis.near_miss import (
    BROKEN_REPLAYS,
    RETOKENIZED,
    RETRY,
    NearMiss,
    describe,
    end_ids,
    replay_chains,
    replayed,
)
from rollout_graph.analysis.origin import HARNESS, context_origin, text_origin
from rollout_graph.analysis.retokenize import retokenize
from rollout_graph.analysis.token_flow import lowest_tokens, token_flows
from rollout_graph.core.rollout import Rollout
from rollout_graph.reports.summary import call_tokens_text, row_tokens_text

CONTEXT_TOKENS = 6


def _flows(rollout: Rollout) -> list[str]:
    head = f"  {'scope':<18}{'calls':>6}{'sampled':>9}{'trainable':>10}{'discarded':>11}{'never trainable':>16}{'context':>9}{'inherited':>11}"
    rows = [
        f"  {f.label[:18]:<18}{f.n_calls:>6}{f.sampled:>9,}{f.sampled_trained:>10,}{f.sampled_discarded:>11,}"
        f"{f.sampled_untrainable:>16,}{f.context:>9,}{f.inherited:>11,}"
        for f in token_flows(rollout)
    ]
    return [
        "where the tokens went",
        f"  {row_tokens_text(rollout.stats)}  (summed over the training rows: a call in several rows counts in each)",
        f"  {call_tokens_text(rollout.stats)}  (each call counted once: the table below)",
        "  columns, each call once: trainable = trainable tokens (calls) · discarded = discarded tokens (sampled in"
        " discarded calls)",
        "    · never trainable = sampled, mask 0 · context = context tokens (calls), the mask-0 tokens a call adds"
        " · inherited = inherited tokens",
        head,
        *rows,
    ]


def _counts(rollout: Rollout) -> list[str]:
    """The headline counts; each line counts calls of one kind, and the parts add up."""
    s = rollout.stats
    misses, discarded = rollout.near_misses, rollout.topology.discarded
    by_kind = Counter(_drop_kind(rollout, d) for d in discarded)
    replays = [m for m in misses.values() if m.kind in BROKEN_REPLAYS]
    left = sum(1 for m in replays if m.node in discarded or m.earlier in discarded)
    retokenized = sum(1 for m in replays if m.kind == RETOKENIZED)
    others = ", ".join(f"{n} {kind.replace('_', ' ')}" for kind, n in sorted(by_kind.items()) if kind != RETRY)
    lines = [
        "discarded calls and broken replays",
        f"  discarded calls (a sibling continued): {s['n_discarded']}"
        + (f" ({by_kind[RETRY]} retries, {others})" if others else ""),
        f"  retries (discarded calls the harness re-sent with the same prompt): {s['n_discarded_retries']}",
        f"  broken replays (the model's own reply replayed so that the token prefix broke): {len(replays)}"
        + (f", {retokenized} of them re-tokenized (same text, other ids)" if retokenized else "")
        + (f"; {left} of them involve a discarded call" if left else ""),
        f"  unfinished attempts (sibling attempts none continued, not even in text): {s['n_unfinished']}",
    ]
    return lines


def _drop_kind(rollout: Rollout, d: int) -> str:
    """Why a discarded call was dropped, as a kind: the later call that replaced it, else the
    earlier call it re-sent or replayed, else a retry (the exact rules: an identical-prompt sibling)."""
    miss = rollout.replaced_by.get(d) or rollout.near_misses.get(d)
    return RETRY if miss is None else miss.kind


def _boundaries(rollout: Rollout, miss: NearMiss, decoder: Decoder) -> str:
    if isinstance(decoder, TokenizerDecoder):
        sampled, replayed_ = token_boundaries(rollout, miss, decoder)
        return f"sampled {'|'.join(sampled)!r} vs replayed {'|'.join(replayed_)!r}"
    d = replay_details(rollout, miss)
    return f"sampled ids {d.sampled} vs replayed ids {d.replayed} (no tokenizer: give --tokenizer to decode them)"


def _miss_lines(
    rollout: Rollout, node: int, miss: NearMiss, reason: str, fix: str | None, decoder: Decoder
) -> list[str]:
    calls = rollout.calls
    earlier, later = calls[miss.earlier], calls[miss.later]
    at = miss.common_prefix
    if miss.kind == RETRY:
        return [f"  {calls[node].node_id}: {reason}", f"      {describe(calls, miss)}"]
    lines = [f"  {calls[node].node_id}: {reason}; nearly continued {calls[miss.other].node_id}, {at:,} tokens shared"]
    lines.append(f"      {describe(calls, miss)}")
    if miss.kind == RETOKENIZED:
        lines.append(f"      same text, other tokens: {_boundaries(rollout, miss, decoder)}")
    else:
        removed = decoder.text(end_ids(earlier)[at : at + CONTEXT_TOKENS * 10])[:60]
        replayed_ids = later.prompt_ids if later.prompt_ids is not None else end_ids(later)
        inserted = decoder.text(replayed_ids[at : at + CONTEXT_TOKENS * 4])[:60]
        before = decoder.text(replayed_ids[max(0, at - CONTEXT_TOKENS) : at])
        lines.append(f"      before {before!r} | removed {removed!r} | inserted {inserted!r}")
    if fix:
        lines.append(f"      fix: {fix}")
    return lines


def _breaks(rollout: Rollout, decoder: Decoder) -> list[str]:
    lines = ["why it split"]
    for b in prefix_breaks(rollout):
        if b.miss is None:
            lines.append(f"  {rollout.calls[b.root].node_id}: {b.reason}")
        else:
            lines += _miss_lines(rollout, b.root, b.miss, b.reason, b.fix, decoder)
    if len(lines) == 1:
        lines.append("  one root: the rollout never split")
    roots = set(rollout.topology.roots)
    replays = [m for m in broken_replays(rollout) if m.node not in roots]
    if replays:
        lines.append("broken replays inside the graph (a discarded call, or a sibling that replays another's reply)")
        for m in replays:
            lines += _miss_lines(rollout, m.node, m, reason_for(m), fix_for(rollout, m), decoder)
    chains = [c for c in replay_chains(rollout.calls, rollout.near_misses) if len(c) > 2]
    if chains:
        lines.append("re-tokenized replay chains (each call replays the reply of the one before, as text)")
        for chain in chains:
            names = " -> ".join(rollout.calls[k].node_id for k in chain)
            lines.append(f"  {names}: one conversation of {len(chain)} calls, split by re-tokenization")
    return lines


def _forks(rollout: Rollout, decoder: Decoder) -> list[str]:
    """Rivals are siblings with identical prompts (the same request sampled again); a sibling with
    another prompt is named with its near-miss kind, never compared token by token."""
    lines = ["forks and retries (rivals: siblings with identical prompts)"]
    calls = rollout.calls
    for fork in rollout.topology.forks:
        diffs = [d for d in fork_diffs(rollout, fork, same_prompt_only=True)]
        for d in diffs:
            kept = f"continued: {calls[d.continued].node_id}" if d.continued is not None else "neither continued"
            if d.divergence is None:
                what = "identical samples"
            else:
                a = "—" if d.original_token is None else f"{decoder.text([d.original_token])!r} ({d.original_logprob})"
                b = "—" if d.other_token is None else f"{decoder.text([d.other_token])!r} ({d.other_logprob})"
                top = {True: "in", False: "not in", None: "no top-k for"}[d.other_in_original_top_k]
                what = f"first divergence at sampled token {d.divergence}: {a} vs {b}; {top} the original's top-k"
            miss = rollout.near_misses.get(max(d.other, d.original))
            said = f" — {describe(calls, miss)}" if miss is not None and miss.kind == RETRY else ""
            lines.append(
                f"  {calls[d.parent].node_id}: {calls[d.original].node_id} vs {calls[d.other].node_id} ({kept}): {what}{said}"
            )
        rivals = {d.original for d in diffs} | {d.other for d in diffs}
        unfinished = {m for group in rollout.topology.unfinished for m in group} - replayed(rollout.near_misses)
        printed: set[tuple[int, int]] = set()
        for child in sorted(rollout.topology.children[fork]):
            miss = rollout.near_misses.get(child) or rollout.replaced_by.get(child)
            if child in rivals:
                continue
            if miss is not None:
                if (miss.earlier, miss.later) in printed:
                    continue  # the sibling's line already named this break
                printed.add((miss.earlier, miss.later))
                other = miss.earlier if miss.later == child else miss.later
                lines.append(
                    f"  {calls[fork].node_id}: {calls[child].node_id} is no rival of {calls[other].node_id} "
                    f"(different prompts): {describe(calls, miss)}"
                )
            else:
                first = child == min(rollout.topology.children[fork])
                state = (
                    "the first branch, continued" if first and rollout.topology.children[child]
                    else "continued" if rollout.topology.children[child]
                    else "an unfinished attempt (none of its siblings continued)" if child in unfinished
                    else "a leaf"
                )  # fmt: skip
                lines.append(f"  {calls[fork].node_id}: {calls[child].node_id} has a prompt of its own: {state}")
    if not rollout.topology.forks:
        lines.append("  no forks")
    return lines


def _lowest(rollout: Rollout, decoder: Decoder) -> list[str]:
    return ["least likely sampled tokens"] + [
        f"  {rollout.calls[t.node].node_id} sampled #{t.position}: {decoder.text([t.token_id])!r} logprob {t.logprob:.4f}"
        for t in lowest_tokens(rollout, 10)
    ]


def _retokenize(rollout: Rollout, decoder: Decoder) -> list[str]:
    if not isinstance(decoder, TokenizerDecoder):
        return ["retokenization: skipped (no tokenizer; give --tokenizer)"]
    found = retokenize(rollout, decoder)
    if not found:
        return ["retokenization: every prompt survives decode -> encode"]
    lines = [f"retokenization: {len(found)} calls' prompts do not come back identical"]
    for m in found:
        lines.append(
            f"  {rollout.calls[m.node].node_id} at {m.position}: recorded {m.original} {decoder.text(m.original)!r} -> re-encoded {m.reencoded} {decoder.text(m.reencoded)!r}"
        )
    return lines


def origin_lines(rollout: Rollout, node: int, decoder: Decoder | None = None) -> list[str]:
    """Where each token of the call's prompt came from: sampled earlier by the policy (exact token
    origin), the policy's text re-inserted by the harness (by decoded text), or the harness."""
    source, _ = context_origin(rollout, node)
    by = Counter(source.tolist())
    harness = by.pop(HARNESS, 0)
    sampled = ", ".join(f"{rollout.calls[k].node_id} {n:,}" for k, n in sorted(by.items()))
    lines = [
        f"origin of {rollout.calls[node].node_id}'s prompt ({source.shape[0]:,} tokens): "
        f"{source.shape[0] - harness:,} sampled earlier by the policy ({sampled or 'none'}), {harness:,} inserted by the harness"
    ]
    if decoder is None or not isinstance(decoder, TokenizerDecoder):
        lines.append("  policy text re-inserted by the harness: not checked (no tokenizer; give --tokenizer)")
        return lines
    texts = Counter(text_origin(rollout, node, decoder).tolist())
    texts.pop(HARNESS, None)
    reinserted = sum(texts.values())
    named = ", ".join(f"{rollout.calls[k].node_id} {n:,}" for k, n in sorted(texts.items()))
    lines.append(
        f"  of those inserted by the harness, {reinserted:,} are policy text re-inserted by the harness"
        f" ({named or 'none'}): its decoded text equals what that call sampled"
    )
    return lines


def explain_text(rollout: Rollout, decoder: Decoder) -> str:
    """Every audit section for one rollout, as text."""
    sections = [
        _flows(rollout),
        _counts(rollout),
        _breaks(rollout, decoder),
        _forks(rollout, decoder),
        _lowest(rollout, decoder),
        _retokenize(rollout, decoder),
    ]
    out = [f"session {rollout.session_id} · decoded with {decoder.label}"]
    for section in sections:
        out += ["", *section]
    return "\n".join(out) + "\n"
