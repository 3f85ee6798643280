"""Colours, symbols and the logprob colour scale every view shares (pure).

Entry points: ``ROLE_COLORS`` / ``ROLE_GLYPHS`` / ``ROLE_LABELS`` (role by colour, lightness and
marker, never colour alone), ``KIND_GLYPHS`` / ``KIND_LABELS`` (root, fork, leaf, inner), the
rings' colours (``SELECTED_RING``, ``HIGHLIGHT_RING``, ``NEWEST_RING``), ``role_symbol``,
``logprob_color`` and ``text_color_on``.

Where it sits: read by the DAG, the timeline, the token views, the legends and the bundle's
template colours (docs/user-guide.md, "Colour")."""

from __future__ import annotations

from plotly.colors import sample_colorscale

from rollout_graph.analysis.near_miss import COMPACTION, RESUMED, RETOKENIZED, REWRITTEN
from rollout_graph.core.roles import AGENT, AUXILIARY, DISCARDED
from rollout_graph.core.types import FORK, INNER, LEAF, ROOT

# Role is never colour alone (docs/user-guide.md, Colour): the three colours differ in lightness as
# well as hue, so they stay apart under protanopia, deuteranopia and tritanopia (a test simulates
# them), and each role has its own marker variant in the DAG and bar pattern in the timeline.
ROLE_COLORS = {AGENT: "#1e40af", AUXILIARY: "#d97706", DISCARDED: "#d1d5db"}
ROLE_LINES = {AGENT: "#ffffff", AUXILIARY: "#451a03", DISCARDED: "#334155"}  # marker outline (draws the dot and x)
ROLE_TEXT = {AGENT: "#ffffff", AUXILIARY: "#111111", DISCARDED: "#111111"}  # text on the role colour
ROLE_PATTERNS = {AGENT: "", AUXILIARY: "/", DISCARDED: "x"}  # timeline bars: plain, hatched, cross-hatched
ROLE_GLYPHS = {AGENT: "●", AUXILIARY: "◉", DISCARDED: "⊗"}  # filled, a centre dot, crossed out
_CROSSED = {0: 28, 1: 30, 2: 32, 100: 128}  # plotly symbol numbers: circle, square, diamond, circle-open -> "-x"


def role_symbol(kind_symbol: int, role: str) -> int:
    """The plotly symbol number for a call: its kind's shape, then a centre dot for an auxiliary
    call and a cross for a discarded one, so role does not rest on colour alone."""
    if role == DISCARDED:
        return _CROSSED.get(kind_symbol, kind_symbol)
    if role == AUXILIARY:
        return kind_symbol + 200  # "-dot" ("circle-open" + 200 is "circle-open-dot")
    return kind_symbol


# Legend words (one meaning each, the glossary's words: docs/semantics.md). "continued" is kept for
# the near-miss chip ("nearly continued"); exact links are said with "extends".
ROLE_LABELS = {
    AGENT: "agent: on the path of the agent's work",
    AUXILIARY: "auxiliary: title, summary or other side call",
    DISCARDED: "discarded: abandoned, a sibling was kept (no trained row goes through it)",
}

# Rings in the DAG, one meaning each (docs/semantics.md, Glossary)
SELECTED_RING = "#0f172a"  # the selected call: a thick dark ring and its boxed id
HIGHLIGHT_RING = "#e11d48"  # search hits and a chosen findings group
NEWEST_RING = "#16a34a"  # the newest call of a growing trace

KIND_GLYPHS = {ROOT: "◆", FORK: "■", LEAF: "●", INNER: "○"}
KIND_LABELS = {
    ROOT: "root: no earlier call's ids start its prompt",
    FORK: "fork: more than one call extends its ids",
    LEAF: "leaf: the end of a training row",
    INNER: "inner: one parent, one child",
}

# Token spans: context (mask 0) vs context the policy sampled earlier (the origin view). Clearly
# apart in hue and lightness, also under colour-vision deficiency (tested).
CONTEXT_BACKGROUND = "#eef2f7"
ORIGIN_BACKGROUND = "#b4a5f5"

# Near-miss links worth a dashed edge in the DAG: history relations, not retries or new conversations.
NEAR_MISS_DRAWN = (REWRITTEN, RETOKENIZED, COMPACTION, RESUMED)

# Logprobs are coloured on cividis (perceptually uniform, colour-blind safe) from LOGPROB_FLOOR
# (dark: unlikely) to 0 (bright: certain).
LOGPROB_SCALE = "cividis"
LOGPROB_FLOOR = -8.0


def logprob_color(logprob: float) -> str:
    t = min(1.0, max(0.0, 1.0 - logprob / LOGPROB_FLOOR))
    return sample_colorscale(LOGPROB_SCALE, [t])[0]


def text_color_on(rgb: str) -> str:
    """Black or white, whichever reads better on an ``rgb(r, g, b)`` background."""
    r, g, b = (float(v) for v in rgb[rgb.index("(") + 1 : -1].split(","))
    return "#111" if 0.299 * r + 0.587 * g + 0.114 * b > 140 else "#fff"
