"""Token-view overlays (pure): colour sampled tokens by trainer-vs-inference difference, importance
ratio, advantage or the entropy lower bound instead of the inference logprob (docs/signals.md).

Entry points: ``build(rollout, parts) -> Overlay`` (per-position arrays for a token strip, asked
for a CSS class and tooltip lines per token), ``show_rows`` (the joined row picked per call),
``legend_html`` and ``marks_legend``. Diverging quantities use ColorBrewer RdBu (safe for the
common colour-vision deficiencies); entropy uses viridis.

Where it sits: views/builders/tokens.py draws the strip; the rows come from views/builders/mismatch/."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from plotly.colors import sample_colorscale

from rollout_graph.analysis.entropy import entropy_lower_bound
from rollout_graph.core.rollout import Rollout
from rollout_graph.escape import html_text
from rollout_graph.signals.corrections import CorrectionError, parse_correction
from rollout_graph.signals.join import RATIO_BAND
from rollout_graph.ui.builders.mismatch import row_arrays
from rollout_graph.ui.builders.palette import text_color_on

LOGPROB = "logprob"
DIFF = "diff"
RATIO = "ratio"
ADVANTAGE = "advantage"
ENTROPY = "entropy"
MODES = {
    LOGPROB: "Inference logprob",
    DIFF: "Trainer − inference",
    RATIO: "Importance ratio",
    ADVANTAGE: "Advantage",
    ENTROPY: "Entropy (lower bound)",
}

DIVERGING = "RdBu"  # red (negative) -> white -> blue (positive)
SEQUENTIAL = "viridis"
BUCKETS = 21  # odd: the middle bucket is zero
DIFF_FLOOR, DIFF_RANGE = 0.01, 2.0  # |d| below 0.01 nat is near white; 2 nats and more saturate
RATIO_RANGE = 0.5  # ratios from 0.5 to 1.5, clamped
ENTROPY_RANGE = 4.0  # nats
NONE_STYLE = "background:#f8fafc;color:#94a3b8;outline:1px dotted #cbd5e1;outline-offset:-1px"
# the corrections marked in the token view: a session-state key holding correction labels (set by
# the Corrections panel, read by the token view), and how a clipped or masked token looks
CORRECTION_MARKS = "rg-correction-marks"
CLIPPED_STYLE = "border-bottom:3px solid #E69F00"
MASKED_STYLE = "text-decoration:line-through;text-decoration-thickness:2px;border-bottom:3px solid #7c3aed"


def _diverging(t: float) -> str:
    """``t`` in [-1, 1] -> an RdBu colour (red negative, blue positive)."""
    return sample_colorscale(DIVERGING, [(t + 1) / 2])[0]


def _stylesheet() -> str:
    rules = [
        f".rg-n{{{NONE_STYLE}}}",
        ".rg-x{box-shadow:0 0 0 1.5px #111 inset}",
        f".rg-kc{{{CLIPPED_STYLE}}}",
        f".rg-km{{{MASKED_STYLE}}}",
    ]
    for b in range(BUCKETS):
        bg = _diverging(2 * b / (BUCKETS - 1) - 1)
        rules.append(f".rg-d{b}{{background:{bg};color:{text_color_on(bg)}}}")
        eg = sample_colorscale(SEQUENTIAL, [b / (BUCKETS - 1)])[0]
        rules.append(f".rg-e{b}{{background:{eg};color:{text_color_on(eg)}}}")
    return "<style>" + "".join(rules) + "</style>"


STYLESHEET = _stylesheet()


def diff_position(d: float) -> float:
    """A signed log scale: 0.01 nat is faint, 0.1 clear, 2 nats saturated. Returns [-1, 1]."""
    scaled = math.log1p(abs(d) / DIFF_FLOOR) / math.log1p(DIFF_RANGE / DIFF_FLOOR)
    return math.copysign(min(1.0, scaled), d)


def _bucket(t: float) -> int:
    return int(round((max(-1.0, min(1.0, t)) + 1) / 2 * (BUCKETS - 1)))


@dataclass
class Overlay:
    """Per-position trainer logprobs, advantages and entropy bounds for one token strip (NaN = none)."""

    inference: np.ndarray
    trainer: np.ndarray
    advantages: np.ndarray
    entropy: np.ndarray
    mode: str = LOGPROB
    signals: object = None  # the rollout's RolloutSignals (for the correction marks)
    spans: tuple[tuple[int, int, int], ...] = ()  # (node, strip position of its sampled span, n sampled)
    marks: dict[str, np.ndarray] | None = None  # per shown correction label: 0 / 1 clipped / 2 masked per position
    # the joined row each call's span shows when not the join's default: node -> (sequence index, span start in it)
    rows: dict[int, tuple[int, int]] = field(default_factory=dict)
    leaves: dict[int, str] = field(default_factory=dict)  # node -> the leaf id of the row its span shows

    def facts(self, pos: int) -> list[tuple[str, str]]:
        """The pinned-token inspector's signals rows: the trainer logprob (and the row it is from),
        the difference and the ratio; none where the trainer gave nothing."""
        trainer, inference = self.trainer[pos], self.inference[pos]
        if not math.isfinite(trainer):
            return []
        node = next((k for k, at, n in self.spans if at <= pos < at + n), None)
        leaf = self.leaves.get(node) if node is not None else None
        out = [("trainer logprob", f"{trainer:.6f}" + (f" (row {leaf})" if leaf else ""))]
        if math.isfinite(inference):
            d = trainer - inference
            out.append(("Δ trainer − inf.", f"{d:+.4f} · ratio {math.exp(max(-20.0, min(20.0, d))):.4f}"))
        return out

    def show_corrections(self, labels: list[str]) -> None:
        """Mark the tokens each of these corrections (labels, docs/corrections.md) clips or masks;
        labels that do not parse are ignored. An empty list removes the marks."""
        self.marks = None
        signals: object = self.signals
        if not labels or signals is None or not getattr(signals, "rows", None):
            return
        chosen = []
        for label in labels:
            try:
                chosen.append(parse_correction(label))
            except CorrectionError:
                continue
        evaluation = signals.evaluate(chosen)  # type: ignore[attr-defined]
        n = self.inference.shape[0]
        marks = {}
        for c in evaluation.corrections:
            flags = np.zeros(n, dtype=np.int8)
            for node, at, count in self.spans:
                found = signals.calls.get(node)  # type: ignore[attr-defined]
                sequence, begin = self.rows.get(node) or ((-1, 0) if found is None else (found.sequence, found.begin))
                result = evaluation.rows[c.label].get(sequence)
                if result is None:
                    continue
                span = slice(begin, begin + count)
                flags[at : at + count][result.affected[span]] = 1
                flags[at : at + count][result.masked[span]] = 2
            marks[c.label] = flags
        self.marks = marks

    def mark_class(self, pos: int) -> str:
        """`` rg-km`` where a shown correction masks the token, `` rg-kc`` where one clips it."""
        if not self.marks:
            return ""
        strongest = max(int(flags[pos]) for flags in self.marks.values())
        return {0: "", 1: " rg-kc", 2: " rg-km"}[strongest]

    @property
    def advantage_range(self) -> float:
        """The colour scale's half-width for advantages: the largest |advantage| here (at least 0.1)."""
        finite = np.abs(self.advantages[np.isfinite(self.advantages)])
        return max(0.1, float(finite.max())) if finite.size else 1.0

    def available(self, mode: str) -> bool:
        """Whether any token of the strip has a value for ``mode``."""
        values = {DIFF: self.trainer, RATIO: self.trainer, ADVANTAGE: self.advantages, ENTROPY: self.entropy}
        return mode == LOGPROB or bool(np.isfinite(values[mode]).any())

    def css_class(self, pos: int) -> str | None:
        """The token's colour class under the current mode (``None``: keep the logprob colouring)."""
        if self.mode == LOGPROB:
            return None
        if self.mode in (DIFF, RATIO):
            trainer, inference = self.trainer[pos], self.inference[pos]
            if not (math.isfinite(trainer) and math.isfinite(inference)):
                return "rg-n"
            d = trainer - inference
            if self.mode == DIFF:
                return f"rg-d{_bucket(diff_position(d))}"
            ratio = math.exp(d)
            outside = " rg-x" if not RATIO_BAND[0] <= ratio <= RATIO_BAND[1] else ""
            return f"rg-d{_bucket((ratio - 1) / RATIO_RANGE)}{outside}"
        if self.mode == ADVANTAGE:
            a = self.advantages[pos]
            return "rg-n" if not math.isfinite(a) else f"rg-d{_bucket(a / self.advantage_range)}"
        h = self.entropy[pos]
        return "rg-n" if not math.isfinite(h) else f"rg-e{_bucket(2 * min(h, ENTROPY_RANGE) / ENTROPY_RANGE - 1)}"

    def tooltip_lines(self, pos: int) -> list[str]:
        """Both logprobs, the difference and ratio, the advantage and the entropy bound, where known."""
        lines = []
        trainer, inference = self.trainer[pos], self.inference[pos]
        if math.isfinite(trainer):
            line = f"trainer logprob {trainer:.4f}"
            if math.isfinite(inference):
                line = f"inference logprob {inference:.4f} · {line}"
                d = trainer - inference
                line += f" · Δ {d:+.4f} · ratio {math.exp(d):.4f}"
            lines.append(line)
        if math.isfinite(self.advantages[pos]):
            lines.append(f"advantage {self.advantages[pos]:+.4f}")
        if math.isfinite(self.entropy[pos]):
            lines.append(f"entropy ≥ {self.entropy[pos]:.3f} nats (from the recorded top-k)")
        for label, flags in (self.marks or {}).items():
            if flags[pos]:
                lines.append(f"{label}: {'masks' if flags[pos] == 2 else 'clips'} this token")
        return lines


