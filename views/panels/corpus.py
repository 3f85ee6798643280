"""The Corpus audit page: an audit table (as ``rollout-graph audit`` writes it), filters,
distributions, and a row that opens its rollout in the explorer when that file is one the app may read.

Entry point: ``render(cli_directories)``; ``filter_rows``, ``count_step`` and ``count_axis`` shape
its table and charts; ``signals_filters`` draws the reward and mismatch filters
(views/builders/corpus.py applies them).

Where it sits: the whole of views/screens/corpus.py."""

from __future__ import annotations

import math
from functools import partial
from pathlib import Path

import pandas as pd
import plotly.express as px
import streamlit as st

from rollout_graph.escape import md, plot
from rollout_graph.ingest import limits
from rollout_graph.ingest.files.parquet import read_parquet_bounded
from rollout_graph.reports import audit
from rollout_graph.resources import SAMPLES
from rollout_graph.signals.corrections import COMMON
from rollout_graph.signals.join import DEFAULT_THRESHOLD
from rollout_graph.ui import state
from rollout_graph.ui.builders import mismatch
from rollout_graph.ui.builders.corpus import SORTS, filter_signals, has_signals, sort_rows
from rollout_graph.ui.state.signals import BUNDLED_SIGNALS
from rollout_graph.ui.state.sources import (
    BUNDLED,
    COMMAND_LINE,
    UPLOAD,
    UploadTooLarge,
    bundled_files,
    files_under,
    load_uploads,
    run_heavy,
)

BUNDLED_AUDIT = "Bundled samples (audited now)"
COMMAND_LINE_AUDIT = "Command-line traces (audited now)"
UPLOADED = "Upload an audit Parquet"
UPLOADED_TRACES = "Uploaded traces (audited now)"  # the trace files dropped in the explorer's sidebar
FOLDERS = "Parquet files in the command-line folders"
NOTICE = state.CORPUS_NOTICE


@st.cache_data(max_entries=8, show_spinner="Auditing…")
def _audit_bundled(paths: tuple[str, ...]) -> pd.DataFrame:
    signals = (str(BUNDLED_SIGNALS),) if BUNDLED_SIGNALS.exists() else ()  # docs/signals.md
    # off the script thread, bounded
    corrections = COMMON if signals else ()  # docs/corrections.md: the Corpus page compares them
    rows = run_heavy(audit.run_local, [Path(p) for p in paths], 1, None, None, signals, DEFAULT_THRESHOLD, corrections)
    frame = pd.DataFrame(rows, columns=list(audit.COLUMNS))
    # shown relative to the app, never as a server path
    frame["source_file"] = [str(Path(p).relative_to(SAMPLES.parent)) for p in frame["source_file"]]
    return frame


@st.cache_data(max_entries=8, show_spinner="Auditing the command-line traces…")
def _audit_files(paths: tuple[str, ...], mtimes: tuple[float, ...]) -> pd.DataFrame:
    """The trace files under the folders given to ``rollout-graph view`` (re-audited when one changes)."""
    rows = run_heavy(audit.run_local, [Path(p).resolve() for p in paths], 1, None, None, ())
    return pd.DataFrame(rows, columns=list(audit.COLUMNS))


NOT_RECORDED = "not recorded"  # a rollout whose records name no harness (a capture made without one)


def _shown_file(path: str, cli_directories: list[str]) -> str:
    """A trace file as the table shows it: relative to the command-line folder it is under (never
    the server's absolute path), else its name."""
    p = Path(path)
    for folder in cli_directories:
        root = Path(folder).resolve()
        base = root if root.is_dir() else root.parent
        try:
            return str(p.resolve().relative_to(base))
        except ValueError:
            continue
    return p.name if p.is_absolute() else path


@st.cache_data(max_entries=8, show_spinner=False)
def _read_parquet_cached(data: bytes, name: str) -> pd.DataFrame:
    # Row counts and sizes from the footer first, under the app's limits (docs/limits.md).
    return read_parquet_bounded(name, data, limits.for_app()).to_pandas()


def _read_parquet(data: bytes, name: str) -> pd.DataFrame | None:
    try:
        return _read_parquet_cached(data, name)
    except ValueError as exc:  # LimitExceeded too: a named refusal, never an unbounded read
        st.error(md(exc))
        return None


def _audit_uploads(uploads) -> pd.DataFrame | None:
    """The uploaded trace files' rollouts as audit rows (the same rows `rollout-graph audit` writes),
    from the workspace the explorer already analysed."""
    try:
        workspace = load_uploads(uploads)
    except UploadTooLarge as exc:
        st.error(md(exc))
        return None
    rows = [audit.audit_row(r, Path(r.calls[0].source).name) for r in workspace.rollouts.values()]
    return pd.DataFrame(rows, columns=list(audit.COLUMNS))


