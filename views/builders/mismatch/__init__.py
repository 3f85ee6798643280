"""The mismatch lens (pure builders, no streamlit): what trainer and inference logprobs disagree
on, and what each off-policy correction would do about it (docs/corrections.md). By job:

- ``choice.py``: which corrections are chosen at first and now (``CHOSEN``, ``initial_labels``);
- ``rows.py``: the row picker's model (``covering_rows``, ``default_row``, ``row_arrays``);
- ``points.py``: the data: compared tokens as points, per-call flags and shares, flagged tokens;
- ``figures.py``: the figures and the share-of-tokens colour scale;
- ``tables.py``: the side-by-side tables.

Every figure reads the joined rows of ``rollout.signals`` (``RowSignals.d``: one value per position
of a training row, NaN where not compared), so it works on whatever produced the signals. Callers
import from here: views/panels/corrections.py, views/panels/signals.py, views/state/signals.py,
the DAG's share colouring (views/builders/dag/) and the token overlay (views/builders/overlays.py).
"""

from rollout_graph.ui.builders.mismatch.choice import CHOSEN, chosen_labels, initial_labels
from rollout_graph.ui.builders.mismatch.figures import (
    COLOURS,
    NO_SHARE,
    SHARE_SCALE,
    colour,
    entropy_figure,
    position_figure,
    probability_figure,
    ratio_histogram,
    row_ratio_figure,
    scatter_figure,
    share_colours,
    share_gradient,
)
from rollout_graph.ui.builders.mismatch.points import (
    CLIPPED,
    MASKED,
    MISMATCH,
    NONE,
    OTHER_ROW,
    TOP_OUTLIERS,
    Flagged,
    Points,
    RowPoints,
    call_flags,
    call_shares,
    correction_shares,
    entropy_points,
    flagged_tokens,
    outliers,
    picked_point,
    row_points,
    scatter_groups,
    scatter_points,
    shown_rows,
    view_position,
    worst_token_texts,
)
from rollout_graph.ui.builders.mismatch.rows import (
    STEP_KEYS,
    RowChoice,
    covering_rows,
    default_reason,
    default_row,
    resolve_row,
    row_arrays,
    row_label,
)
from rollout_graph.ui.builders.mismatch.tables import (
    audit_comparison,
    comparison_frame,
    disagreement_frame,
    worst_frame,
)

__all__ = [
    "CHOSEN", "CLIPPED", "COLOURS", "MASKED", "MISMATCH", "NONE", "NO_SHARE", "OTHER_ROW", "SHARE_SCALE", "STEP_KEYS",
    "TOP_OUTLIERS", "Flagged", "Points", "RowChoice", "RowPoints", "audit_comparison", "call_flags", "call_shares",
    "chosen_labels", "colour", "comparison_frame", "correction_shares", "covering_rows", "default_reason",
    "default_row", "disagreement_frame", "entropy_figure", "entropy_points", "flagged_tokens", "initial_labels",
    "outliers", "picked_point", "position_figure", "probability_figure", "ratio_histogram", "resolve_row",
    "row_arrays", "row_label", "row_points", "row_ratio_figure", "scatter_figure", "scatter_groups",
    "scatter_points", "share_colours", "share_gradient", "shown_rows", "view_position", "worst_frame", "worst_token_texts",
]  # fmt: skip
