"""Token views (pure): a call's context span and sampled span, or a whole training row, as escaped
HTML, one page at a time, so 100k-token spans never reach the browser at once.

Entry points: ``node_strip``, ``origin_strip`` (the whole prompt coloured by where each token came
from) and ``sequence_strip`` -> ``TokenStrip``; ``page_html(strip, start, stop, decoder, ...)``, ``page_of``,
``page_bounds``, ``legend_html``. Context tokens are neutral (mask 0), sampled tokens coloured by
logprob (cividis), untrained ones hatched red; every token has a tooltip.

Where it sits: views/panels/tokens.py pages through a strip; overlays.py recolours it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from rollout_graph.analysis.decode import Decoder, TokenizerDecoder
from rollout_graph.analysis.origin import context_origin, text_origin
from rollout_graph.analysis.token_flow import token_rank
from rollout_graph.core.rollout import Rollout
from rollout_graph.core.sequences import Sequence
from rollout_graph.escape import html_text
from rollout_graph.ui.builders import overlays
from rollout_graph.ui.builders.palette import (
    CONTEXT_BACKGROUND,
    LOGPROB_FLOOR,
    LOGPROB_SCALE,
    ORIGIN_BACKGROUND,
    logprob_color,
    text_color_on,
)

PAGE_SIZE = 800
LOOKBEHIND = 4  # tokens decoded before a page so a character split across the page edge is whole

BUCKETS = 32  # logprob colour buckets, one CSS class each, so a token carries only class names
CONTEXT_STYLE = f"background:{CONTEXT_BACKGROUND};color:#334155"
UNTRAINED_STYLE = (
    "background:repeating-linear-gradient(135deg,#fee2e2 0 4px,#fecaca 4px 8px);color:#7f1d1d;"
    "outline:1px dashed #dc2626;outline-offset:-1px"
)
ORIGIN_STYLE = f"background:{ORIGIN_BACKGROUND};color:#2e1065"  # context the policy sampled earlier
REINSERTED_STYLE = (
    "background:#fef3c7;color:#78350f;outline:1px dashed #d97706;outline-offset:-1px"  # its text, re-inserted
)
# a line breaks between tokens, not inside one ("<1234>" of a trace without a tokenizer stays whole):
# no break-all; the zero-width space after each token (generated, so never copied) is where a line may
# break; a single token wider than the pane still wraps (overflow-wrap) instead of running out of it
TOKEN_STYLE = (
    "padding:1px 1px;margin:0 1px 1px 0;border-radius:3px;display:inline;white-space:pre-wrap;"
    "word-break:normal;overflow-wrap:anywhere"
)


def _bucket_color(bucket: int) -> str:
    return logprob_color(LOGPROB_FLOOR * (1 - (bucket + 0.5) / BUCKETS))


def _stylesheet() -> str:
    rules = [
        ".rg-tokens{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12.5px;line-height:1.75}",
        f".rg-t{{{TOKEN_STYLE}}}",
        '.rg-t::after{content:"\\200b"}',
        f".rg-c{{{CONTEXT_STYLE}}}",
        f".rg-u{{{UNTRAINED_STYLE}}}",
        ".rg-s{font-weight:600;font-style:italic}",
        ".rg-m{box-shadow:0 0 0 2px #e11d48}",
        f".rg-o{{{ORIGIN_STYLE}}}",
        f".rg-r{{{REINSERTED_STYLE}}}",
        ".rg-turn{margin:8px 0 2px;font:600 11px system-ui,sans-serif;color:#475569;border-top:1px solid #cbd5e1;padding-top:3px}",
    ]
    for b in range(BUCKETS):
        bg = _bucket_color(b)
        rules.append(f".rg-b{b}{{background:{bg};color:{text_color_on(bg)}}}")
    return "<style>" + "".join(rules) + "</style>"


STYLESHEET = _stylesheet()


def logprob_bucket(logprob: float) -> int:
    t = min(1.0, max(0.0, 1.0 - logprob / LOGPROB_FLOOR))
    return min(BUCKETS - 1, int(t * BUCKETS))


WHITESPACE = str.maketrans({" ": "·", "\t": "→", "\n": "↵\n", "\r": "␍"})


@dataclass
class TokenStrip:
    """Per-position data for a run of tokens."""

    ids: np.ndarray
    sampled: np.ndarray  # bool
    trained: np.ndarray  # bool
    logprobs: np.ndarray  # float, NaN where not recorded
    top_ids: np.ndarray  # (n, k), -1 where absent
    top_logprobs: np.ndarray  # (n, k), NaN where absent
    boundaries: dict[int, str] = field(default_factory=dict)  # position -> label shown before it
    origin: np.ndarray | None = None  # per position: the call that sampled it earlier, or -1
    origin_logprob: np.ndarray | None = None
    origin_names: list[str] = field(default_factory=list)
    text_origin: np.ndarray | None = None  # per position: the call whose sampled text the harness re-inserted, or -1
    overlay: overlays.Overlay | None = None  # trainer signals, entropy: views/builders/overlays.py

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def first_sampled(self) -> int | None:
        hits = np.flatnonzero(self.sampled)
        return int(hits[0]) if hits.size else None

    def lowest_logprob(self) -> int | None:
        scored = np.where(self.sampled & ~np.isnan(self.logprobs), self.logprobs, np.inf)
        return int(np.argmin(scored)) if np.isfinite(scored).any() else None

    def reinserted(self) -> list[int]:
        """Where each run of re-inserted text starts (policy text the harness put back in the
        prompt: a summary, a subagent's answer; the origin view's amber tokens), in order."""
        if self.text_origin is None:
            return []
        on = self.text_origin >= 0
        return np.flatnonzero(on & ~np.r_[False, on[:-1]]).tolist()


def _top_arrays(call, width: int) -> tuple[np.ndarray, np.ndarray]:
    n = call.n_sampled
    ids = np.full((n, width), -1, dtype=np.int64)
    lps = np.full((n, width), np.nan, dtype=np.float64)
    if call.top_k is not None and width:
        k = min(width, call.top_k.ids.shape[1])
        ids[:, :k] = call.top_k.ids[:, :k]
        lps[:, :k] = call.top_k.logprobs[:, :k]
    return ids, lps


def _strip(rollout: Rollout, parts: list[tuple[int, int]], label_turns: bool) -> TokenStrip:
    """``parts``: (node, context start) for each node whose context and sampled spans follow."""
    width = max((top_k.ids.shape[1] for k, _ in parts if (top_k := rollout.calls[k].top_k) is not None), default=0)
    ids, sampled, trained, lps, tids, tlps = [], [], [], [], [], []
    boundaries: dict[int, str] = {}
    offset = 0
    for k, start in parts:
        call = rollout.calls[k]
        context = call.prompt_ids[start:] if call.prompt_ids is not None else np.empty(0, dtype=np.int64)
        n_c, n_s = context.shape[0], call.n_sampled
        if label_turns:
            boundaries[offset] = call.node_id
        ids += [context.astype(np.int64), call.sampled_ids.astype(np.int64)]
        sampled += [np.zeros(n_c, bool), np.ones(n_s, bool)]
        trained += [np.zeros(n_c, bool), np.full(n_s, bool(rollout.trainable[k]))]
        own = (
            call.sampled_logprobs
            if call.logprobs_aligned and call.sampled_logprobs is not None
            else np.full(n_s, np.nan)
        )
        lps += [np.full(n_c, np.nan), own.astype(np.float64)]
        top_ids, top_lps = _top_arrays(call, width)
        tids += [np.full((n_c, width), -1, dtype=np.int64), top_ids]
        tlps += [np.full((n_c, width), np.nan), top_lps]
        offset += n_c + n_s
    strip = TokenStrip(
        ids=np.concatenate(ids) if ids else np.empty(0, np.int64),
        sampled=np.concatenate(sampled) if sampled else np.empty(0, bool),
        trained=np.concatenate(trained) if trained else np.empty(0, bool),
        logprobs=np.concatenate(lps) if lps else np.empty(0),
        top_ids=np.concatenate(tids) if tids else np.empty((0, 0), np.int64),
        top_logprobs=np.concatenate(tlps) if tlps else np.empty((0, 0)),
        boundaries=boundaries,
    )
    strip.overlay = overlays.build(rollout, parts)
    return strip


def node_strip(rollout: Rollout, node: int) -> TokenStrip:
    """The call's context span (what the harness added since its parent) and its sampled span."""
    return _strip(rollout, [(node, rollout.context_start(node))], label_turns=False)


