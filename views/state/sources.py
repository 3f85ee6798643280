"""Where traces come from in the app, and the cached load of them.

Entry points: ``load_files(paths, label)`` and ``load_uploads(files)`` -> ``Workspace`` (cached per
content in the shared workspace cache), ``bundled_files``, ``files_under``, ``decoder``,
``page_run`` (a page run in progress: background work pauses), ``store_after_paint``.

Only three kinds of source exist: the bundled samples, uploads, and files under the directories
given on the command line. A visitor can never type a server path. Where it sits: called by the
sidebar (views/panels/sidebar.py); loads run off the script thread (workspace_cache.py)."""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import streamlit as st
from streamlit import runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx

from rollout_graph.analysis.decode import Decoder, decoder_for
from rollout_graph.core.records import LoadResult
from rollout_graph.core.rollout import Rollout
from rollout_graph.ingest.files.sources import Source
from rollout_graph.ingest.limits import for_app
from rollout_graph.ingest.load import cache as persistent
from rollout_graph.ingest.load.cache import key_for_bytes, key_for_files
from rollout_graph.ingest.load.files import load_files as load_trace_files
from rollout_graph.ingest.load.pool import load_bytes_parallel
from rollout_graph.ingest.load.progress import LoadProgress
from rollout_graph.ingest.load.trace_files import trace_files
from rollout_graph.pipeline import Decoders, analyse
from rollout_graph.resources import SAMPLES
from rollout_graph.ui.state.upload_worker import UploadRefused, load_upload
from rollout_graph.ui.state.workspace_cache import Activity, WorkspaceCache, estimate_bytes, when_quiet

# A trace read for the first time is cached on disk (graph/ingest/load/cache.py) after the first paint:
# once no page has run for a moment, on a low-priority thread that pauses while a page runs
# (store_after_paint; docs/performance.md "The app").

# The sidebar's trace sources (the value of the state.SOURCE session key).
BUNDLED = "Bundled samples"
UPLOAD = "Upload"
COMMAND_LINE = "Command-line folders"


@dataclass
class Workspace:
    """Everything loaded from one choice of source: the load report and the analysed rollouts."""

    key: str
    label: str
    loaded: LoadResult
    trace_paths: list[Path]
    rollouts: dict[str, Rollout] = field(default_factory=dict)
    sources: dict[str, Source] = field(default_factory=dict)  # by name: the raw record is read back from them

    @property
    def default_session(self) -> str:
        """The rollout to open first: the one with the most trainable tokens (shortest id on a tie)."""
        return min(self.rollouts, key=lambda sid: (-self.rollouts[sid].stats["n_trainable_tokens"], len(sid), sid))


def bundled_files() -> list[Path]:
    return trace_files(SAMPLES)


def files_under(directories: list[str]) -> list[Path]:
    files: list[Path] = []
    for directory in directories:
        files.extend(trace_files(directory))
    return files


def _progress_bar(bar):
    def report(progress: LoadProgress) -> None:
        bar.progress(
            min(progress.bytes_done / max(progress.bytes_total, 1), 1.0), text=f"Loading: {progress.describe()}"
        )

    return report


# One per server process: shared by every browser session (views/state/workspace_cache.py).
WORKSPACES: WorkspaceCache[Workspace] = WorkspaceCache()
# The page runs in progress (views/app.py and the explorer's selection view mark theirs).
ACTIVITY = Activity()
_STORES: dict[str, threading.Thread] = {}  # cache entries being written after the paint, by key
_STORES_LOCK = threading.Lock()


def page_run():
    """Mark a page run (a context manager): background writes wait for the end of it."""
    return ACTIVITY.run()


def store_after_paint(key: str, loaded: LoadResult) -> None:
    """Write this trace's persistent cache entry once the page that read it has been drawn: when no
    page has run for a moment, on a low-priority thread that stops between batches of calls while
    any page runs (a visitor's click right after the first paint is not slowed by it)."""
    with _STORES_LOCK:
        if key in _STORES and _STORES[key].is_alive():
            return
        _STORES[key] = when_quiet(
            ACTIVITY, lambda pause: persistent.store(key, loaded, between=pause), name="rg-cache-store"
        )


def pending_stores() -> list[str]:
    """Keys of the cache entries still being written (tests, benchmarks)."""
    with _STORES_LOCK:
        return [key for key, thread in _STORES.items() if thread.is_alive()]


def _analysed(
    key: str, label: str, loaded: LoadResult, trace_paths: list[Path], sources: dict[str, Source]
) -> Workspace:
    decoders = Decoders(trace_paths)  # the tokenizer search once per model, not per rollout
    # a reopened cache entry's sessions carry their links: analyse does not link them again
    rollouts = {sid: analyse(s, decoder=decoders(s.calls)) for sid, s in loaded.sessions.items()}
    return Workspace(key, label, loaded, trace_paths, rollouts, sources)


def _size(workspace: Workspace) -> int:
    return estimate_bytes(workspace.loaded)


def _session_id() -> str | None:
    ctx = get_script_run_ctx()
    return None if ctx is None else ctx.session_id


def _alive(session_id: str) -> bool:
    try:
        return bool(runtime.get_instance().is_active_session(session_id))
    except Exception:  # noqa: BLE001 - no runtime (bare mode): keep everything
        return True


def release_closed_sessions() -> None:
    """Free the uploads of browser sessions that have ended (on every page run, and every
    :data:`RELEASE_EVERY` seconds from a watcher thread, so an idle server frees them too)."""
    WORKSPACES.release_dead(_alive)
    _start_watcher()


RELEASE_EVERY = 30.0
_WATCHER: list[threading.Thread] = []


