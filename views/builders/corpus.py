"""The Corpus page's training-signals filters and sort (pure): reward and trainer-vs-inference
mismatch, columns an audit has when it was run with ``--signals`` (docs/signals.md).

Entry points: ``has_signals(frame)``, ``filter_signals(frame, reward, min_diff, mismatch_only)``,
``sort_rows(frame, choice)``.

Where it sits: the widgets that set them are in views/panels/corpus.py."""

from __future__ import annotations

import pandas as pd

SORTS = {
    "file order": None,
    "max |Δ| (largest first)": ("max_abs_diff", False),
    "KL k3 (largest first)": ("kl_k3", False),
    "worst token |Δ| (largest first)": ("worst_abs_diff", False),
    "ratio ESS (lowest first)": ("ratio_ess", True),
    "reward (lowest first)": ("reward", True),
    "reward (highest first)": ("reward", False),
}


def has_signals(frame: pd.DataFrame) -> bool:
    """True when the audit carries signals columns with at least one value."""
    return "max_abs_diff" in frame and "reward" in frame and bool(frame[["reward", "max_abs_diff"]].notna().any().any())


def filter_signals(
    frame: pd.DataFrame, reward: tuple[float, float] | None, min_diff: float, mismatch_only: bool
) -> pd.DataFrame:
    """Rows whose reward is in range (rows without a reward are kept only without a range), whose
    max |Δ| is at least ``min_diff``, and with a logprob_mismatch call when ``mismatch_only``; pure."""
    keep = pd.Series(True, index=frame.index)
    if reward is not None:
        keep &= frame["reward"].between(reward[0], reward[1])
    if min_diff > 0:
        keep &= frame["max_abs_diff"].fillna(0) >= min_diff
    if mismatch_only:
        keep &= frame["n_mismatch_calls"].fillna(0) > 0
    return frame[keep]


def sort_rows(frame: pd.DataFrame, choice: str) -> pd.DataFrame:
    """The rows in the chosen order (rows without a value last); pure."""
    how = SORTS.get(choice)
    if how is None or how[0] not in frame:  # an audit written before the column existed
        return frame
    column, ascending = how
    return frame.sort_values(column, ascending=ascending, na_position="last", kind="stable")