def origin_strip(rollout: Rollout, node: int, decoder: Decoder | None = None) -> TokenStrip:
    """The call's whole prompt and sampled span, each prompt token tagged with where it came from
    (with a tokenizer, also where the harness re-inserted text the policy had sampled)."""
    strip = _strip(rollout, [(node, 0)], label_turns=False)
    source, logprob = context_origin(rollout, node)
    pad = len(strip) - source.shape[0]
    strip.origin = np.concatenate([source, np.full(pad, -1)])
    strip.origin_logprob = np.concatenate([logprob, np.full(pad, np.nan)])
    if isinstance(decoder, TokenizerDecoder):
        strip.text_origin = np.concatenate([text_origin(rollout, node, decoder), np.full(pad, -1)])
    strip.origin_names = [c.node_id for c in rollout.calls]
    return strip


def sequence_strip(rollout: Rollout, seq: Sequence) -> TokenStrip:
    strip = _strip(rollout, [(k, rollout.context_start(k)) for k in seq.nodes], label_turns=True)
    # the row's own trainer logprobs and advantages (another row through a shared call may differ)
    index = next((i for i, s in enumerate(rollout.sequences) if s is seq), None)
    if index is not None:
        overlays.show_rows(rollout, strip.overlay, dict.fromkeys(seq.nodes, index))
    return strip


