"""One self-contained HTML file of a rollout: no server, no network (``rollout-graph bundle``,
the app's "Download this view as HTML").

The file holds the headline numbers and findings, the DAG laid out as the app lays it out
(rollout_graph.analysis.layout: collapsed chains, near-miss links), the story of the rollout
(rollout_graph.analysis.story: conversations, breaks, each call's new messages), each call's detail
(context and sampled spans with the logprob heatmap and top-k, loss mask, messages, findings, the
fork or break diff), the training rows and the notes (rollout_graph.reports.notes). Everything is
computed here from the library's analyses; the page's small script (bundle_template/bundle.js)
only draws it, with the app's keys (j/k/h/l, [ ]).

Trace text is untrusted. It travels as JSON in a ``<script type="application/json">`` element
(``<``, ``>``, ``&`` and U+2028/2029 escaped, so no trace text can close the element), is read
with ``JSON.parse`` and inserted with ``textContent`` only. The page's Content-Security-Policy
allows exactly its own script (by hash) and no request at all: even a payload that reached the
markup could not run or fetch anything.

Big rollouts keep the DAG and every call's summary, and the token detail of only the calls asked
for (``--calls``; or ``--node`` and, within the size budget, the calls worth a look first: near-miss
ends, calls with FATAL or WARN findings, forks, discarded calls); the page says what it left out
and the command that adds it.
"""

from __future__ import annotations

import base64
import hashlib
import math
import shlex
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from typing import Any

import numpy as np
import orjson

from rollout_graph import __version__
from rollout_graph.analysis.breaks import boundary_tokens, break_diff, break_tokens, fix_for, reason_for
from rollout_graph.analysis.chains import continuations
from rollout_graph.analysis.decode import Decoder
from rollout_graph.analysis.forks import fork_diffs
from rollout_graph.analysis.layout import DagView, dag_view, laid_out_after
from rollout_graph.analysis.near_miss import RETOKENIZED, dropped_words, near_miss_json
from rollout_graph.analysis.story import PAGE_SIZE as STORY_PAGE
from rollout_graph.analysis.story import Block, chapter, outline
from rollout_graph.core.findings import top_codes
from rollout_graph.core.messages import display_text  # the app's chat transcript reads the same text
from rollout_graph.core.records import LEVELS, Call, NearMiss
from rollout_graph.core.rollout import Rollout
from rollout_graph.escape import html_text, visible  # the one escaper, shared with the app

__all__ = ["BundleOptions", "bundle_data", "bundle_html", "left_out", "page_html", "script_json"]

DETAIL_BUDGET = 1_500_000  # estimated bytes of token detail embedded when no call is chosen
DETAIL_OVERHEAD = 300  # bytes of a call's detail beyond its tokens and text (keys, empty lists)
MAX_MESSAGE_CHARS = 20_000  # per message (the app's chat view cuts at the same length)
BREAK_BEFORE = 8  # shared tokens shown before a break
BREAK_AFTER = 24  # differing tokens shown after it
FORK_TAIL = 40  # tokens shown after a fork's divergence
LOGPROB_FLOOR = -8.0  # the app's heatmap range (dark: unlikely, bright: certain)
BUCKETS = 32
# plotly's cividis (the app's logprob scale), so the file needs no plotly
CIVIDIS = ["#00224e", "#123570", "#3b496c", "#575d6d", "#707173", "#8a8678", "#a59c74", "#c3b369", "#e1cc55", "#fee838"]
TEMPLATE = "bundle_template"
STORY_BLOCK_CHARS = 4_000  # per message of the story (the call's Messages tab keeps MAX_MESSAGE_CHARS)
STORY_BUDGET = 1_500_000  # bytes of story chapters embedded (the calls told first come first)


@dataclass
class BundleOptions:
    """What a bundle holds beyond every call's summary.

    Attributes:
        node: the call the page opens at (its token detail is always embedded).
        calls: calls whose token detail is embedded; empty: every call when the rollouts fit
            ``budget``, else ``node`` and then the notable calls that fit (:func:`bundle_data`).
        budget: estimated bytes of token detail embedded when ``calls`` is empty.
        story_budget: bytes of the story's chapters embedded (rollout_graph.analysis.story).
        paths: the trace paths as the user gave them, for the command the page prints to add
            the calls it left out.
        notes: notes (rollout_graph.reports.notes) shown beside their calls and rows.
        title: the page title (default: the session ids).
    """

    node: str | None = None
    calls: Collection[str] = ()
    budget: int = DETAIL_BUDGET
    story_budget: int = STORY_BUDGET
    paths: Sequence[str] = ()
    notes: list[dict[str, Any]] = field(default_factory=list)
    title: str | None = None