def _watch() -> None:
    while True:
        time.sleep(RELEASE_EVERY)
        WORKSPACES.release_dead(_alive)


_WATCHER_LOCK = threading.Lock()


def _start_watcher() -> None:
    with _WATCHER_LOCK:
        if not _WATCHER:
            thread = threading.Thread(target=_watch, name="rg-release-uploads", daemon=True)
            _WATCHER.append(thread)
            thread.start()


def load_files(paths: list[Path], label: str, limits: Any = None) -> Workspace:
    """Files from the server's disk: cached in memory by (path, size, mtime), parsed on every
    core, and kept in the persistent parsed-trace cache for the next server (graph/ingest/load/cache.py)."""
    release_closed_sessions()
    key = "files:" + key_for_files(paths, limits)
    cached = WORKSPACES.get(key)
    if cached is not None:
        return cached

    def build(report) -> Workspace:
        loaded = load_trace_files(paths, progress=report, limits=limits, defer_store=store_after_paint)
        return _analysed(key, label, loaded, paths, {str(p): Source.from_path(p) for p in paths})

    bar = st.progress(0.0, text="Loading traces…")
    try:
        return WORKSPACES.get_or_build(key, build, _size, _progress_bar(bar))
    finally:
        bar.empty()


def upload_limits() -> tuple[int, int]:
    """(per file, per visitor) upload caps in bytes: the server's ``maxUploadSize`` per file,
    ``ROLLOUT_GRAPH_UPLOAD_TOTAL_MB`` (default twice the per-file cap) in total per visitor."""
    per_file = int(st.get_option("server.maxUploadSize")) * 1_000_000
    try:
        total = int(float(os.environ["ROLLOUT_GRAPH_UPLOAD_TOTAL_MB"]) * 1e6)
    except (KeyError, ValueError):
        total = 2 * per_file
    return per_file, total


class UploadTooLarge(UploadRefused):
    """A visitor's uploads add up to more than the per-visitor cap."""


# The browser sessions waiting for each upload's load: it is cancelled only once none of them is
# alive (two visitors who drop the same file share one load).
_UPLOAD_WAITERS: dict[str, set[str]] = {}
_WAITERS_LOCK = threading.Lock()


# Uploads refused for good (over a budget, or failed): the same bytes are refused at once on the
# page's next run instead of spending the budget again (a visitor clicking anything reruns the page).
_REFUSED: OrderedDict[str, str] = OrderedDict()
_REFUSED_KEPT = 64


def _anyone_waiting(key: str) -> bool:
    with _WAITERS_LOCK:
        waiting = set(_UPLOAD_WAITERS.get(key, ()))
    return not waiting or any(_alive(o) for o in waiting)


def load_uploads(uploads, limits: Any = None) -> Workspace:
    """Uploads: parsed, linked and analysed in a capped child process with a time budget, killed
    when the uploading browser session ends (views/state/upload_worker.py); shared while that
    session lives, freed after.

    Raises:
        UploadTooLarge: the uploads add up to more than the per-visitor cap.
        UploadRefused: the load ran over its time or memory budget, or its session ended.
    """
    release_closed_sessions()
    if limits is None:  # the app's limits: the public ones under `view --public`, then ROLLOUT_GRAPH_MAX_*
        limits = for_app()
    per_file, total_cap = upload_limits()
    total = sum(upload.size for upload in uploads)
    if total > total_cap:
        raise UploadTooLarge(
            f"These uploads add up to {total / 1e6:,.0f} MB; at most {total_cap / 1e6:,.0f} MB per visitor. "
            "Remove some files (or run `rollout-graph view` locally on them)."
        )
    named = [(upload.name, upload.getvalue()) for upload in uploads]
    key = "uploads:" + key_for_bytes(named, limits)
    owner = _session_id()
    cached = WORKSPACES.get(key, owner)
    if cached is not None:
        return cached
    with _WAITERS_LOCK:
        refused = _REFUSED.get(key)
    if refused is not None:
        raise UploadRefused(refused)
    label = f"{len(named)} uploaded file(s)"

    if owner is not None:
        with _WAITERS_LOCK:
            _UPLOAD_WAITERS.setdefault(key, set()).add(owner)

    def build(report) -> Workspace:
        sources = {name: Source.from_bytes(name, data) for name, data in named}
        try:
            done = load_upload(named, limits, lambda: _anyone_waiting(key), report)
        finally:
            with _WAITERS_LOCK:
                _UPLOAD_WAITERS.pop(key, None)
        if done is None:  # the columnar form cannot carry this load: read it here (the child showed it fits)
            return _analysed(key, label, load_bytes_parallel(named, report, limits), [], sources)
        return Workspace(key, label, done[0], [], done[1], sources)

    bar = st.progress(0.0, text="Loading uploads…")
    try:
        return WORKSPACES.get_or_build(key, build, _size, _progress_bar(bar), owner=owner)
    except UploadRefused as exc:
        if exc.final:
            with _WAITERS_LOCK:
                _REFUSED[key] = str(exc)
                while len(_REFUSED) > _REFUSED_KEPT:
                    _REFUSED.popitem(last=False)
        raise
    finally:
        bar.empty()


def run_heavy(fn, *args):
    """Heavy work (an audit) in the server's bounded worker pool; this page waits, others run."""
    return WORKSPACES.submit(fn, *args).result()


@st.cache_resource(max_entries=32, show_spinner=False)
def decoder(key: str, session_id: str, _rollout: Rollout, _trace_paths: list[Path]) -> Decoder:
    """Offline only: the app never downloads a tokenizer."""
    return decoder_for(_rollout.calls, _trace_paths)
