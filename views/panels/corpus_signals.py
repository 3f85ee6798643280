"""The corpus page's training-signals filters and sort: reward and trainer-vs-inference mismatch
(columns an audit has when it was run with ``--signals``; docs/signals.md)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from rollout_graph.ui.builders import mismatch

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


def render(frame: pd.DataFrame, shown: pd.DataFrame) -> pd.DataFrame:
    """The filter and sort widgets (only for an audit with signals); returns the rows to show."""
    if not has_signals(frame):
        return shown
    cols = st.columns([2, 1.4, 1.2, 1.6])
    rewards = frame["reward"].dropna()
    reward = None
    if len(rewards) and rewards.min() < rewards.max():
        low, high = float(rewards.min()), float(rewards.max())
        picked = cols[0].slider("Reward", low, high, (low, high))
        reward = None if picked == (low, high) else picked
    min_diff = cols[1].number_input("max |Δ| at least (nats)", min_value=0.0, value=0.0, step=0.1)
    mismatch_only = cols[2].checkbox("Only logprob mismatches")
    order = cols[3].selectbox("Sort by", list(SORTS))
    combined = mismatch.audit_comparison(shown)  # an audit run with --correction (docs/corrections.md)
    if combined is not None:
        st.caption("Off-policy corrections over the rollouts of this audit, side by side")
        st.table(combined.set_index("correction"))  # a static table: the audit's own table stays the first dataframe
    return sort_rows(filter_signals(shown, reward, float(min_diff), mismatch_only), order)
