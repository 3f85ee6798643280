"""Where traces come from in the app, and the cached load of them.

Only three kinds of source exist: the bundled samples, uploads, and files under the directories
given on the command line. A visitor can never type a server path: a public deployment must not
read the server's files.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import streamlit as st

from graph.analysis.decode import Decoder, decoder_for
from graph.core.records import LoadResult
from graph.core.rollout import Rollout, analyse
from graph.ingest.loading import load_sources, trace_files
from graph.ingest.reading import Source
from graph.resources import SAMPLES


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


def _file_key(paths: list[Path]) -> str:
    parts = []
    for p in paths:
        stat = p.stat()
        parts.append(f"{p.resolve()}:{stat.st_size}:{stat.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _progress_callback(bar):
    def report(done: int, total: int, records: int) -> None:
        bar.progress(done / max(total, 1), text=f"Loading: {done}/{total} files, {records:,} records")

    return report


_CACHE: OrderedDict[str, Workspace] = OrderedDict()
_CACHE_SIZE = 6
_LOCK = threading.Lock()


def _load(key: str, label: str, sources: list[Source], trace_paths: list[Path], progress) -> Workspace:
    """Parsed and analysed once per content, shared by every browser session of this server.

    A plain LRU rather than st.cache_resource: the progress bar is drawn while loading, and
    Streamlit's caches would try to replay those drawing calls on a cache hit.
    """
    with _LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
    loaded = load_sources(sources, progress)
    rollouts = {sid: analyse(s) for sid, s in loaded.sessions.items()}
    workspace = Workspace(key, label, loaded, trace_paths, rollouts, {s.name: s for s in sources})
    with _LOCK:
        _CACHE[key] = workspace
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return workspace


def source_of(workspace_key: str, name: str) -> Source | None:
    """The source a loaded record came from, while its workspace is cached."""
    with _LOCK:
        workspace = _CACHE.get(workspace_key)
    return None if workspace is None else workspace.sources.get(name)


def load_files(paths: list[Path], label: str) -> Workspace:
    bar = st.progress(0.0, text="Loading traces…")
    try:
        return _load(_file_key(paths), label, [Source.from_path(p) for p in paths], paths, _progress_callback(bar))
    finally:
        bar.empty()


def load_uploads(uploads) -> Workspace:
    digest = hashlib.sha256()
    sources = []
    for upload in uploads:
        data = upload.getvalue()
        digest.update(upload.name.encode() + b"\0" + hashlib.sha256(data).digest())
        sources.append(Source.from_bytes(upload.name, data))
    bar = st.progress(0.0, text="Loading uploads…")
    try:
        return _load(digest.hexdigest(), f"{len(sources)} uploaded file(s)", sources, [], _progress_callback(bar))
    finally:
        bar.empty()


@st.cache_resource(max_entries=32, show_spinner=False)
def decoder(key: str, session_id: str, _rollout: Rollout, _trace_paths: list[Path]) -> Decoder:
    """Offline only: the app never downloads a tokenizer."""
    return decoder_for(_rollout.calls, _trace_paths)