def _bucket_colors() -> list[str]:
    def rgb(hex_color: str) -> tuple[int, int, int]:
        return int(hex_color[1:3], 16), int(hex_color[3:5], 16), int(hex_color[5:7], 16)

    out = []
    for b in range(BUCKETS):
        t = (b + 0.5) / BUCKETS  # 0: logprob at the floor, 1: certain
        x = t * (len(CIVIDIS) - 1)
        lo = min(int(x), len(CIVIDIS) - 2)
        f = x - lo
        a, c = rgb(CIVIDIS[lo]), rgb(CIVIDIS[lo + 1])
        r, g, bl = (round(a[k] + (c[k] - a[k]) * f) for k in range(3))
        ink = "#111" if 0.299 * r + 0.587 * g + 0.114 * bl > 140 else "#fff"
        out.append(f".b{b}{{background:rgb({r},{g},{bl});color:{ink}}}")
    return out


def _lp(value: float) -> float | None:
    return None if value is None or math.isnan(value) else round(float(value), 4)


def _pieces(decoder: Decoder, ids: np.ndarray) -> list[str]:
    return decoder.pieces(ids) if len(ids) else []


def _specials(decoder: Decoder, ids: np.ndarray) -> list[int]:
    return [k for k, t in enumerate(ids.tolist()) if decoder.is_special(int(t))]


def _json_text(value: Any, indent: bool = False) -> str:
    """``value`` as JSON text, or a note saying why not (nested deeper than the encoder allows)."""
    try:
        return orjson.dumps(value, default=str, option=orjson.OPT_INDENT_2 if indent else 0).decode()
    except (orjson.JSONEncodeError, TypeError) as exc:
        return f"(not shown: {type(exc).__name__}: {str(exc)[:120]})"


def _cut(text: str) -> str:
    if len(text) <= MAX_MESSAGE_CHARS:
        return text
    return text[:MAX_MESSAGE_CHARS] + f"\n… ({len(text) - MAX_MESSAGE_CHARS:,} more characters left out)"


def _readable_call(call: Any) -> Any:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("arguments"), str):
        return call
    try:
        arguments = orjson.loads(function["arguments"])
    except orjson.JSONDecodeError:
        return call
    return {**call, "function": {**function, "arguments": arguments}}


def _message(message: Any) -> dict[str, Any]:
    if not isinstance(message, dict):
        return {"role": "?", "text": _cut(display_text(message))}
    out: dict[str, Any] = {"role": str(message.get("role", "?")), "text": _cut(display_text(message.get("content")))}
    extra = {k: v for k, v in message.items() if k not in ("role", "content") and v is not None}
    if isinstance(extra.get("tool_calls"), list):  # arguments shown as the JSON they hold, as the app does
        extra["tool_calls"] = [_readable_call(c) for c in extra["tool_calls"]]
    if extra:
        out["extra"] = _cut(_json_text(extra, indent=True))
    return out


def _messages(call: Call) -> dict[str, Any]:
    return {
        "request": [_message(m) for m in (call.request_messages or [])],
        "response": None if call.response_message is None else _message(call.response_message),
        "tools": sorted(
            str((t.get("function") or {}).get("name") or t.get("name") or "?")
            for t in (call.tools or [])
            if isinstance(t, dict)
        ),
    }


def _token_detail(rollout: Rollout, i: int, decoder: Decoder) -> dict[str, Any]:
    """A call's context span (mask 0) and sampled span: pieces, ids, logprobs, top-k."""
    call = rollout.calls[i]
    start = rollout.context_start(i)
    context = call.prompt_ids[start:] if call.prompt_ids is not None else np.empty(0, np.int64)
    sampled = call.sampled_ids
    logprobs = call.sampled_logprobs if call.logprobs_aligned and call.sampled_logprobs is not None else None
    top: list[list[list[Any]]] | None = None
    if call.top_k is not None and call.top_k.ids.size:
        ids, lps = call.top_k.ids, call.top_k.logprobs
        flat = [int(t) for t in ids.reshape(-1) if t >= 0]
        texts = iter(_pieces(decoder, np.array(flat, dtype=np.int64)))
        top = []
        for row, row_lps in zip(ids.tolist(), lps.tolist(), strict=True):
            top.append([[next(texts), t, _lp(lp)] for t, lp in zip(row, row_lps, strict=True) if t >= 0])
    return {
        "context_ids": context.astype(np.int64).tolist(),
        "context": _pieces(decoder, context),
        "context_special": _specials(decoder, context),
        "sampled_ids": sampled.astype(np.int64).tolist(),
        "sampled": _pieces(decoder, sampled),
        "sampled_special": _specials(decoder, sampled),
        "logprobs": None if logprobs is None else [_lp(v) for v in logprobs.tolist()],
        "top": top,
        "messages": _messages(call),
    }


