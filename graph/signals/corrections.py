"""Off-policy corrections as data: what each framework's correction would do to these exact tokens.

Where it sits: training signals -> analyses, pure numpy, no I/O. It takes each joined training row's
``d = trainer_logprob - inference_logprob`` over its compared positions (rollout_graph.signals.join);
``inspect``, ``export``, ``audit``, ``compare`` and the app's corrections panel report what it returns.

Entry points: :func:`parse_correction` / :func:`parse_corrections` (``--correction NAME[:key=value,...]``
as a :class:`Correction`; :class:`CorrectionError` names a bad spec), :func:`apply` (one row: a
:class:`RowResult` of weights, affected and masked tokens), :func:`evaluate` (many rows: an
:class:`Evaluation`), :func:`divergence`, :func:`combine`, :func:`audit_columns`, :func:`text_lines`.

The definitions (``r``, ``R``, ``G``, weight, weight lost), each correction and its source, NaN
(not compared) and infinity (every log ratio bounded by :data:`LOG_BOUND` before ``exp``):
docs/corrections.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

CORRECTIONS_ENV = "ROLLOUT_GRAPH_CORRECTIONS"  # ``view --correction``: the app's initial choice (labels, ";")
LOG_BOUND = 20.0  # log ratios are bounded to [-20, 20] before exp (verl rollout_corr "safety bound")

TOKEN, SEQUENCE = "token", "sequence"
CLIP, MASK = "clip", "mask"


@dataclass(frozen=True, slots=True)
class Kind:
    """One kind of correction: its level, what it does, its parameters and their defaults."""

    name: str
    level: str  # TOKEN or SEQUENCE (a row correction: one decision per row)
    action: str  # CLIP (weights truncated) or MASK (positions or rows dropped)
    defaults: tuple[tuple[str, float], ...]
    summary: str


KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind("token_tis", TOKEN, CLIP, (("cap", 2.0),), "token weight min(r, cap); tokens with r > cap are clipped"),
        Kind(
            "token_mask",
            TOKEN,
            MASK,
            (("low", 0.5), ("high", 5.0)),
            "tokens with r < low or r > high are masked (weight 0); the others keep weight r (icepop)",
        ),
        Kind("seq_tis", SEQUENCE, CLIP, (("cap", 2.0),), "row weight min(R, cap); rows with R > cap are clipped"),
        Kind(
            "seq_mask",
            SEQUENCE,
            MASK,
            (("low", 0.0), ("high", 3.0)),
            "rows with R < low or R > high are masked whole (Seq-MIS); the others keep weight R",
        ),
        Kind(
            "geo_mask",
            SEQUENCE,
            MASK,
            (("low", 0.999), ("high", 1.001)),
            "rows whose geometric ratio G is outside [low, high] are masked whole (geometric rejection)",
        ),
    )
}


# four common corrections with their defaults: the app's first choice and the bundled corpus audit's
COMMON = ("token_tis:cap=2", "token_mask:low=0.5,high=5", "seq_mask:low=0,high=3", "geo_mask:low=0.999,high=1.001")


class CorrectionError(ValueError):
    """A ``--correction`` spec that names an unknown correction or parameter, or a bad value."""


@dataclass(frozen=True, slots=True)
class Correction:
    """One chosen correction with its parameters (defaults filled in)."""

    name: str
    params: tuple[tuple[str, float], ...]

    @property
    def kind(self) -> Kind:
        """The correction's :class:`Kind`."""
        return KINDS[self.name]

    @property
    def label(self) -> str:
        """The canonical spec, e.g. ``token_tis:cap=2``: unique per correction and parameters."""
        return self.name + ":" + ",".join(f"{k}={v:g}" for k, v in self.params)

    def param(self, key: str) -> float:
        """One parameter's value."""
        return dict(self.params)[key]

    def as_dict(self) -> dict[str, Any]:
        """``{"name", "params", "label"}``, as the JSON prints it."""
        return {"name": self.name, "params": dict(self.params), "label": self.label}


def default(name: str) -> Correction:
    """The named correction with its default parameters."""
    return Correction(name, KINDS[name].defaults)


def _known() -> str:
    return ", ".join(f"{k.name}:" + ",".join(f"{p}={v:g}" for p, v in k.defaults) for k in KINDS.values())


