"""Colours, symbols and the logprob colour scale shared by every view."""

from __future__ import annotations

from plotly.colors import sample_colorscale

from graph.analysis.near_miss import COMPACTION, RESUMED, RETOKENIZED, REWRITTEN
from graph.core.roles import AGENT, AUXILIARY, DISCARDED
from graph.core.types import FORK, INNER, LEAF, ROOT

ROLE_COLORS = {AGENT: "#2563eb", AUXILIARY: "#d97706", DISCARDED: "#9ca3af"}
ROLE_LABELS = {
    AGENT: "agent: on a path that is the agent's work",
    AUXILIARY: "auxiliary: title, summary or other side call",
    DISCARDED: "discarded: a retry that led nowhere",
}

KIND_GLYPHS = {ROOT: "◆", FORK: "■", LEAF: "●", INNER: "○"}
KIND_LABELS = {
    ROOT: "root: a new conversation (no token prefix among earlier calls)",
    FORK: "fork: more than one call continued it",
    LEAF: "leaf: the end of a training sequence",
    INNER: "inner call of a chain",
}

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