def _detail_cost(rollout: Rollout, i: int) -> int:
    """Estimated bytes of a call's token detail (pieces, ids, logprobs, top-k, messages)."""
    call = rollout.calls[i]
    k = 0 if call.top_k is None else call.top_k.ids.shape[1]
    context = call.n_prompt - rollout.context_start(i)
    text = sum(len(display_text(m.get("content"))) for m in (call.request_messages or []) if isinstance(m, dict))
    return DETAIL_OVERHEAD + context * 16 + call.n_sampled * (30 + 28 * k) + min(text, MAX_MESSAGE_CHARS * 50)


def _near_miss(rollout: Rollout, miss: NearMiss, decoder: Decoder) -> dict[str, Any]:
    """The near miss in words (the library's sentence, reason and fix) and both sides around the break."""
    calls = rollout.calls
    earlier, later = calls[miss.earlier], calls[miss.later]
    where = {"prompt": "inside its prompt", "sampled": "inside its sampled span", "after": "after its end"}[miss.where]
    out: dict[str, Any] = near_miss_json(calls, miss)
    out.update(
        earlier_id=earlier.node_id,
        later_id=later.node_id,
        other_id=calls[miss.other].node_id,
        reason=reason_for(miss),
        fix=fix_for(rollout, miss),
        where_text=where,
    )
    # the break, readable (graph/analysis/breaks.py): both sides as tokens with their ids, the first
    # differing one marked, and a text diff that never marks identical text
    shown = break_tokens(rollout, miss, decoder, BREAK_BEFORE, BREAK_AFTER)
    out["tokens"] = {
        name: {"call": side.call, "what": side.what, "first": side.first_difference, "more": side.more,
               "ids": [t.id for t in side.tokens], "pieces": [t.text for t in side.tokens]}
        for name, side in (("earlier", shown.earlier), ("later", shown.later))
    }  # fmt: skip
    out["diff"] = break_diff(rollout, miss, decoder, shown)
    if miss.kind == RETOKENIZED:
        sampled, replayed = boundary_tokens(rollout, miss, decoder)
        out["boundaries"] = {"sampled": [t.text for t in sampled], "replayed": [t.text for t in replayed],
                             "sampled_ids": [t.id for t in sampled], "replayed_ids": [t.id for t in replayed]}  # fmt: skip
    if miss.node == miss.earlier:  # kept under the call a later one replaced: why it looks dropped
        out["dropped"] = dropped_words(calls, miss, rollout.topology.discarded)
    return out


def _fork(rollout: Rollout, fork: int, decoder: Decoder) -> list[dict[str, Any]]:
    """A fork's children, one per row: the shared start and the rest from where each departs from
    the earliest child (rollout_graph.analysis.forks)."""
    calls, topo = rollout.calls, rollout.topology
    diffs = fork_diffs(rollout, fork)  # every child, one per row (a page can hold them all)
    first = sorted(topo.children[fork])[0]
    first_divergence = diffs[0].divergence if diffs else None
    columns = []
    for node, d in [(first, None), *((d.other, d) for d in diffs)]:
        call = calls[node]
        divergence = first_divergence if d is None else d.divergence
        cut = call.n_sampled if divergence is None else divergence
        pieces = _pieces(decoder, call.sampled_ids[: cut + FORK_TAIL])
        state = "continued" if topo.children[node] else ("discarded" if node in topo.discarded else "leaf")
        column: dict[str, Any] = {
            "node_id": call.node_id,
            "state": state,
            "same": "".join(pieces[:cut]),
            "changed": "".join(pieces[cut:]),
            "original": d is None,
        }
        if d is not None and d.divergence is not None:
            column.update(
                divergence=d.divergence,
                logprob=d.other_logprob,
                original_logprob=d.original_logprob,
                in_original_top_k=d.other_in_original_top_k,
                same_prompt=d.same_prompt,
            )
        columns.append(column)
    return columns