def parse_correction(text: str) -> Correction:
    """``NAME[:key=value,...]`` -> a :class:`Correction` (unnamed parameters keep their defaults).

    Raises:
        CorrectionError: an unknown name or key, a value that is not a finite non-negative number,
            a key given twice, or bounds with ``low > high``; the message says which and lists the
            known corrections.
    """
    spec = text.strip()
    name, _, rest = spec.partition(":")
    name = name.strip()
    if name not in KINDS:
        raise CorrectionError(f"unknown correction {name!r} in {text!r} (known: {_known()})")
    kind = KINDS[name]
    values = dict(kind.defaults)
    given: set[str] = set()
    for part in (p.strip() for p in rest.split(",")) if rest.strip() else ():
        key, eq, raw = part.partition("=")
        key = key.strip()
        if not eq:
            raise CorrectionError(f"{text!r}: {part!r} is not key=value")
        if key not in values:
            keys = ", ".join(values)
            raise CorrectionError(f"{text!r}: {name} has no parameter {key!r} (its parameters: {keys})")
        if key in given:
            raise CorrectionError(f"{text!r}: {key} is given twice")
        try:
            value = float(raw)
        except ValueError:
            raise CorrectionError(f"{text!r}: {key}={raw.strip()!r} is not a number") from None
        if not math.isfinite(value) or value < 0:
            raise CorrectionError(f"{text!r}: {key} must be a finite number >= 0, not {raw.strip()}")
        values[key] = value
        given.add(key)
    if kind.action == CLIP and values["cap"] <= 0:
        raise CorrectionError(f"{text!r}: cap must be > 0")
    if "low" in values and values["low"] > values["high"]:
        raise CorrectionError(f"{text!r}: low {values['low']:g} is above high {values['high']:g}")
    return Correction(name, tuple((k, values[k]) for k, _ in kind.defaults))


def parse_corrections(texts: Iterable[str] | None) -> list[Correction]:
    """Every spec parsed, duplicates (same canonical label) once, in the order given.

    Raises:
        CorrectionError: as :func:`parse_correction`.
    """
    out: dict[str, Correction] = {}
    for text in texts or ():
        c = parse_correction(text)
        out.setdefault(c.label, c)
    return list(out.values())


def bounded_exp(log_ratio: np.ndarray | float) -> np.ndarray:
    """``exp`` of a log ratio bounded to ``[-LOG_BOUND, LOG_BOUND]`` (NaN stays NaN)."""
    return np.exp(np.clip(np.asarray(log_ratio, dtype=np.float64), -LOG_BOUND, LOG_BOUND))


@dataclass(slots=True)
class RowResult:
    """One correction applied to one row.

    ``weights`` has one value per position of the input (NaN where not compared); ``affected`` is
    True where the correction clips or masks the token; ``masked`` where the weight is 0 because of
    a mask (a subset of ``affected``).
    """

    weights: np.ndarray
    affected: np.ndarray
    masked: np.ndarray
    n_tokens: int  # compared positions
    row_ratio: float | None  # R or G for row corrections (bounded), None for token corrections
    weight_lost: float

    @property
    def row_affected(self) -> bool:
        """True when the correction touches any token of the row."""
        return bool(self.affected.any())

    @property
    def tokens_affected(self) -> int:
        """Compared positions clipped or masked."""
        return int(np.count_nonzero(self.affected))


def apply(correction: Correction, d: np.ndarray) -> RowResult:
    """Apply ``correction`` to one row's ``d`` (one value per position; NaN = not compared)."""
    d = np.asarray(d, dtype=np.float64)
    compared = ~np.isnan(d)
    n = int(np.count_nonzero(compared))
    weights = np.full(d.shape, np.nan)
    affected = np.zeros(d.shape, dtype=bool)
    masked = np.zeros(d.shape, dtype=bool)
    kind = correction.kind
    if kind.level == TOKEN:
        r = bounded_exp(d[compared])
        if kind.action == CLIP:
            cap = correction.param("cap")
            hit = r > cap
            w = np.minimum(r, cap)
            lost = float(np.sum(r - w))
        else:
            hit = (r < correction.param("low")) | (r > correction.param("high"))
            w = np.where(hit, 0.0, r)
            lost = float(np.sum(r[hit]))
            masked[compared] = hit
        weights[compared] = w
        affected[compared] = hit
        return RowResult(weights, affected, masked, n, None, lost)
    if n == 0:
        return RowResult(weights, affected, masked, 0, None, 0.0)
    # an infinite d counts as +-LOG_BOUND in the sum (so +inf and -inf in one row stay defined)
    total = float(np.sum(np.clip(d[compared], -LOG_BOUND, LOG_BOUND)))
    log_ratio = total / n if correction.name == "geo_mask" else total
    ratio = float(bounded_exp(log_ratio))
    if kind.action == CLIP:
        cap = correction.param("cap")
        row_hit = ratio > cap
        row_w = min(ratio, cap)
        row_lost = ratio - row_w
    else:
        row_hit = ratio < correction.param("low") or ratio > correction.param("high")
        row_w = 0.0 if row_hit else ratio
        row_lost = ratio if row_hit else 0.0
        masked[compared] = row_hit
    weights[compared] = row_w
    affected[compared] = row_hit
    return RowResult(weights, affected, masked, n, ratio, float(row_lost))


