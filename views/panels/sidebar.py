"""The sidebar: which traces to open (bundled samples, an upload, the command-line folders) and the
display options.

Entry point: ``render(cli_directories) -> (workspace or None, Options)``: the source, the file,
following controls for command-line traces, whitespace and near-miss toggles, training signals.

Where it sits: called first by every page script (views/screens/); loads go through
views/state/sources.py (uploads in a capped process: views/state/upload_worker.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from rollout_graph.escape import md
from rollout_graph.resources import SAMPLES
from rollout_graph.ui import state
from rollout_graph.ui.state import live
from rollout_graph.ui.state.sources import (
    BUNDLED,
    COMMAND_LINE,
    UPLOAD,
    UploadRefused,
    Workspace,
    bundled_files,
    files_under,
    load_files,
    load_uploads,
)

ALL = "all files"
UPLOAD_TYPES = ["jsonl", "json", "ndjson", "gz", "zst"]


@dataclass(frozen=True)
class Options:
    show_whitespace: bool
    near_misses: bool
    live: live.LiveSource | None = None  # the command-line traces, followed as they grow


def _pick_files(files: list[Path], root: Path | None, key: str) -> list[Path]:
    def name(p: Path | str) -> str:
        if isinstance(p, str):  # ALL
            return f"{ALL} ({len(files)})"
        try:
            return str(p.relative_to(root)) if root else p.name
        except ValueError:
            return p.name

    choice = st.sidebar.selectbox("File", [ALL, *files], format_func=name, key=key)
    return [choice] if isinstance(choice, Path) else files


def _keep(widget: str, kept: str) -> None:
    """A sidebar widget's new value, kept for the other pages (their widgets start empty); called
    only when the visitor changes the widget, so a page's fresh, empty uploader forgets nothing."""
    value = st.session_state.get(widget)
    st.session_state[kept] = list(value) if isinstance(value, list) else value


def render(cli_directories: list[str]) -> tuple[Workspace | None, Options]:
    st.sidebar.caption("LLM-agent rollouts linked by exact token prefix into roots, forks, leaves and discarded calls.")
    kinds = [COMMAND_LINE, BUNDLED, UPLOAD] if cli_directories else [BUNDLED, UPLOAD]
    from_link = st.query_params.get("source") == "upload"
    kept = st.session_state.get(state.KEPT_SOURCE)
    if from_link and state.SOURCE not in st.session_state and kept is None:  # a link to an uploaded trace
        state.choose_source(UPLOAD)
    elif kept in kinds and st.session_state.get(state.SOURCE) != kept:  # chosen on another page
        st.session_state[state.SOURCE] = kept
    kind = st.sidebar.radio("Traces", kinds, key=state.SOURCE, on_change=_keep, args=(state.SOURCE, state.KEPT_SOURCE))
    if (kind == UPLOAD) != from_link:  # links to an uploaded trace say so (source=upload)
        if kind == UPLOAD:
            st.query_params["source"] = "upload"
        else:
            del st.query_params["source"]
    workspace = None
    following = None
    if kind == BUNDLED:
        files = bundled_files()
        if files:
            workspace = load_files(_pick_files(files, SAMPLES, state.BUNDLED_FILE), "bundled samples")
        else:
            st.sidebar.warning("No bundled sample traces found.")
    elif kind == COMMAND_LINE:  # followed live: new calls and new files appear as they are written
        files = files_under(cli_directories)
        picked = _pick_files(files, None, state.CLI_FILE) if files else files
        live.sidebar_controls()
        paths = [Path(p) for p in cli_directories] if picked == files else picked
        following = live.source(paths, live.COMMAND_LINE_LABEL)
    else:
        uploads = st.sidebar.file_uploader(
            "Trace files", type=UPLOAD_TYPES, accept_multiple_files=True, key=state.UPLOADS,
            on_change=_keep, args=(state.UPLOADS, state.KEPT_UPLOADS),
        )  # fmt: skip
        if not uploads and st.session_state.get(state.KEPT_UPLOADS):  # dropped on another page: still open
            uploads = st.session_state[state.KEPT_UPLOADS]
            st.sidebar.caption(
                f"Open: {len(uploads)} file(s) uploaded on another page "
                f"({md(', '.join(u.name for u in uploads), 120)}). Drop files above to replace them."
            )
        if uploads:
            try:
                workspace = load_uploads(uploads)
            except UploadRefused as exc:
                st.error(str(exc))
                state.no_rollout()  # the URL no longer names the rollout opened before
        elif from_link and st.query_params.get("session"):
            wanted = st.query_params.get("node") or st.query_params.get("session")
            st.warning(
                f"This link points to an uploaded trace: drop the same file in the sidebar to open {md(wanted)} "
                f"(rollout {md(st.query_params.get('session'))})."
            )
        else:
            st.info("Drop `.jsonl`, `.json`, `.gz` or `.zst` trace files in the sidebar to open them.")
    st.sidebar.divider()
    options = Options(
        live=following,
        show_whitespace=st.sidebar.toggle("Show whitespace in token views", value=True, key=state.SHOW_WHITESPACE),
        near_misses=st.sidebar.toggle(
            "Show near-miss links in the graph",
            value=True,
            key=state.NEAR_MISSES,
            help="Dashed: a call that nearly continued an earlier one (a retry, a broken replay, a compaction, ...). "
            "They never change the exact graph, its sequences or exports.",
        ),
    )
    return workspace, options