def _call_summary(rollout: Rollout, i: int) -> dict[str, Any]:
    call, topo = rollout.calls[i], rollout.topology
    parent = topo.parents[i]
    kept = topo.discarded.get(i)
    levels = {f.level for f in rollout.findings_for(i)}
    return {
        "id": call.node_id,
        "parent": parent,
        "root": topo.root_of[i],
        "children": list(topo.children[i]),
        "role": rollout.node_roles[i],
        "kind": rollout.kind(i),
        "discarded": kept is not None,
        "continued_by": kept,
        "linked_by": rollout.linked_by[i],
        "n_prompt": call.n_prompt,
        "n_context": call.n_prompt - rollout.context_start(i),
        "n_sampled": call.n_sampled,
        "trainable": bool(rollout.trainable[i]),
        "finish_reason": call.finish_reason,
        "model": call.model,
        "source": f"{call.source.rsplit('/', 1)[-1]}:{call.line}",
        "worst": next((level for level in LEVELS if level in levels), None),
        "findings": [f.as_dict() for f in rollout.findings_for(i)],
    }


def _notable(rollout: Rollout) -> list[int]:
    """Calls whose detail a big rollout's bundle embeds first, in arrival order: near-miss ends,
    calls with a FATAL or WARN finding, forks and discarded calls."""
    topo = rollout.topology
    found = {i for m in rollout.near_misses.values() for i in (m.earlier, m.later)}
    found.update(i for i in range(len(rollout.calls)) if any(f.level != "INFO" for f in rollout.findings_for(i)))
    found.update(topo.forks)
    found.update(topo.discarded)
    return sorted(found)


def _chosen(rollout: Rollout, options: BundleOptions) -> set[int]:
    """Calls of this rollout whose token detail is embedded."""
    index = {c.node_id: i for i, c in enumerate(rollout.calls)}
    asked = {index[n] for n in options.calls if n in index}
    if options.node in index:
        asked.add(index[options.node])
    return asked


CALLS_PLACEHOLDER = "{calls}"


def command_for(options: BundleOptions, session: str, calls: Iterable[str] | None = None) -> str:
    """The command that writes this bundle again with the token detail of ``calls`` (without
    them: a template whose ``{calls}`` the page fills with the call a reader opened)."""
    paths = " ".join(shlex.quote(p) for p in options.paths) or "TRACE"
    chosen = CALLS_PLACEHOLDER if calls is None else shlex.quote(",".join(calls))
    return f"rollout-graph bundle {paths} --session {shlex.quote(session)} --calls {chosen} --out rollout.html"


def _placed(view: DagView) -> dict[str, Any]:
    """A drawn view as the page draws it: the calls drawn, each one's depth, lane and drawn parent."""
    return {
        "visible": list(view.visible),
        "x": [round(float(view.x[v]), 3) for v in view.visible],
        "y": [int(view.y[v]) for v in view.visible],
        "parent": [view.drawn_parent[v] for v in view.visible],
        "lanes": view.n_lanes,
    }


def _block(block: Block) -> dict[str, Any]:
    return {
        "kind": block.kind, "title": block.title, "text": block.text[:STORY_BLOCK_CHARS], "chars": block.chars,
        "lines": block.lines, "folded": block.folded, "size": block.size, "peek": block.peek,
        "tools": [[t.name, t.peek, t.arguments[:STORY_BLOCK_CHARS]] for t in block.tool_calls],
    }  # fmt: skip


def _story(rollout: Rollout, decoder: Decoder, budget: int) -> dict[str, Any]:
    """The story (rollout_graph.analysis.story): every conversation and its folded lines, and each
    call's chapter (its new messages and its reply, each block cut at ``STORY_BLOCK_CHARS``) in the
    order the story tells them, while they fit ``budget`` bytes; the page says how many are left out."""
    story = outline(rollout)
    conversations = []
    for conv in story.conversations:
        brk = conv.opened_by
        conversations.append(
            {
                "title": conv.title, "kind": conv.kind, "calls": conv.calls, "n_calls": conv.n_calls,
                "asides": {str(k): [{"calls": list(a.calls), "text": a.text} for a in lines] for k, lines in conv.asides.items()},
                "break": None if brk is None else {
                    "words": brk.words, "sentence": brk.sentence, "evidence": brk.evidence, "earlier": brk.earlier,
                },
            }
        )  # fmt: skip
    chapters: dict[str, Any] = {}
    spent = 0
    for conv in story.conversations:
        for i in conv.calls:
            ch = chapter(rollout, i, decoder)
            data = {
                "new": [_block(b) for b in ch.new], "reply": [_block(b) for b in ch.reply], "n_prompt": ch.n_prompt,
                "n_sampled": ch.n_sampled, "finish": ch.finish_reason, "trained": ch.trained, "fatal": ch.fatal,
                "warn": ch.warn, "shared": ch.shared,
            }  # fmt: skip
            size = len(orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY))
            if spent + size > budget:
                break
            chapters[str(i)] = data
            spent += size
    told = sum(len(c.calls) for c in story.conversations)
    return {
        "conversations": conversations,
        "chapters": chapters,
        "page_size": STORY_PAGE,
        "left_out": told - len(chapters),
    }