@dataclass(slots=True)
class Totals:
    """One correction's totals over many rows (order-free: sums and counts only)."""

    correction: Correction
    n_tokens: int = 0
    n_sequences: int = 0
    tokens_affected: int = 0
    sequences_affected: int = 0
    weight_lost: float = 0.0
    sum_w: float = 0.0
    sum_w2: float = 0.0

    def add(self, result: RowResult) -> None:
        """Count one row."""
        if result.n_tokens == 0:
            return
        w = result.weights[~np.isnan(result.weights)]
        self.n_tokens += result.n_tokens
        self.n_sequences += 1
        self.tokens_affected += result.tokens_affected
        self.sequences_affected += int(result.row_affected)
        self.weight_lost += result.weight_lost
        self.sum_w += float(np.sum(w))
        self.sum_w2 += float(np.sum(w * w))

    def as_dict(self) -> dict[str, Any]:
        """The correction's entry in ``inspect --json`` ``signals.corrections`` (docs/corrections.md)."""
        return {
            **self.correction.as_dict(),
            "n_tokens": self.n_tokens,
            "n_sequences": self.n_sequences,
            "tokens_affected": self.tokens_affected,
            "sequences_affected": self.sequences_affected,
            "share_tokens": self.tokens_affected / self.n_tokens if self.n_tokens else None,
            "weight_lost": self.weight_lost,
            "ess": _ess(self.sum_w, self.sum_w2, self.n_tokens),
            # so totals over many rollouts (an audit) combine exactly, ESS included: combine()
            "sum_weights": self.sum_w,
            "sum_weights_squared": self.sum_w2,
        }


def _ess(sum_w: float, sum_w2: float, n: int) -> float | None:
    """``(sum w)^2 / (n sum w^2)``: 1 when every weight is equal, 1/n when one token holds them all."""
    if n == 0 or sum_w2 <= 0:
        return None
    return sum_w * sum_w / (n * sum_w2)


def divergence(d: np.ndarray) -> dict[str, Any]:
    """``k1`` (mean of ``-d``), ``k2`` (mean of ``d^2 / 2``), ``k3`` (mean of ``r - 1 - d``) and
    ``ess`` (of the uncorrected token ratios ``r``) over the compared values of ``d``.

    k1, k2 and k3 estimate KL(inference || trainer) from tokens the inference engine sampled
    (Schulman's estimators); ``r`` is bounded as everywhere here, and ``d`` too for k1 and k2 so an
    infinite value gives the bound's figure, not ``inf``. Every figure is ``None`` without values.
    """
    d = np.asarray(d, dtype=np.float64)
    d = np.clip(d[~np.isnan(d)], -LOG_BOUND, LOG_BOUND)
    if d.size == 0:
        return {"k1": None, "k2": None, "k3": None, "ess": None}
    r = np.exp(d)
    return {
        "k1": float(np.mean(-d)),
        "k2": float(np.mean(d * d / 2)),
        "k3": float(np.mean(r - 1.0 - d)),
        "ess": _ess(float(r.sum()), float((r * r).sum()), int(d.size)),
    }