def _table(cli_directories: list[str]) -> pd.DataFrame | None:
    # traces given on the command line come first: the page opens on them; then traces uploaded
    uploads = st.session_state.get(state.KEPT_UPLOADS)
    kinds = ([COMMAND_LINE_AUDIT] if cli_directories else []) + ([UPLOADED_TRACES] if uploads else [])
    kinds += [BUNDLED_AUDIT, UPLOADED] + ([FOLDERS] if cli_directories else [])
    kind = st.sidebar.radio("Audit table", kinds, key=state.CORPUS_SOURCE)
    if kind == UPLOADED_TRACES:
        return _audit_uploads(uploads)
    if kind == COMMAND_LINE_AUDIT:
        files = files_under(cli_directories)
        if not files:
            st.info("No trace files under the command-line folders.")
            return None
        return _audit_files(tuple(str(p) for p in files), tuple(p.stat().st_mtime for p in files))
    if kind == BUNDLED_AUDIT:
        return _audit_bundled(tuple(str(p) for p in bundled_files()))
    if kind == UPLOADED:
        upload = st.sidebar.file_uploader("audit.parquet", type=["parquet"], key=state.CORPUS_UPLOAD)
        if upload is None:
            st.info("Write one with `rollout-graph audit INPUT ... --out audit.parquet`, then drop it in the sidebar.")
            return None
        return _read_parquet(upload.getvalue(), upload.name)
    found = sorted({p for d in cli_directories for p in Path(d).rglob("*.parquet")}) if cli_directories else []
    if not found:
        st.info("No `.parquet` files under the command-line folders.")
        return None
    choice = st.sidebar.selectbox("File", found, format_func=lambda p: p.name, key=state.CORPUS_FILE)
    return _read_parquet(choice.read_bytes(), choice.name)


def filter_rows(
    frame: pd.DataFrame, harnesses, models, codes, discards_only: bool, trainable: tuple[int, int]
) -> pd.DataFrame:
    """The rows matching every filter (an empty selection filters nothing); pure."""
    keep = pd.Series(True, index=frame.index)
    if harnesses:
        keep &= frame["harness"].isin(harnesses)
    if models:
        keep &= frame["models"].apply(lambda ms: any(m in models for m in (ms if ms is not None else ())))
    if codes:
        keep &= frame["finding_codes"].apply(lambda cs: any(c in codes for c in (cs if cs is not None else ())))
    if discards_only:
        keep &= frame["n_discarded"].fillna(0) > 0
    tokens = frame["n_trainable_tokens"].fillna(0)
    keep &= (tokens >= trainable[0]) & (tokens <= trainable[1])
    return frame[keep]


def _values(series: pd.Series) -> list[str]:
    return sorted({v for items in series.dropna() for v in (items if not isinstance(items, str) else [items])})


def _open_picked(shown: pd.DataFrame, cli_directories: list[str]) -> None:
    """The table's selection callback (it runs before the page, so it may switch pages and sources).

    Only files the app may read anyway (bundled samples, command-line folders) can be opened."""
    rows = st.session_state[state.CORPUS_TABLE].selection.rows
    if not rows:
        return
    row = shown.iloc[rows[0]]
    if isinstance(row["error"], str):
        st.session_state[NOTICE] = f"{row['source_file']} could not be read: {row['error']}"
        return
    if st.session_state.get(state.CORPUS_SOURCE) == UPLOADED_TRACES:  # opened from the uploads themselves
        state.choose_source(UPLOAD)
        state.select_session(str(row["session_id"]))
        st.session_state[state.GOTO_EXPLORER] = True
        return
    path = Path(str(row["source_file"]))
    target = (path if path.is_absolute() else SAMPLES.parent / path).resolve()
    bundled = {p.resolve(): p for p in bundled_files()}
    cli = {p.resolve(): p for p in files_under(cli_directories)} if cli_directories else {}
    if target in bundled:
        state.choose_source(BUNDLED)
        st.session_state[state.BUNDLED_FILE] = bundled[target]
    elif target in cli:
        state.choose_source(COMMAND_LINE)
        st.session_state[state.CLI_FILE] = cli[target]
    else:
        st.session_state[NOTICE] = (
            f"{path.name} is not among the files this app may open (bundled samples or command-line folders)."
        )
        return
    state.select_session(str(row["session_id"]))
    st.session_state[state.GOTO_EXPLORER] = True


