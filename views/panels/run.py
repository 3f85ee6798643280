"""The Run page: a training run's trends per step, a step's rollouts, a rollout into the explorer.

Entry points: ``render(paths, open_rollout)`` and ``figures(table)``. The per-rollout summary table
comes from graph/reports/run.py (the audit engine, cached as Parquet; ``rollout-graph run DIR``
fills the same cache on every core), so drawing 500 steps of 256 rollouts reads one table and
never a trace.

Where it sits: the whole of views/screens/run.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from rollout_graph.escape import md, plot
from rollout_graph.reports.reconcile import AUDIT_COLUMNS as RECONCILE_COLUMNS
from rollout_graph.reports.run import run_table, step_rollouts
from rollout_graph.ui.state.sources import run_heavy

STEP_KEY = "rg_run_step"  # the step whose rollouts are listed
TABLE_KEY = "rg_run_table"
NOTICE_KEY = "rg_run_notice"
CHART_KEYS = tuple(f"rg_run_chart_{name}" for name in ("volume", "tokens", "reward", "rates", "findings", "mismatch"))
# Findings in the levels' colours (FATAL red, WARN amber, INFO grey); other traces take plotly's.
COLOURS = {"FATAL": "#d62728", "WARN": "#ff9f1c", "INFO": "#9aa0a6"}
ROLLOUT_COLUMNS = (
    "session_id", "source_file", "n_turns", "reward", "n_fatal", "n_warn", "finding_codes", "n_trainable_tokens",
    "n_discarded", "n_broken_replays", "mean_abs_diff", "kl_k3", "fidelity", "error", *RECONCILE_COLUMNS,
)  # fmt: skip


@st.cache_resource(
    max_entries=4,
    show_spinner="Summarising every rollout of the run once (cached on disk; `rollout-graph run DIR` does it on every core)…",
)
def _summary(paths: tuple[str, ...], stamp: tuple) -> tuple[pd.DataFrame, dict]:
    """The per-rollout table and the run summary (``stamp`` changes when a file does). A resource, not
    data: 128,000 rows are not copied on every rerun; nothing here mutates them."""
    table, summary = run_heavy(run_table, list(paths))
    return table.to_pandas(), summary


def _stamp(paths: list[str]) -> tuple:
    """Cheap identity of the run's files: count and newest modification, so new steps show up."""
    newest, count = 0, 0
    for p in paths:
        for f in Path(p).rglob("*"):
            if f.is_file():
                count += 1
                newest = max(newest, f.stat().st_mtime_ns)
    return count, newest


def _step_ticks(steps: pd.DataFrame) -> dict:
    """Integer ticks on the step axis: every step when there are few, else at least one step apart."""
    values = sorted({int(v) for v in steps["step"].dropna()}) if "step" in steps else []
    if 0 < len(values) <= 12:
        return {"tickmode": "array", "tickvals": values}
    return {"tickmode": "auto", "nticks": 12}


def figures(steps: pd.DataFrame) -> dict[str, go.Figure]:
    """The trend charts, one per figure family; x is the step everywhere; pure."""

    def fig(title: str, traces: list[tuple[str, str, str | None]], percent: bool = False) -> go.Figure:
        f = go.Figure()
        for column, name, axis in traces:
            if column in steps and steps[column].notna().any():
                f.add_trace(
                    go.Scattergl(
                        x=steps["step"], y=steps[column], name=plot(name), mode="lines+markers",
                        marker={"size": 4, "color": COLOURS.get(name)}, line={"color": COLOURS.get(name)},
                        yaxis=axis or "y",
                    )
                )  # fmt: skip
        layout = {
            "title": {"text": title, "font": {"size": 14}},
            "height": 250,
            "margin": {"l": 50, "r": 50, "t": 40, "b": 30},
            "legend": {"orientation": "h", "y": -0.25, "font": {"size": 11}},
            "clickmode": "event+select",
            # steps are whole numbers: never a tick at 1.2 (a run of 3 steps ticks each one)
            "xaxis": {"title": None, "tickformat": "d", **_step_ticks(steps)},
            "yaxis": {"rangemode": "tozero"},
        }
        if percent:
            layout["yaxis"] = {"tickformat": ".0%", "rangemode": "tozero"}
        if any(axis == "y2" for _, _, axis in traces):
            layout["yaxis2"] = {"overlaying": "y", "side": "right", "showgrid": False, "rangemode": "tozero"}
        f.update_layout(**layout)
        return f

    return {
        CHART_KEYS[0]: fig("Rollouts and calls", [("n_rollouts", "rollouts", None), ("n_calls", "calls", None)]),
        CHART_KEYS[1]: fig("Tokens", [("n_tokens", "all tokens", None), ("n_trainable_tokens", "trainable tokens (rows)", None)]),
        CHART_KEYS[2]: fig("Reward", [("reward_mean", "mean", None), ("reward_min", "min", None), ("reward_max", "max", None)]),
        CHART_KEYS[3]: fig("Discarded and broken calls", [("discard_rate", "discard rate", None), ("break_rate", "broken-replay rate", None)], percent=True),
        CHART_KEYS[4]: fig("Findings", [("n_fatal", "FATAL", None), ("n_warn", "WARN", None), ("n_info", "INFO", None)]),
        CHART_KEYS[5]: fig("Trainer vs inference", [("mean_abs_diff", "mean |Δ| (nats)", None), ("kl_k3", "KL k3 (right)", "y2")]),
    }  # fmt: skip