@dataclass(slots=True)
class Evaluation:
    """Chosen corrections applied to a set of rows (one rollout, or many).

    ``rows[label][key]`` is each row's :class:`RowResult`; ``totals[label]`` the order-free totals.
    """

    corrections: list[Correction]
    rows: dict[str, dict[Any, RowResult]] = field(default_factory=dict)
    totals: dict[str, Totals] = field(default_factory=dict)

    def as_list(self) -> list[dict[str, Any]]:
        """``signals.corrections`` of ``inspect --json``: one entry per correction, in the order chosen."""
        return [self.totals[c.label].as_dict() for c in self.corrections]

    def disagreements(self) -> list[dict[str, Any]]:
        """For each pair of corrections: tokens only the first touches, only the second, and both.

        ``masked_kept`` counts tokens the first masks (weight 0) that the second keeps untouched.
        """
        out = []
        for i, a in enumerate(self.corrections):
            for b in self.corrections[i + 1 :]:
                only_a = only_b = both = a_masks_b_keeps = b_masks_a_keeps = 0
                for key, ra in self.rows[a.label].items():
                    rb = self.rows[b.label][key]
                    only_a += int(np.count_nonzero(ra.affected & ~rb.affected))
                    only_b += int(np.count_nonzero(rb.affected & ~ra.affected))
                    both += int(np.count_nonzero(ra.affected & rb.affected))
                    a_masks_b_keeps += int(np.count_nonzero(ra.masked & ~rb.affected))
                    b_masks_a_keeps += int(np.count_nonzero(rb.masked & ~ra.affected))
                out.append(
                    {
                        "a": a.label,
                        "b": b.label,
                        "only_a": only_a,
                        "only_b": only_b,
                        "both": both,
                        "a_masks_b_keeps": a_masks_b_keeps,
                        "b_masks_a_keeps": b_masks_a_keeps,
                    }
                )
        return out


def evaluate(corrections: Sequence[Correction], rows: Iterable[tuple[Any, np.ndarray]]) -> Evaluation:
    """Apply every correction to every ``(key, d)`` row; ``d`` has NaN where not compared."""
    out = Evaluation(list(corrections))
    for c in out.corrections:
        out.rows[c.label] = {}
        out.totals[c.label] = Totals(c)
    for key, d in rows:
        for c in out.corrections:
            result = apply(c, d)
            out.rows[c.label][key] = result
            out.totals[c.label].add(result)
    return out


AUDIT_KEYS = (
    "label", "n_tokens", "n_sequences", "tokens_affected", "sequences_affected", "share_tokens", "weight_lost",
    "ess", "sum_weights", "sum_weights_squared",
)  # fmt: skip


def combine(per_rollout: Iterable[list[dict[str, Any]] | None]) -> list[dict[str, Any]]:
    """Totals over many rollouts (an audit's ``corrections`` column): counts, weight lost and the
    weight sums add up, so share and ESS are exact over the whole set. One entry per label, in the
    order first seen; rollouts without the column are skipped."""
    out: dict[str, dict[str, Any]] = {}
    for entries in per_rollout:
        for e in entries or ():
            t = out.setdefault(e["label"], dict.fromkeys(AUDIT_KEYS[1:], 0) | {"label": e["label"]})
            for k in ("n_tokens", "n_sequences", "tokens_affected", "sequences_affected", "weight_lost"):
                t[k] += e[k] or 0
            t["sum_weights"] += e.get("sum_weights") or 0.0
            t["sum_weights_squared"] += e.get("sum_weights_squared") or 0.0
    for t in out.values():
        t["share_tokens"] = t["tokens_affected"] / t["n_tokens"] if t["n_tokens"] else None
        t["ess"] = _ess(t["sum_weights"], t["sum_weights_squared"], t["n_tokens"])
    return list(out.values())


def audit_columns(summary: dict[str, Any]) -> dict[str, Any]:
    """The audit's correction columns from a rollout's signals summary (docs/corrections.md)."""
    worst = summary.get("worst_tokens") or []
    entries = summary.get("corrections")
    return {
        "kl_k1": summary.get("k1"),
        "kl_k2": summary.get("k2"),
        "ratio_ess": summary.get("ess"),
        "worst_abs_diff": abs(worst[0]["d"]) if worst else None,
        "worst_tokens": worst,
        "corrections": None if entries is None else [{k: e[k] for k in AUDIT_KEYS} for e in entries],
    }


def text_lines(entries: list[dict[str, Any]]) -> list[str]:
    """One line per correction for the terminal (``inspect``, ``compare``)."""
    lines = []
    for e in entries:
        share = "—" if e["share_tokens"] is None else f"{e['share_tokens']:.1%}"
        ess = "—" if e["ess"] is None else f"{e['ess']:.3f}"
        lines.append(
            f"{e['label']}: {e['tokens_affected']:,} of {e['n_tokens']:,} tokens ({share}) · "
            f"{e['sequences_affected']} of {e['n_sequences']} rows · weight lost {e['weight_lost']:.4g} · ESS {ess}"
        )
    return lines
