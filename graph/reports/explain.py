"""`rollout-graph explain`: the audit tools as text (the app's Audit panel, in a terminal)."""

from __future__ import annotations

from collections import Counter

from graph.analysis.breaks import prefix_breaks
from graph.analysis.decode import Decoder, TokenizerDecoder
from graph.analysis.forks import fork_diffs
from graph.analysis.origin import HARNESS, context_origin
from graph.analysis.retokenize import retokenize
from graph.analysis.token_flow import lowest_tokens, token_flows
from graph.core.rollout import Rollout

CONTEXT_TOKENS = 6


def _flows(rollout: Rollout) -> list[str]:
    head = f"  {'scope':<18}{'calls':>6}{'sampled':>9}{'trained':>9}{'discarded':>11}{'untrained':>11}{'context':>9}{'inherited':>11}"
    rows = [
        f"  {f.label[:18]:<18}{f.n_calls:>6}{f.sampled:>9,}{f.sampled_trained:>9,}{f.sampled_discarded:>11,}"
        f"{f.sampled_untrainable:>11,}{f.context:>9,}{f.inherited:>11,}"
        for f in token_flows(rollout)
    ]
    return [
        "where the tokens went (sampled: trained / in discarded calls / never trained; prompt: added / inherited)",
        head,
        *rows,
    ]


def _breaks(rollout: Rollout, decoder: Decoder) -> list[str]:
    lines = ["why it split"]
    for b in prefix_breaks(rollout) or ():
        root = rollout.calls[b.root]
        if b.miss is None:
            lines.append(f"  {root.node_id}: {b.reason}; shares no token with any earlier call")
            continue
        earlier, later = rollout.calls[b.miss.earlier], rollout.calls[b.miss.later]
        at = b.miss.common_prefix
        assert earlier.prompt_ids is not None and later.prompt_ids is not None, "near misses compare prompt ids"
        removed = (
            decoder.text(list(earlier.prompt_ids[at:]) + list(earlier.sampled_ids))[:60]
            if at < earlier.n_prompt
            else decoder.text(earlier.sampled_ids[at - earlier.n_prompt :])[:60]
        )
        inserted = decoder.text(later.prompt_ids[at : at + CONTEXT_TOKENS * 4])[:60]
        lines.append(
            f"  {root.node_id}: {b.reason}; nearly continued {rollout.calls[b.miss.other].node_id}, {at:,} tokens shared"
        )
        lines.append(
            f"      before {decoder.text(later.prompt_ids[max(0, at - CONTEXT_TOKENS) : at])!r} | removed {removed!r} | inserted {inserted!r}"
        )
    if len(lines) == 1:
        lines.append("  one root: the rollout never split")
    return lines


def _forks(rollout: Rollout, decoder: Decoder) -> list[str]:
    lines = ["forks and retries"]
    calls = rollout.calls
    for fork in rollout.topology.forks:
        for d in fork_diffs(rollout, fork):
            kept = f"continued: {calls[d.continued].node_id}" if d.continued is not None else "neither continued"
            if d.divergence is None:
                what = "identical samples"
            else:
                a = "—" if d.original_token is None else f"{decoder.text([d.original_token])!r} ({d.original_logprob})"
                b = "—" if d.other_token is None else f"{decoder.text([d.other_token])!r} ({d.other_logprob})"
                top = {True: "in", False: "not in", None: "no top-k for"}[d.other_in_original_top_k]
                what = f"first divergence at sampled token {d.divergence}: {a} vs {b}; {top} the original's top-k"
            prompt = "same prompt" if d.same_prompt else "different prompts"
            lines.append(
                f"  {calls[d.parent].node_id}: {calls[d.original].node_id} vs {calls[d.other].node_id} ({prompt}, {kept}): {what}"
            )
    if len(lines) == 1:
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


def origin_lines(rollout: Rollout, node: int) -> list[str]:
    """Where the call's prompt came from: which earlier calls' sampled tokens, and the harness's share."""
    source, _ = context_origin(rollout, node)
    by = Counter(source.tolist())
    harness = by.pop(HARNESS, 0)
    sampled = ", ".join(f"{rollout.calls[k].node_id} {n:,}" for k, n in sorted(by.items()))
    return [
        f"origin of {rollout.calls[node].node_id}'s prompt ({source.shape[0]:,} tokens): "
        f"{source.shape[0] - harness:,} sampled earlier by the policy ({sampled or 'none'}), {harness:,} inserted by the harness"
    ]


def explain_text(rollout: Rollout, decoder: Decoder) -> str:
    """The ``explain`` report: token flows, chain breaks and where each context came from."""
    sections = [
        _flows(rollout),
        _breaks(rollout, decoder),
        _forks(rollout, decoder),
        _lowest(rollout, decoder),
        _retokenize(rollout, decoder),
    ]
    out = [f"session {rollout.session_id} · decoded with {decoder.label}"]
    for section in sections:
        out += ["", *section]
    return "\n".join(out) + "\n"