def page_bounds(strip: TokenStrip, page: int, page_size: int = PAGE_SIZE) -> tuple[int, int]:
    start = max(0, page) * page_size
    return start, min(len(strip), start + page_size)


def page_of(position: int, page_size: int = PAGE_SIZE) -> int:
    return position // page_size


def rank_of(strip: TokenStrip, pos: int) -> tuple[int | None, int]:
    """The token's rank among its recorded alternatives, and how many were recorded (see
    rollout_graph.analysis.token_flow.token_rank)."""
    row = strip.top_ids[pos] if strip.top_ids.size else np.empty(0, dtype=np.int64)
    return token_rank(row, int(strip.ids[pos]))


def alternatives_at(strip: TokenStrip, pos: int) -> list[tuple[int, float]]:
    """The recorded top-k alternatives at ``pos`` as (id, logprob), padding left out."""
    if not strip.top_ids.size:
        return []
    return [(int(i), float(a)) for i, a in zip(strip.top_ids[pos], strip.top_logprobs[pos], strict=True) if i >= 0]


def _rank(strip: TokenStrip, pos: int) -> str:
    rank, known = rank_of(strip, pos)
    if not known:
        return "rank unknown"
    return f"rank {rank} of {known} recorded" if rank is not None else f"not in the top {known}"


def _tooltip(strip: TokenStrip, pos: int, piece: str, decoder: Decoder) -> str:
    token_id = int(strip.ids[pos])
    lines = [f"#{pos} · id {token_id} · {repr(piece)}"]
    if not strip.sampled[pos]:
        lines.append("context (mask 0): conditioned on, not trained")
        if strip.origin is not None:
            source = int(strip.origin[pos])
            again = -1 if strip.text_origin is None else int(strip.text_origin[pos])
            if source < 0 and again >= 0:
                lines.append(
                    f"policy text re-inserted by the harness: {strip.origin_names[again]} sampled this text "
                    "(the same text, not the sampled tokens in place)"
                )
            elif source < 0:
                lines.append("inserted by the harness (tool output, user text, template glue)")
            else:
                lp = strip.origin_logprob[pos] if strip.origin_logprob is not None else math.nan
                at = "" if math.isnan(lp) else f" at logprob {lp:.4f}"
                lines.append(f"sampled earlier by the policy: {strip.origin_names[source]}{at}")
        return "\n".join(lines)
    lp = strip.logprobs[pos]
    state = "trained (mask 1)" if strip.trained[pos] else "sampled but NOT trained (mask 0)"
    if math.isnan(lp):
        lines.append(f"sampled · no valid logprob · {state}")
    else:
        lines.append(f"sampled · logprob {lp:.4f} · p {math.exp(lp):.4f} · {_rank(strip, pos)}")
        lines.append(state)
    if strip.overlay is not None:
        lines += strip.overlay.tooltip_lines(pos)
    alternatives = alternatives_at(strip, pos)
    if alternatives:
        texts = decoder.pieces([i for i, _ in alternatives])
        lines.append("alternatives:")
        lines += [f"  {t!r} (id {i}) {a:.3f}" for (i, a), t in zip(alternatives, texts, strict=True)]
    return "\n".join(lines)


