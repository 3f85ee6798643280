"""Which files are traces: a folder walked for them, the names that are never traces, and the
rollout name of a file that names none.

Entry points: :func:`walk_traces` (every trace file under a path, and the folders that could not
be listed), :func:`trace_files`, :func:`rollout_name`, ``TRACE_SUFFIXES``, ``SIGNALS_SUFFIXES``,
``NOTES_FILE``. Load layer: ``files.py`` walks the paths it is given; the command line and the
app list files with it. Only regular files are read; a FIFO named like a trace is reported, never
opened (docs/limits.md).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

TRACE_SUFFIXES = (".jsonl", ".json", ".ndjson", ".gz", ".zst", ".parquet", ".pkl", ".pickle", ".pt", ".pth")
# Files that travel with traces (a bundled tokenizer) but are never traces themselves.
NOTES_FILE = "rollout-graph-notes.json"  # the notes sidecar beside traces (rollout_graph.reports.notes)
NOT_TRACES = frozenset(
    {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "config.json", NOTES_FILE}
)
# Training-signals files (docs/signals.md) may sit beside the traces they describe; never traces.
SIGNALS_SUFFIXES = (".signals.jsonl", ".signals.parquet", ".signals.jsonl.gz", ".signals.jsonl.zst")
# Nor is the capture proxy's engine probe report beside its capture file (docs/live.md).
NOT_TRACE_SUFFIXES = (*SIGNALS_SUFFIXES, ".probe.json")


def trace_files(path: str | Path) -> list[Path]:
    """A file as given, or every trace file under a directory (recursively, sorted)."""
    return walk_traces(path)[0]


def walk_traces(path: str | Path) -> tuple[list[Path], list[tuple[str, str]]]:
    """:func:`trace_files`, plus the folders that could not be listed and why.

    Only regular files are read under a directory; a FIFO, device or socket named like a trace is
    reported, never opened (opening a FIFO waits for a writer). Symlinked folders are not followed,
    so a link loop cannot hang the walk.
    """
    p = Path(path)
    if not p.is_dir():
        return [p], []
    errors: list[tuple[str, str]] = []

    def failed(exc: OSError) -> None:
        errors.append((str(exc.filename or p), f"cannot read folder: {exc.strerror or exc}"))

    found = []
    for folder, _dirs, names in os.walk(p, onerror=failed):
        for name in names:
            if name.endswith(TRACE_SUFFIXES) and name not in NOT_TRACES and not name.endswith(NOT_TRACE_SUFFIXES):
                f = Path(folder, name)
                try:
                    mode = f.stat().st_mode
                except OSError as exc:  # a dangling link, a race with deletion
                    errors.append((str(f), f"cannot read file: {exc.strerror or exc}"))
                    continue
                if stat.S_ISREG(mode):
                    found.append(f)
                elif not stat.S_ISDIR(mode):
                    kind = "a FIFO" if stat.S_ISFIFO(mode) else "a device or socket"
                    errors.append((str(f), f"cannot read file: not a regular file ({kind}); skipped"))
    return sorted(found), sorted(errors)


def rollout_name(source_name: str) -> str:
    """The session id of a file that names none: its file name without trace suffixes."""
    name = Path(source_name).name
    for suffix in (".gz", ".zst", ".jsonl", ".json", ".ndjson"):
        name = name.removesuffix(suffix)
    return name or "rollout"