def _rollout_data(rollout: Rollout, decoder: Decoder, options: BundleOptions, detailed: set[int]) -> dict[str, Any]:
    calls, topo = rollout.calls, rollout.topology
    n = len(calls)
    keep = _chosen(rollout, options)
    # laid out as the app lays it out (rollout_graph.analysis.layout): chains collapsed, roots after
    # the call they nearly continued; "every call" is the same layout with no chain collapsed
    collapsed = dag_view(rollout, near_misses=True, collapse=True, keep=keep)
    chains = collapsed.chains
    details = {str(i): _token_detail(rollout, i, decoder) for i in sorted(detailed)}
    for i in sorted(detailed):
        miss = rollout.near_misses.get(i)
        if miss is not None:
            details[str(i)]["near_miss"] = _near_miss(rollout, miss, decoder)
        replaced = rollout.replaced_by.get(i)
        if replaced is not None:
            details[str(i)]["replaced_by"] = _near_miss(rollout, replaced, decoder)
        if len(topo.children[i]) > 1:
            details[str(i)]["fork"] = _fork(rollout, i, decoder)
    near = [
        {"node": m.node, "earlier": m.earlier, "later": m.later, "kind": m.kind, "common_prefix": m.common_prefix}
        for _, m in sorted(rollout.near_misses.items())
        if m.earlier != m.later
    ]
    rows = []
    for seq in rollout.sequences:
        rows.append(
            {
                "leaf": seq.leaf,
                "leaf_id": calls[seq.leaf].node_id,
                "nodes": list(seq.nodes),
                "role": seq.role,
                "n_calls": seq.n_turns,
                "n_trainable": seq.n_trainable,
                "n_context": seq.n_context,
                "prompt_len": seq.prompt_len,
            }
        )
    counts = rollout.finding_counts
    groups = [
        {"level": level, "code": code, "count": k}
        for level in LEVELS
        for code, k in top_codes(rollout.findings, level, limit=50)
    ]
    left_out = [calls[i].node_id for i in range(n) if i not in detailed]
    stats = dict(rollout.stats)
    stats["n_calls"] = stats["n_turns"]
    return {
        "session_id": rollout.session_id,
        "stats": stats,
        "finding_counts": counts,
        "finding_groups": groups,
        "findings": [f.as_dict() for f in rollout.findings],
        "calls": [_call_summary(rollout, i) for i in range(n)],
        "chains": [
            {"calls": list(c.calls), "before": c.before, "after": c.after, "growth": c.token_growth} for c in chains
        ],
        "continues": {str(k): v for k, v in continuations(rollout).items()},
        "laid_out_after": {str(k): v for k, v in laid_out_after(rollout).items()},
        "layout": {
            "collapsed": _placed(collapsed),
            "all": _placed(dag_view(rollout, near_misses=True, collapse=False)),
        },
        "story": _story(rollout, decoder, options.story_budget),
        "near_misses": near,
        "rows": rows,
        "details": details,
        "decoder": decoder.label,
        "left_out": {
            "n": len(left_out),
            "first": left_out[:5],
            "command": command_for(options, rollout.session_id) if left_out else None,
        },
        "notes": [note for note in options.notes if note.get("session") == rollout.session_id],
    }