def _clicked_step() -> int | None:
    """The step of a point clicked in any trend chart (the newest click wins)."""
    for key in CHART_KEYS:
        event = st.session_state.get(key)
        points = getattr(getattr(event, "selection", None), "points", None) or (
            (event or {}).get("selection", {}).get("points") if isinstance(event, dict) else None
        )
        if points:
            x = points[0].get("x")
            if x is not None:
                return int(x)
    return None


def _on_chart_click() -> None:
    step = _clicked_step()
    if step is not None:
        st.session_state[STEP_KEY] = step


def render(cli_directories: list[str], open_rollout: Callable[[str, str], str | None]) -> None:
    """The page. ``open_rollout(file, session_id)`` switches the explorer to a rollout (or says why not)."""
    if not cli_directories:
        st.markdown("##### Run")
        st.info(
            "Open a training run's output folder: `rollout-graph view runs/my-run/` (prime-rl, verifiers, NeMo-RL, "
            "TRL, verl, SkyRL dumps; docs/formats.md, 'Open your run'). `rollout-graph run runs/my-run/` prints the "
            "same table and fills the cache this page reads."
        )
        return
    frame, summary = _summary(tuple(cli_directories), _stamp(cli_directories))
    steps = pd.DataFrame(summary["steps"])
    formats = ", ".join(f"{md(k)} {v:,}" for k, v in sorted(summary["formats"].items()))
    st.markdown(
        f"##### Run: {summary['n_steps']:,} steps · {summary['n_rollouts']:,} rollouts"
        + (f" · {formats}" if formats else "")
    )
    notes = []
    if summary["n_rollouts_without_step"]:
        n = summary["n_rollouts_without_step"]
        notes.append(f"{n:,} rollout{'s name' if n != 1 else ' names'} no step (not charted)")
    if summary["n_file_errors"]:
        n = summary["n_file_errors"]
        notes.append(f"{n:,} file{'s' if n != 1 else ''} could not be read (listed below)")
    notes.append("summaries " + ("read from the cache" if summary["from_cache"] else "computed now and cached"))
    st.caption(" · ".join(notes) + " · click a point for that step's rollouts")
    if steps.empty:
        st.info("No rollout here names a training step (a step_N folder, global_step_N, N.jsonl or a step field).")
        return
    charts = figures(steps)
    keys = list(charts)
    for row in (keys[:2], keys[2:4], keys[4:]):
        cols = st.columns(2)
        for col, key in zip(cols, row, strict=True):
            col.plotly_chart(
                charts[key], key=key, on_select=_on_chart_click, selection_mode=("points",), width="stretch",
                config={"displaylogo": False},
            )  # fmt: skip
    step_values = steps["step"].astype(int).tolist()
    if st.session_state.get(STEP_KEY) not in step_values:
        st.session_state[STEP_KEY] = step_values[-1]
    st.selectbox("Step", step_values, key=STEP_KEY, width=240)
    _step_table(frame, int(st.session_state[STEP_KEY]), steps, open_rollout, cli_directories)
    if summary["file_errors"]:
        with st.expander(f"Files that could not be read ({summary['n_file_errors']:,})"):
            for e in summary["file_errors"]:
                st.markdown(f"- `{md(e['file'])}`: {md(e['error'])}")


def _relative(file: str, roots: list[str]) -> str:
    for root in roots:
        try:
            return str(Path(file).resolve().relative_to(Path(root).resolve()))
        except ValueError:
            continue
    return Path(file).name


def _step_table(frame: pd.DataFrame, step: int, steps: pd.DataFrame, open_rollout, roots: list[str]) -> None:
    picked = pd.DataFrame(step_rollouts(_records(frame, step), step))
    figures_row = steps[steps["step"] == step].iloc[0]
    reward = figures_row["reward_mean"]
    st.markdown(
        f"###### Step {step}: {int(figures_row['n_rollouts']):,} rollouts · {int(figures_row['n_calls']):,} calls"
        + ("" if pd.isna(reward) else f" · mean reward {reward:.3f}")
        + f" · FATAL {int(figures_row['n_fatal'])} · WARN {int(figures_row['n_warn'])}"
        + (f" · most found: {md(', '.join(figures_row['top_codes']))}" if len(figures_row["top_codes"]) else "")
    )
    if NOTICE_KEY in st.session_state:
        st.warning(md(st.session_state.pop(NOTICE_KEY)))
    shown = picked[[c for c in ROLLOUT_COLUMNS if c in picked]] if len(picked) else picked
    if len(shown):  # the file relative to the run's folder; the full path stays for opening it
        shown = shown.assign(source_file=[_relative(f, roots) for f in shown["source_file"]])
    st.caption("Worst first (FATAL, WARN, then lowest reward) · click a row to open the rollout in the explorer")

    def opened() -> None:
        rows = st.session_state[TABLE_KEY].selection.rows
        if rows:
            row = picked.iloc[rows[0]]
            why = open_rollout(str(row["source_file"]), str(row["session_id"]))
            if why:
                st.session_state[NOTICE_KEY] = why

    st.dataframe(
        shown, hide_index=True, width="stretch", selection_mode="single-row", key=f"{TABLE_KEY}",
        on_select=opened, height=320,
    )  # fmt: skip


def _records(frame: pd.DataFrame, step: int) -> list[dict]:
    """Only this step's rows become dicts (the whole run can be 128,000 rows)."""
    if "step" not in frame:
        return []
    part = frame[frame["step"] == step]
    return part.astype(object).where(part.notna(), None).to_dict("records")  # NaN (a missing int) -> None
