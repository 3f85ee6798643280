"""The near-miss panel: a call's near miss (the earlier call it nearly continued) and, for a call
that looks dropped, the later call that replaced it, each worded by the library (``describe``)
with the break shown readable (views/builders/breaks.py: tokens as boxes with their ids, the first
differing id marked, whitespace shown when the sidebar's toggle says so, a text diff that never
marks identical text); the rollout's banner (``banner``), the headline words (``headline``) and a
fork's children side by side (``fork_html``). ``render`` is the only Streamlit call; the rest is pure."""

from __future__ import annotations

import streamlit as st

from rollout_graph.analysis.breaks import NO_TOKENIZER, boundary_tokens, break_diff, break_tokens, fix_for, reason_for
from rollout_graph.analysis.chains import compacted_calls
from rollout_graph.analysis.decode import Decoder
from rollout_graph.analysis.forks import fork_diffs
from rollout_graph.analysis.near_miss import (
    BROKEN_REPLAYS,
    COMPACTION,
    RETOKENIZED,
    UNKNOWN,
    NearMiss,
    describe,
    dropped_words,
)
from rollout_graph.core.rollout import Rollout
from rollout_graph.escape import html_text, md
from rollout_graph.ui import state
from rollout_graph.ui.builders import breaks as breaks_view

STYLE = (  # a fork's children side by side
    "<style>.rg-nm{display:grid;grid-template-columns:1fr 1fr;gap:10px;font:12.5px ui-monospace,Menlo,monospace}"
    ".rg-nm div{border:1px solid #e2e8f0;border-radius:6px;padding:6px 8px;white-space:pre-wrap;word-break:normal;overflow-wrap:anywhere}"
    ".rg-nm h5{margin:0 0 4px;font:600 11px system-ui,sans-serif;color:#475569}"
    ".rg-same{color:#64748b}.rg-del{background:#fee2e2;color:#991b1b;text-decoration:line-through}"
    ".rg-ins{background:#dcfce7;color:#14532d}.rg-bar{color:#94a3b8;padding:0 1px}"
    ".rg-tok{background:#fef3c7;color:#78350f;border-radius:2px}</style>"
)


def _unchecked(miss: NearMiss) -> bool:
    """A rewrite neither a tokenizer nor the messages checked: it may only be re-tokenized."""
    return reason_for(miss).endswith(f"({NO_TOKENIZER})")


def summary(rollout: Rollout, miss: NearMiss) -> str:
    """The near miss as the library states it (one classifier, one sentence: ``describe``), then
    where the break falls and the fix (plain text; escape it for Markdown or HTML)."""
    calls = rollout.calls
    earlier, later = calls[miss.earlier], calls[miss.later]
    where = {"prompt": "inside its prompt", "sampled": "inside its sampled span", "after": "after its end"}[miss.where]
    kept = (
        f", after {miss.kept:.0%} of its {earlier.n_sampled:,} sampled tokens were kept"
        if miss.where != "prompt"
        else ""
    )
    fix = fix_for(rollout, miss)
    unchecked = f" ({NO_TOKENIZER})" if _unchecked(miss) else ""
    thin = (
        f" The evidence is thin ({miss.evidence or 'nothing recorded beyond the ids'}): the cause cannot be named"
        " from these records; record the request messages (or use the capture proxy) to tell more."
        if miss.kind == UNKNOWN
        else ""
    )
    return (
        f"{describe(calls, miss)}{unchecked}. {later.node_id}'s prompt shares {miss.common_prefix:,} tokens with the end of "
        f"{earlier.node_id}; the break falls {where}{kept}.{thin}" + (f" Fix: {fix}." if fix else "")
    )


def boundaries_html(rollout: Rollout, miss: NearMiss, decoder: Decoder, whitespace: bool = True) -> str:
    """A re-tokenized replay: the same text cut into tokens two ways, as boxes with their ids (escaped)."""
    sampled, replayed = boundary_tokens(rollout, miss, decoder)
    earlier, later = rollout.calls[miss.earlier], rollout.calls[miss.later]
    return breaks_view.boundaries_html(earlier.node_id, later.node_id, sampled, replayed, whitespace)


def break_html(rollout: Rollout, miss: NearMiss, decoder: Decoder, whitespace: bool = True) -> str:
    """Both sides around the first differing token as boxes with their ids, then the text diff of
    what the harness removed (the earlier call's end ids) and inserted (the later prompt); everything
    from the trace escaped."""
    tokens = break_tokens(rollout, miss, decoder)
    return breaks_view.break_html(tokens, break_diff(rollout, miss, decoder, tokens), whitespace)


def banner(rollout: Rollout) -> str | None:
    """A rollout-level warning (Markdown, escaped) when broken replays begin at least half of the
    roots that nearly continued an earlier call. A root is a call without a parent; each broken
    replay is worded from the later call's side, in the library's sentence (``describe``)."""
    parents, misses = rollout.topology.parents, rollout.near_misses
    roots = [m for i, m in misses.items() if parents[i] is None and m.node == m.later]
    broken = [m for m in roots if m.kind in BROKEN_REPLAYS]
    if not broken or len(broken) * 2 < len(roots):
        return None
    retokenized = sum(1 for m in broken if m.kind == RETOKENIZED)
    kinds = []
    if retokenized:
        kinds.append(f"{retokenized} re-tokenize an earlier reply (the same text, other token ids)")
    if len(broken) - retokenized:
        unchecked = any(_unchecked(m) for m in broken)
        kinds.append(
            f"{len(broken) - retokenized} rewrite an earlier reply (the replayed text differs"
            + (
                "; without a tokenizer or messages, whether it was only re-tokenized was not checked)"
                if unchecked
                else ")"
            )
        )
    first = min(broken, key=lambda m: m.later)
    fix = fix_for(rollout, first)
    return (
        f"**This harness breaks its replays:** {len(broken)} of the {rollout.stats['n_roots']} roots begin with a "
        f"broken replay of the model's own reply: {'; '.join(kinds)}. Each starts a new root and a training row "
        "of its own, in which the replayed reply is context (mask 0), not the model's sample. "
        f"For example, {md(describe(rollout.calls, first), 300)}." + (f" Fix: {md(fix)}." if fix else "")
    )