def bundle_data(
    rollouts: Sequence[Rollout], decoders: Sequence[Decoder], options: BundleOptions | None = None
) -> dict[str, Any]:
    """The JSON the page draws (every string as rollout_graph.escape.visible shows it): every
    rollout's summary, DAG and rows, and the token detail of the
    calls chosen: the calls named (``options.calls`` and ``options.node``) when ``options.calls``
    names any; else every call when they all fit ``options.budget``, or ``options.node`` and then
    the notable calls (near-miss ends, FATAL/WARN findings, forks, discarded) while they fit."""
    options = options or BundleOptions()
    chosen = [_chosen(r, options) for r in rollouts]
    named = bool(options.calls) or any(chosen)
    costs = [[_detail_cost(r, i) for i in range(len(r.calls))] for r in rollouts]
    everything = not options.calls and sum(map(sum, costs)) <= options.budget
    if not everything and not options.calls:  # too big: the calls worth a look first, within the budget
        spent = sum(costs[k][i] for k, asked in enumerate(chosen) for i in asked)
        for k, i in sorted(((k, i) for k, r in enumerate(rollouts) for i in _notable(r)), key=lambda ki: ki[1]):
            if i not in chosen[k] and spent + costs[k][i] <= options.budget:
                chosen[k].add(i)
                spent += costs[k][i]
    sessions = []
    open_at: dict[str, Any] | None = None
    for rollout, decoder, asked in zip(rollouts, decoders, chosen, strict=True):
        detailed = set(range(len(rollout.calls))) if everything else asked
        sessions.append(_rollout_data(rollout, decoder, options, detailed))
        if open_at is None and options.node is not None and options.node in {c.node_id for c in rollout.calls}:
            open_at = {"session": rollout.session_id, "node": rollout.index_of(options.node)}
    if open_at is None and rollouts:  # the rollout the app opens first: the most trainable tokens
        first = min(rollouts, key=lambda r: (-r.stats["n_trainable_tokens"], len(r.session_id), r.session_id))
        open_at = {"session": first.session_id, "node": None}
    return _visible(
        {
            "format": "rollout-graph-bundle",
            "version": 1,
            "generator": f"rollout-graph {__version__}",
            "created": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "title": options.title or ", ".join(r.session_id for r in rollouts),
            "open": open_at,
            "everything": everything,
            "named": named,
            "budget": options.budget,
            "logprob_floor": LOGPROB_FLOOR,
            "buckets": BUCKETS,
            "sessions": sessions,
        }
    )


def _visible(value: Any) -> Any:
    """Every string in ``value`` as the app shows it: controls and bidi controls as escapes
    (rollout_graph.escape.visible), so the page's textContent shows what the app shows."""
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, dict):
        return {k: _visible(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_visible(v) for v in value]
    return value


def script_json(data: Any) -> str:
    """``data`` as JSON safe inside a ``<script type="application/json">`` element: ``<``, ``>``
    and ``&`` (so no ``</script>`` or ``<!--``) and U+2028/U+2029 written as ``\\u`` escapes,
    which JSON.parse reads back as the same characters."""
    text = orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY, default=str).decode()
    for raw, escaped in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(raw, escaped)
    return text


def _template(name: str) -> str:
    return resources.files("rollout_graph.reports").joinpath(TEMPLATE, name).read_text(encoding="utf-8")


def bundle_html(rollouts: Sequence[Rollout], decoders: Sequence[Decoder], options: BundleOptions | None = None) -> str:
    """The whole self-contained page (see the module docstring)."""
    return page_html(bundle_data(rollouts, decoders, options))


def left_out(data: dict[str, Any]) -> tuple[int, int]:
    """(calls whose token detail a bundle left out, calls in it)."""
    return (
        sum(s["left_out"]["n"] for s in data["sessions"]),
        sum(len(s["calls"]) for s in data["sessions"]),
    )


def page_html(data: dict[str, Any]) -> str:
    """The page for :func:`bundle_data`'s ``data``: style, data and script inlined."""
    script = _template("bundle.js")
    style = _template("bundle.css") + "".join(_bucket_colors())
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    policy = (
        f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; img-src data:; "
        "connect-src 'none'; form-action 'none'; base-uri 'none'"
    )
    title = html_text(f"{data['title']} · rollout-graph")
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{html_text(policy)}">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f'<meta name="generator" content="{html_text(data["generator"])}">'
        f"<title>{title}</title><style>{style}</style></head><body>"
        '<noscript><p class="noscript">This rollout-graph bundle draws itself with a small inline script: '
        "allow JavaScript for this file.</p></noscript>"
        '<div id="app"></div>'
        f'<script type="application/json" id="rollout-data">{script_json(data)}</script>'
        f"<script>{script}</script></body></html>\n"
    )