def _count(n: int, word: str) -> str:
    """``1 rollout``, ``2 rollouts``."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"


MISSING = "—"  # what the table shows for a value the audit has not (not "None")


def count_step(most: int) -> int:
    """The tick step of an axis of counts up to ``most``: 1, 2 or 5 times a power of ten, about five
    ticks, never a fraction (plotly's own choice gives 0.5 steps to counts up to 4)."""
    power = 1
    while True:
        for step in (power, 2 * power, 5 * power):
            if most <= 5 * step:
                return step
        power *= 10


def count_axis(fig, most: int) -> None:
    """Integer ticks from 0 on the y axis of a chart of counts."""
    fig.update_yaxes(tick0=0, dtick=count_step(most), tickformat=",d", rangemode="tozero")


def render(cli_directories: list[str]) -> None:
    if st.session_state.pop(state.GOTO_EXPLORER, False):
        st.switch_page(st.session_state[state.PAGES]["explorer"]) if state.PAGES in st.session_state else None
    frame = _table(cli_directories)
    if frame is None:
        return
    files = frame["source_file"].nunique()
    frame = frame.copy()
    # what the table and the filters show: the file relative to its folder, a harness for every row
    frame.insert(0, "file", [_shown_file(str(p), cli_directories) for p in frame["source_file"]])
    frame["harness"] = frame["harness"].where(frame["harness"].notna(), NOT_RECORDED)
    st.markdown(f"##### Corpus audit: {_count(len(frame), 'rollout')} from {_count(files, 'file')}")
    cols = st.columns(4)
    harnesses = cols[0].multiselect("Harness", _values(frame["harness"]))
    models = cols[1].multiselect("Model", _values(frame["models"]))
    codes = cols[2].multiselect("Finding code", _values(frame["finding_codes"]))
    discards_only = cols[3].checkbox("Only rollouts with discards")
    top = int(frame["n_trainable_tokens"].fillna(0).max() or 0)
    trainable = st.slider("Trainable tokens (rows)", 0, max(top, 1), (0, max(top, 1)))
    shown = filter_rows(frame, harnesses, models, codes, discards_only, trainable)
    shown = signals_filters(frame, shown)
    errors = int(shown["error"].notna().sum())
    st.caption(
        f"{_count(len(shown), 'rollout')} match{'es' if len(shown) == 1 else ''}"
        + (f" · {errors} unreadable files" if errors else "")
        + " · click a column to sort, a row to open it"
    )
    if NOTICE in st.session_state:
        st.warning(md(st.session_state.pop(NOTICE)))
    st.dataframe(
        shown, hide_index=True, width="stretch", selection_mode="single-row", key=state.CORPUS_TABLE,
        on_select=partial(_open_picked, shown, cli_directories), placeholder=MISSING,
        column_config={"source_file": None},  # the path the app opens by; the "file" column shows it
    )  # fmt: skip
    # the charts under the table: the rows a user opens come first, on the first screen
    left, right = st.columns(2)
    if len(shown):
        histogram = px.histogram(shown, x="n_trainable_tokens", title="Trainable tokens (rows) per rollout", height=280)
        # 30 bins from 0 to the largest count: one rollout (or equal ones) is one bar at its count,
        # not a bar across the chart on an axis of 171.4016k, 171.4018k ...
        size = max(1, math.ceil(top / 30))
        histogram.update_traces(xbins={"start": 0, "end": top + size, "size": size})
        # token counts: whole-number ticks too (plotly ticks 0.5 on an axis up to 3)
        histogram.update_xaxes(range=[0, top + size], tickformat=",", tick0=0, dtick=count_step(top + size))
        per_bin = (shown["n_trainable_tokens"].dropna() // size).value_counts()
        count_axis(histogram, int(per_bin.max()) if len(per_bin) else 0)
        left.plotly_chart(histogram, width="stretch")
        counts = pd.Series([c for cs in shown["finding_codes"].dropna() for c in cs]).value_counts()
        if len(counts):
            bars = px.bar(
                x=[plot(code, 40) for code in counts.index],
                y=counts.values,
                labels={"x": "finding", "y": "rollouts"},
                title="Findings",
                height=280,
            )
            count_axis(bars, int(counts.max()))
            right.plotly_chart(bars, width="stretch")
    corrections_table(shown)


def signals_filters(frame: pd.DataFrame, shown: pd.DataFrame) -> pd.DataFrame:
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
    return sort_rows(filter_signals(shown, reward, float(min_diff), mismatch_only), order)


def corrections_table(shown: pd.DataFrame) -> None:
    """The off-policy corrections over the rows shown, side by side (an audit with signals run
    with --correction, docs/corrections.md); a static table: the audit's own stays the first dataframe."""
    if not has_signals(shown):
        return
    combined = mismatch.audit_comparison(shown)
    if combined is not None:
        st.caption("Off-policy corrections over the rollouts of this audit, side by side")
        st.table(combined.set_index("correction"))
