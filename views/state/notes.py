"""The notes of the open source (rollout_graph.reports.notes), kept per session.

Entry points: ``store(workspace) -> Store`` (``for_session``, ``add``, ``remove``, ``merge``, ``save``).
Command-line traces in a writable folder keep theirs in the sidecar beside them
(``rollout-graph-notes.json``); bundled samples and uploads keep them in this browser session,
to download as a file.

Where it sits: drawn by views/panels/notes.py."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import streamlit as st

from rollout_graph.reports import notes as notes_io
from rollout_graph.ui.state.live import COMMAND_LINE_LABEL
from rollout_graph.ui.state.sources import Workspace

NOTES = "rg_notes"  # {source key: Store}


@dataclass
class Store:
    """One source's notes, and the sidecar they are written to (None: this session only)."""

    sidecar: Path | None
    notes: list[dict[str, Any]] = field(default_factory=list)
    problem: str | None = None  # the sidecar could not be read or written

    def for_session(self, session_id: str) -> list[dict[str, Any]]:
        """The notes of one rollout."""
        return [n for n in self.notes if n["session"] == session_id]

    def save(self) -> None:
        """Write the sidecar (when there is one); a failure is kept in ``problem``."""
        if self.sidecar is None:
            return
        try:
            notes_io.write_notes(self.sidecar, self.notes)
            self.problem = None
        except (notes_io.OutputError, notes_io.NotesError) as exc:
            self.problem = f"cannot write the notes file: {exc}"

    def add(self, note: dict[str, Any]) -> None:
        """Keep a new note (and write the sidecar)."""
        self.notes.append(note)
        self.save()

    def remove(self, note: dict[str, Any]) -> None:
        """Forget a note (and write the sidecar)."""
        self.notes = [n for n in self.notes if n is not note]
        self.save()

    def merge(self, notes: list[dict[str, Any]]) -> int:
        """Add the notes not already here (an opened notes file); returns how many were new."""
        new = [n for n in notes if n not in self.notes]
        self.notes.extend(new)
        if new:
            self.save()
        return len(new)


def _sidecar(workspace: Workspace) -> Path | None:
    """The writable sidecar of command-line traces, else None."""
    if workspace.label != COMMAND_LINE_LABEL or not workspace.trace_paths:
        return None
    path = notes_io.sidecar_for(workspace.trace_paths)
    if path is None:
        return None
    writable = os.access(path, os.W_OK) if path.exists() else os.access(path.parent, os.W_OK)
    return path if writable else None


def store(workspace: Workspace) -> Store:
    """The open source's notes (read from its sidecar the first time)."""
    sidecar = _sidecar(workspace)
    key = str(sidecar) if sidecar is not None else workspace.label
    stores = st.session_state.setdefault(NOTES, {})
    if key not in stores:
        found = Store(sidecar)
        if sidecar is not None and sidecar.exists():
            try:
                found.notes = notes_io.read_notes(sidecar)["notes"]
            except notes_io.NotesError as exc:
                found.problem = str(exc)
                found.sidecar = None  # never overwrite a file we could not read
        stores[key] = found
    return stores[key]