def _classes(strip: TokenStrip, pos: int, special: bool, marked: bool) -> str:
    if not strip.sampled[pos]:
        if strip.origin is not None and strip.origin[pos] >= 0:
            kind = "rg-o"
        elif strip.text_origin is not None and strip.text_origin[pos] >= 0:
            kind = "rg-r"
        else:
            kind = "rg-c"
    elif not strip.trained[pos] or math.isnan(strip.logprobs[pos]):
        kind = "rg-u"
    else:
        kind = f"rg-b{logprob_bucket(float(strip.logprobs[pos]))}"
    if kind.startswith("rg-b") and strip.overlay is not None:  # trained tokens: the chosen overlay
        kind = strip.overlay.css_class(pos) or kind
    if strip.overlay is not None and strip.sampled[pos]:  # what the marked corrections clip or mask
        kind += strip.overlay.mark_class(pos)
    return "rg-t " + kind + (" rg-s" if special else "") + (" rg-m" if marked else "")


def page_html(
    strip: TokenStrip, start: int, stop: int, decoder: Decoder, show_whitespace: bool = True, mark: int | None = None
) -> str:
    """Escaped HTML for tokens ``start:stop``; ``mark`` gets a ring (a jump target)."""
    lead = max(0, start - LOOKBEHIND)
    pieces = decoder.pieces(strip.ids[lead:stop])[start - lead :]
    out = [STYLESHEET, overlays.STYLESHEET, '<div class="rg-tokens">']
    # strict=False: ``stop`` may run past the end of the strip; the decoded pieces bound the page
    for pos, piece in zip(range(start, stop), pieces, strict=False):
        if pos in strip.boundaries:
            out.append(f'<div class="rg-turn">{html_text(strip.boundaries[pos])}</div>')
        special = decoder.is_special(int(strip.ids[pos]))
        shown = piece.translate(WHITESPACE) if show_whitespace and not special else piece
        tip = html_text(_tooltip(strip, pos, piece, decoder))
        out.append(
            f'<span class="{_classes(strip, pos, special, pos == mark)}" data-i="{pos}" title="{tip}">{html_text(shown) or "&#8203;"}</span>'
        )
    out.append("</div>")
    return "".join(out)


def legend_html() -> str:
    """The token legend: one chip per meaning, each named with the glossary's words."""
    gradient = ",".join(_bucket_color(b) for b in range(0, BUCKETS, 4))
    return (
        '<div style="font:12px system-ui,sans-serif;color:#334155;display:flex;flex-wrap:wrap;gap:14px;align-items:center">'
        f'<span><span style="{TOKEN_STYLE};{CONTEXT_STYLE}">context</span> context tokens: mask 0, not trained</span>'
        f'<span>trainable, logprob <span style="font-size:11px">{LOGPROB_FLOOR:g}</span> '
        f'<span style="display:inline-block;width:150px;height:11px;vertical-align:middle;border-radius:2px;'
        f'background:linear-gradient(90deg,{gradient})"></span> <span style="font-size:11px">0</span> '
        f'<span style="color:#64748b">({html_text(LOGPROB_SCALE)}; darker = less likely)</span></span>'
        f'<span><span style="{TOKEN_STYLE};{UNTRAINED_STYLE}">not trainable</span> sampled, but no valid logprob '
        "or a FATAL finding</span>"
        f'<span><span style="{TOKEN_STYLE};{ORIGIN_STYLE}">sampled earlier</span> context tokens the policy '
        "sampled in an earlier call (origin view)</span>"
        f'<span><span style="{TOKEN_STYLE};{REINSERTED_STYLE}">re-inserted</span> context tokens: policy text the '
        "harness put back with other ids</span>"
        "<span>· space ↵ newline → tab</span></div>"
    )
