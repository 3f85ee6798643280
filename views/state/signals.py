"""Training signals in the app: where they come from (bundled, `view --signals`, an upload), the
token-colour switch, and the workspace with the signals joined (cached per content)."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from rollout_graph.resources import SAMPLES, SIGNALS_ENV
from rollout_graph.signals.join import DEFAULT_THRESHOLD, JoinReport, attach_all
from rollout_graph.signals.reading import SignalsError, SignalsFile, read_signals_bytes
from rollout_graph.ui import state
from rollout_graph.ui.builders import overlays
from rollout_graph.ui.state.lru import LRU
from rollout_graph.ui.state.sources import BUNDLED, COMMAND_LINE, Workspace

BUNDLED_SIGNALS = SAMPLES / "signals" / "samples.signals.jsonl"
ENV = SIGNALS_ENV  # set by `rollout-graph view --signals FILE` (os.pathsep-separated)
UPLOAD_TYPES = ["jsonl", "parquet", "gz", "zst"]


@dataclass
class Joined:
    """The workspace with signals joined, and what happened to the file's rows."""

    workspace: Workspace
    report: JoinReport | None = None
    error: str | None = None


_CACHE: LRU[str, Joined] = LRU(6)  # joins that worked (an error is computed again)


def command_line_files() -> list[Path]:
    """Signals files the operator gave to ``rollout-graph view --signals``."""
    return [Path(p) for p in os.environ.get(ENV, "").split(os.pathsep) if p]


def _chosen(kind: str) -> list[tuple[str, bytes]]:
    """(name, bytes) of every signals file chosen in the sidebar for this kind of source."""
    files: list[tuple[str, bytes]] = []
    st.sidebar.divider()
    st.sidebar.markdown("**Training signals**")
    if kind == BUNDLED and BUNDLED_SIGNALS.exists():
        if st.sidebar.toggle(
            "Bundled signals (llama-cpp recompute)",
            value=True,
            key=state.SIGNALS_BUNDLED,
            help="Trainer logprobs from re-scoring each bundled row with the same model, task-outcome rewards "
            "and advantages (docs/signals.md).",
        ):
            files.append((BUNDLED_SIGNALS.name, BUNDLED_SIGNALS.read_bytes()))
    if kind == COMMAND_LINE:
        files += [(p.name, p.read_bytes()) for p in command_line_files() if p.is_file()]
    upload = None
    if st.sidebar.toggle("Add a signals file", key=state.SIGNALS_ADD, help="Upload a signals file to join."):
        upload = st.sidebar.file_uploader(
            "Signals file (JSONL or Parquet)",
            type=UPLOAD_TYPES,
            key=state.SIGNALS_UPLOAD,
            help="Rows keyed by session_id and leaf_id with trainer_logprobs, advantages, reward (docs/signals.md).",
        )
    if upload is not None:
        files.append((upload.name, upload.getvalue()))
    return files


def render_options() -> str:
    """The token-colour switch; returns the chosen overlay mode."""
    return st.sidebar.radio(
        "Colour sampled tokens by",
        list(overlays.MODES),
        format_func=overlays.MODES.get,
        key=state.TOKEN_OVERLAY,
        help="Logprob: the inference engine's. Trainer − inference, importance ratio and advantage need a signals "
        "file; the entropy lower bound needs recorded top-k alternatives.",
    )


def _join(workspace: Workspace, files: list[tuple[str, bytes]], threshold: float) -> Joined:
    digest = hashlib.sha256(workspace.key.encode())
    for name, data in files:
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    digest.update(repr(threshold).encode())
    key = digest.hexdigest()
    found = _CACHE.get(key)
    if found is not None:
        return found
    signals = SignalsFile()
    try:
        for name, data in files:
            signals.extend(read_signals_bytes(name, data))
    except SignalsError as exc:
        return Joined(workspace, error=str(exc))
    ids = list(workspace.rollouts)
    joined, report = attach_all([workspace.rollouts[s] for s in ids], signals, threshold)
    result = Joined(
        Workspace(
            key,
            workspace.label,
            workspace.loaded,
            workspace.trace_paths,
            dict(zip(ids, joined, strict=True)),
            workspace.sources,  # Raw JSON reads the records back from the same files or uploads
        ),
        report,
    )
    return _CACHE.put(key, result)


def apply(workspace: Workspace) -> Joined:
    """Render the signals part of the sidebar and join what was chosen to the workspace."""
    files = _chosen(st.session_state.get(state.SOURCE, BUNDLED))
    threshold = DEFAULT_THRESHOLD
    if files:
        threshold = st.sidebar.number_input(
            "Mismatch threshold (nats)",
            min_value=0.0,
            value=DEFAULT_THRESHOLD,
            step=0.1,
            key=state.SIGNALS_THRESHOLD,
            help="WARN logprob_mismatch on a call whose trainer and inference logprobs differ by more than this.",
        )
    render_options()
    if not files:
        return Joined(workspace)
    joined = _join(workspace, files, float(threshold))
    if joined.error:
        st.sidebar.error(joined.error)
    return joined


def report_caption(joined: Joined) -> str | None:
    """One line on the signals rows: how many read, skipped and for rollouts not loaded."""
    if joined.report is None:
        return None
    r = joined.report.as_dict()
    text = f"Signals: {r['rows']:,} rows from {len(r['files'])} file(s)"
    if r["skipped"]:
        first = r["skipped"][0]
        text += (
            f" · {len(r['skipped'])} unreadable (first: {Path(first['file']).name}:{first['line']}: {first['reason']})"
        )
    if r["n_unmatched_rows"]:
        text += f" · {r['n_unmatched_rows']} for rollouts not loaded"
    return text