# How each kind of near miss reads, from the LATER call's side (docs/semantics.md, Glossary).
PHRASES = {
    "parallel_sample": "{later} is another sample of {earlier}'s request (n > 1)",
    "retry": "{later} retries {earlier} (the same prompt, sent again)",
    "retokenized": "{later} re-tokenizes {earlier}'s reply (a broken replay)",
    "rewritten_continuation": "{later} rewrites {earlier}'s reply (a broken replay)",
    "rejected": "{later} asks again without {earlier}'s reply",
    "compaction": "{later} compacts the history of {earlier}",
    "resumed": "{later} resumes {earlier}",
    "new_conversation": "{later} starts a new conversation after {earlier}",
    "subagent": "{later} starts a subagent from {earlier}",
    "side_call": "{later} is a side call beside {earlier}",
    "unknown": "{later} nearly continues {earlier} (the evidence is thin: cause unknown)",
}


def headline(rollout: Rollout, miss: NearMiss) -> str:
    """The near miss in words, worded from the later call's side: "c14 re-tokenizes c12's reply"
    (plain text; escape it for Markdown or HTML), as the library's sentence is (``describe``)."""
    first, second = miss.earlier, miss.later
    later, earlier = rollout.calls[second].node_id, rollout.calls[first].node_id
    phrase = PHRASES.get(miss.kind, "{later} nearly continues {earlier} (" + miss.kind.replace("_", " ") + ")")
    text = phrase.format(later=later, earlier=earlier)
    if miss.kind == COMPACTION:
        # the DAG draws a compaction after the call it compacted (docs/semantics.md, "Compactions
        # in the DAG"): name that call too, so the sentence and the picture agree
        last = compacted_calls(rollout).get(second)
        if last is not None and last != first:
            text += f" (the conversation up to {rollout.calls[last].node_id})"
    return text


def replaced_summary(rollout: Rollout, miss: NearMiss) -> str:
    """Why a call looks dropped, from the later call that replaced it (plain text; escape it)."""
    calls = rollout.calls
    return f"{dropped_words(calls, miss, rollout.topology.discarded)}. {describe(calls, miss)}."


def render(rollout: Rollout, node: int, decoder: Decoder) -> None:
    """The call's near miss (the earlier call it nearly continued) and, for a call that looks
    dropped, the later call that replaced it; each with its evidence."""
    whitespace = bool(st.session_state.get(state.SHOW_WHITESPACE, True))
    miss = rollout.near_misses.get(node)
    if miss is not None:
        with st.expander(f"Near miss: {md(headline(rollout, miss), 160)}", expanded=miss.kind in BROKEN_REPLAYS):
            st.html(f'<div style="font-size:13px;color:#334155">{html_text(summary(rollout, miss))}</div>')
            if miss.kind == RETOKENIZED:
                st.html(boundaries_html(rollout, miss, decoder, whitespace))
            st.html(break_html(rollout, miss, decoder, whitespace))
    replaced = rollout.replaced_by.get(node)
    if replaced is not None:
        later = rollout.calls[replaced.later].node_id
        with st.expander(f"Replaced by {md(later, 60)}: {md(headline(rollout, replaced), 140)}", expanded=miss is None):
            st.html(f'<div style="font-size:13px;color:#334155">{html_text(replaced_summary(rollout, replaced))}</div>')
            st.html(break_html(rollout, replaced, decoder, whitespace))


def fork_html(rollout: Rollout, fork: int, decoder: Decoder, limit: int = 4) -> str:
    """A fork's children side by side: each sampled span decoded, from the first token where it
    differs from the earliest child struck/green, with the logprob there and which one continued."""
    calls = rollout.calls
    diffs = fork_diffs(rollout, fork)[: limit - 1]
    first = sorted(rollout.topology.children[fork])[0]
    columns = [(first, None)] + [(d.other, d) for d in diffs]
    cells = []
    # the earliest child is cut where the first other child departs from it
    first_divergence = diffs[0].divergence if diffs else None
    for node, d in columns:
        call = calls[node]
        divergence = first_divergence if d is None else d.divergence
        cut = call.n_sampled if divergence is None else divergence
        pieces = decoder.pieces(call.sampled_ids[: cut + 40])
        same, changed = "".join(pieces[:cut]), "".join(pieces[cut:])
        state = (
            "continued"
            if rollout.topology.children[node]
            else ("discarded" if node in rollout.topology.discarded else "leaf")
        )
        note = ""
        if d is not None and d.divergence is not None:
            top = {True: "in", False: "not in", None: "no top-k for"}[d.other_in_original_top_k]
            note = f" · diverges at token {d.divergence}: logprob {d.other_logprob} vs {d.original_logprob}; {top} the original's top-k"
        cls = "rg-ins" if d is not None else "rg-del"
        cells.append(
            f"<div><h5>{html_text(call.node_id)} · {state}{html_text(note)}</h5>"
            f'<span class="rg-same">{html_text(same)}</span><span class="{cls}">{html_text(changed)}</span></div>'
        )
    grid = f'<div class="rg-nm" style="grid-template-columns:repeat({len(cells)},1fr)">' + "".join(cells) + "</div>"
    return STYLE + grid