def build(rollout: Rollout, parts: list[tuple[int, int]]) -> Overlay:
    """The overlay arrays for a strip made of ``parts`` ((node, context start) per call, as in tokens.py)."""
    inference, trainer, advantages, entropy = [], [], [], []
    spans = []
    offset = 0
    signals = rollout.signals
    for k, start in parts:
        call = rollout.calls[k]
        n_c = call.n_prompt - start if call.prompt_ids is not None else 0
        n_s = call.n_sampled
        pad = np.full(n_c, np.nan)
        own = (
            call.sampled_logprobs.astype(np.float64)
            if call.logprobs_aligned and call.sampled_logprobs is not None
            else np.full(n_s, np.nan)
        )
        found = signals.calls.get(k) if signals is not None else None
        inference += [pad, own]
        trainer += [pad, found.trainer if found is not None else np.full(n_s, np.nan)]
        adv = found.advantages if found is not None and found.advantages is not None else np.full(n_s, np.nan)
        advantages += [pad, adv]
        entropy += [pad, entropy_lower_bound(call.top_k, n_s)]
        spans.append((k, offset + n_c, n_s))
        offset += n_c + n_s

    def joined(arrays: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(arrays) if arrays else np.empty(0)

    leaves = {
        k: rollout.calls[rollout.sequences[signals.calls[k].sequence].leaf].node_id
        for k, _ in parts
        if signals is not None and k in signals.calls and signals.calls[k].sequence >= 0
    }
    return Overlay(
        joined(inference), joined(trainer), joined(advantages), joined(entropy), signals=signals, spans=tuple(spans),
        leaves=leaves,
    )  # fmt: skip


def show_rows(rollout: Rollout, overlay: Overlay | None, shown: dict[int, int]) -> None:
    """Fill each call's sampled span with the joined row ``shown`` for it (arrival index -> sequence
    index; the row picker's choice, or a Sequence tab's own row) instead of the join's default.
    A call the row does not cover keeps its default."""
    if overlay is None or rollout.signals is None:
        return
    for node, at, count in overlay.spans:
        sequence = shown.get(node)
        found = rollout.signals.calls.get(node)
        if sequence is None or (found is not None and found.sequence == sequence and node not in overlay.rows):
            continue
        arrays = row_arrays(rollout, node, sequence)
        if arrays is None:
            continue
        trainer, advantages = arrays
        overlay.trainer[at : at + count] = trainer
        overlay.advantages[at : at + count] = np.nan if advantages is None else advantages
        begin = next(b for s, b in rollout.signals.spans[node] if s == sequence)
        overlay.rows[node] = (sequence, begin)
        overlay.leaves[node] = rollout.calls[rollout.sequences[sequence].leaf].node_id


def _gradient(colours: list[str]) -> str:
    return (
        '<span style="display:inline-block;width:150px;height:11px;vertical-align:middle;border-radius:2px;'
        f'background:linear-gradient(90deg,{",".join(colours)})"></span>'
    )


def legend_html(overlay: Overlay | None, mode: str) -> str:
    """The legend for a non-logprob mode (and a note when this strip has no values for it)."""
    small = '<span style="font-size:11px">{}</span>'
    diverging = _gradient([_diverging(t) for t in np.linspace(-1, 1, 9)])
    if mode == DIFF:
        scale = (
            f"trainer − inference logprob {small.format('−2')} {diverging} {small.format('+2 nats')} "
            '<span style="color:#64748b">(signed log scale: ±0.01 faint, ±0.1 clear; red = the trainer finds the '
            "token less likely than the engine did)</span>"
        )
    elif mode == RATIO:
        scale = (
            f"importance ratio exp(Δ) {small.format('0.5')} {diverging} {small.format('1.5')} "
            f'<span style="color:#64748b">(black ring: outside [{RATIO_BAND[0]}, {RATIO_BAND[1]}])</span>'
        )
    elif mode == ADVANTAGE:
        r = overlay.advantage_range if overlay is not None else 1.0
        scale = f"advantage {small.format(f'−{r:.3g}')} {diverging} {small.format(f'+{r:.3g}')}"
    else:
        sequential = _gradient([sample_colorscale(SEQUENTIAL, [t])[0] for t in np.linspace(0, 1, 9)])
        scale = (
            f"entropy lower bound {small.format('0')} {sequential} {small.format(f'≥{ENTROPY_RANGE:g} nats')} "
            '<span style="color:#64748b">(from the recorded top-k alternatives only: the true entropy is at least '
            "this, possibly much more)</span>"
        )
    missing = ""
    if overlay is not None and not overlay.available(mode):
        why = (
            "no recorded top-k alternatives" if mode == ENTROPY else "no signals for these tokens: load a signals file"
        )
        missing = f'<span style="color:#b45309;font-weight:600">{html_text(why)}</span>'
    return (
        '<div style="font:12px system-ui,sans-serif;color:#334155;display:flex;flex-wrap:wrap;gap:14px;align-items:center">'
        f"<span>{scale}</span>"
        f'<span><span style="padding:1px 4px;border-radius:3px;{NONE_STYLE}">sampled</span> no value here</span>'
        f"{missing}</div>"
    )


def marks_legend(overlay: Overlay | None) -> str:
    """The legend of the correction marks shown (empty when none)."""
    if overlay is None or not overlay.marks:
        return ""
    counts = ", ".join(
        f"{html_text(label)}: {int(np.count_nonzero(flags == 1))} clipped, {int(np.count_nonzero(flags == 2))} masked"
        for label, flags in overlay.marks.items()
    )
    return (
        '<div class="rg-marks-legend" style="font:12px system-ui,sans-serif;color:#334155;margin:2px 0 4px 0">'
        f'<span style="padding:0 3px;{CLIPPED_STYLE}">clipped</span> '
        f'<span style="padding:0 3px;{MASKED_STYLE}">masked</span> '
        f'<span style="color:#64748b">by the corrections marked ({counts} on this strip)</span></div>'
    )
