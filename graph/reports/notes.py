"""Notes that travel: short audit notes on calls and training rows, in a JSON sidecar file.

A note never goes into the trace. It lives in a small sidecar (``rollout-graph-notes.json`` beside
the traces, or a downloaded file) that the app writes, ``bundle`` shows and ``export --notes``
turns into the rows a trainer reads (docs/cli.md, "Notes")::

    {"version": 1,
     "notes": [{"session": "fix-config-bug", "node": "c05", "text": "wrong tool output",
                "action": "drop", "author": "ana", "created": "2026-12-01T11:30:00Z"}]}

Each note names a ``session`` and either a call (``node``) or a training row (``leaf``: the id
of the row's last call). ``action`` is what an export does with it:

- ``drop``: leave out every training row the note touches (the row; or every row through the call);
- ``mask``: keep the rows but set the loss mask (and logprobs) to 0 over the noted call's sampled
  tokens, or over the whole noted row;
- ``keep``: nothing; the note records that someone looked (``--drop-noted`` spares it too).

A sidecar is untrusted input like a trace: it is read under a size bound, every note is validated
(a bad one is named by its file, line and reason), and its text is escaped wherever it is shown.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rollout_graph.core.rollout import Rollout
from rollout_graph.ingest.files.sources import Source
from rollout_graph.ingest.load.trace_files import NOTES_FILE
from rollout_graph.reports.output import OutputError, atomic_path

__all__ = [
    "ACTIONS",
    "SIDECAR",
    "NotesError",
    "OutputError",
    "check_targets",
    "apply_notes",
    "make_note",
    "notes_json",
    "parse_notes",
    "read_notes",
    "sidecar_for",
    "write_notes",
]

VERSION = 1
SIDECAR = NOTES_FILE  # never read as a trace (rollout_graph.ingest.load.trace_files)
ACTIONS = ("drop", "mask", "keep")
MAX_FILE_BYTES = 4 << 20
MAX_NOTES = 10_000
MAX_TEXT = 2_000
MAX_FIELD = 200  # session, node, leaf, author, created
KEYS = {"session", "node", "leaf", "text", "action", "author", "created"}


class NotesError(ValueError):
    """A notes file that cannot be used: the message names the file, the line and the reason."""


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _note_lines(text: str, count: int) -> list[int | None]:
    """The line each note of the ``notes`` array starts on (None when the layout is unusual)."""
    match = re.search(r'"notes"\s*:\s*\[', text)
    if match is None:
        return [None] * count
    decoder = json.JSONDecoder()
    pos = match.end()
    lines: list[int | None] = []
    for _ in range(count):
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        try:
            _, end = decoder.raw_decode(text, pos)
        except ValueError:
            return [None] * count
        lines.append(_line_of(text, pos))
        pos = end
    return lines


def _validate(note: Any, where: str) -> dict[str, str]:
    if not isinstance(note, dict):
        raise NotesError(f"{where}: a note is an object, not {type(note).__name__}")
    unknown = sorted(set(note) - KEYS)
    if unknown:
        raise NotesError(f"{where}: unknown key {unknown[0]!r} (a note has {', '.join(sorted(KEYS))})")
    for key in KEYS:
        if key in note and note[key] is not None and not isinstance(note[key], str):
            raise NotesError(f"{where}: {key!r} must be a string")
    if not note.get("session"):
        raise NotesError(f"{where}: no 'session'")
    if bool(note.get("node")) == bool(note.get("leaf")):
        raise NotesError(f"{where}: a note names exactly one of 'node' (a call) or 'leaf' (a training row)")
    action = note.get("action") or "keep"
    if action not in ACTIONS:
        raise NotesError(f"{where}: unknown action {action!r} (one of {', '.join(ACTIONS)})")
    text = note.get("text") or ""
    if len(text) > MAX_TEXT:
        raise NotesError(f"{where}: the text has {len(text):,} characters (at most {MAX_TEXT:,})")
    for key in ("session", "node", "leaf", "author", "created"):
        if len(note.get(key) or "") > MAX_FIELD:
            raise NotesError(f"{where}: {key!r} is longer than {MAX_FIELD} characters")
    out = {"session": note["session"], "text": text, "action": action}
    out["node" if note.get("node") else "leaf"] = note.get("node") or note["leaf"]
    out["author"] = note.get("author") or ""
    out["created"] = note.get("created") or ""
    return out


def parse_notes(data: bytes | str, name: str = "notes") -> dict[str, Any]:
    """Validate a notes document; ``name`` is the file named in errors.

    Returns:
        ``{"version": 1, "notes": [...]}`` with every note complete (``action`` defaults to keep).

    Raises:
        NotesError: the file is too big, not JSON, or a note is invalid (file, line, reason).
    """
    if len(data) > MAX_FILE_BYTES:
        raise NotesError(f"{name}: {len(data):,} bytes, more than a notes file may hold ({MAX_FILE_BYTES:,})")
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as exc:
        raise NotesError(f"{name}: not UTF-8 text (byte {exc.start})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotesError(f"{name}:{exc.lineno}: not JSON ({exc.msg})") from None
    except RecursionError:
        raise NotesError(f"{name}: nested too deep") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("notes"), list):
        raise NotesError(f'{name}:1: not a notes file (expected {{"version": 1, "notes": [...]}})')
    if doc.get("version") != VERSION:
        raise NotesError(f"{name}:1: notes version {doc.get('version')!r} (this rollout-graph reads version {VERSION})")
    if len(doc["notes"]) > MAX_NOTES:
        raise NotesError(f"{name}: {len(doc['notes']):,} notes, more than {MAX_NOTES:,}")
    lines = _note_lines(text, len(doc["notes"]))
    notes = []
    for k, (note, line) in enumerate(zip(doc["notes"], lines, strict=True)):
        where = f"{name}:{line}" if line is not None else f"{name}: note {k + 1}"
        notes.append(_validate(note, where))
    return {"version": VERSION, "notes": notes}


def read_notes(path: str | Path) -> dict[str, Any]:
    """Read and validate a notes file (see :func:`parse_notes`).

    Raises:
        NotesError: it cannot be read, or is invalid.
    """
    source = Source.from_path(path)  # opened without blocking: a FIFO, device or socket is refused
    try:
        with source.open() as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise NotesError(f"cannot read {source.name}: {exc.strerror or exc}") from None
    return parse_notes(data, source.name)


def notes_json(notes: Iterable[dict[str, Any]]) -> str:
    """The notes document as text, one note a line (so errors can name the line)."""
    body = ",\n".join("  " + json.dumps(n, ensure_ascii=False, sort_keys=True) for n in notes)
    return '{"version": 1, "notes": [\n' + body + ("\n" if body else "") + "]}\n"


def write_notes(path: str | Path, notes: Iterable[dict[str, Any]]) -> None:
    """Write a notes file atomically (an older file is replaced only once the new one is whole).

    Raises:
        OutputError: the file cannot be written.
    """
    text = notes_json([_validate(n, str(path)) for n in notes])
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def make_note(
    session: str, text: str, action: str = "keep", *, node: str | None = None, leaf: str | None = None, author: str = ""
) -> dict[str, str]:
    """A new validated note (``created`` now, UTC).

    Raises:
        NotesError: it names neither or both of ``node`` and ``leaf``, or a field is too long.
    """
    note = {"session": session, "text": text.strip(), "action": action, "author": author.strip()}
    note["created"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if node:
        note["node"] = node
    if leaf:
        note["leaf"] = leaf
    return _validate(note, "note")


def sidecar_for(paths: Sequence[str | Path]) -> Path | None:
    """The sidecar beside the traces: ``rollout-graph-notes.json`` in the first path's folder
    (the path itself when it is a folder)."""
    if not paths:
        return None
    first = Path(paths[0])
    return (first if first.is_dir() else first.parent) / SIDECAR


def _offsets(rollout: Rollout, nodes: list[int]) -> dict[int, tuple[int, int]]:
    """Where each call's sampled span sits in a row (start, stop), as core.sequences builds it."""
    out, offset = {}, 0
    for k in nodes:
        call = rollout.calls[k]
        offset += call.n_prompt - rollout.context_start(k) if call.prompt_ids is not None else 0
        out[k] = (offset, offset + call.n_sampled)
        offset += call.n_sampled
    return out


def apply_notes(
    rollout: Rollout,
    rows: Iterable[dict[str, Any]],
    notes: Sequence[dict[str, Any]],
    drop_noted: bool = False,
    tally: Counter[str] | None = None,
) -> Iterator[dict[str, Any]]:
    """Training rows (``export.iter_training_rows``) with the notes' actions applied.

    A ``drop`` note leaves out the rows it touches; a ``mask`` note sets the loss mask and
    logprobs to 0 over its call's sampled tokens (or the whole row) and lowers ``n_trainable``;
    ``drop_noted`` leaves out every row any note but a ``keep`` touches. Rows a note touches get
    a ``notes`` list (text, action, author, target). ``tally`` counts the rows ``dropped`` and
    ``masked``.
    """
    tally = Counter() if tally is None else tally
    mine = [n for n in notes if n.get("session") == rollout.session_id]
    if not mine:
        yield from rows
        return
    by_leaf = {rollout.calls[s.leaf].node_id: s for s in rollout.sequences}
    for row in rows:
        seq = by_leaf.get(row["leaf_id"])
        ids = set(row["node_ids"])
        touching = [n for n in mine if n.get("leaf") == row["leaf_id"] or n.get("node") in ids]
        if not touching:
            yield row
            continue
        if any(n["action"] == "drop" or (drop_noted and n["action"] != "keep") for n in touching):
            tally["dropped"] += 1
            continue
        masks = [n for n in touching if n["action"] == "mask"]
        if masks and seq is not None:
            mask, logprobs = list(row["loss_mask"]), list(row["logprobs"])
            spans = _offsets(rollout, seq.nodes)
            for n in masks:
                if n.get("leaf"):
                    ranges = [(0, len(mask))]
                else:
                    ranges = [spans[rollout.index_of(n["node"])]]
                for start, stop in ranges:
                    mask[start:stop] = [0] * (stop - start)
                    logprobs[start:stop] = [0.0] * (stop - start)
            row = {**row, "loss_mask": mask, "logprobs": logprobs, "n_trainable": int(sum(mask))}
            tally["masked"] += 1
        row = {
            **row,
            "notes": [
                {
                    "target": n.get("node") or n.get("leaf"),
                    "action": n["action"],
                    "text": n["text"],
                    "author": n["author"],
                }
                for n in touching
            ],
        }
        yield row


def check_targets(rollouts: Sequence[Rollout], notes: Sequence[dict[str, Any]], name: str) -> list[str]:
    """Warnings for notes whose session, call or row is not among ``rollouts`` (they do nothing)."""
    known = {
        r.session_id: ({c.node_id for c in r.calls}, {r.calls[s.leaf].node_id for s in r.sequences}) for r in rollouts
    }
    out = []
    for n in notes:
        if n["session"] not in known:
            continue  # another rollout's note: fine
        calls, leaves = known[n["session"]]
        if n.get("node") and n["node"] not in calls:
            out.append(f"{name}: a note names call {n['node']!r}, not in session {n['session']!r}: ignored")
        if n.get("leaf") and n["leaf"] not in leaves:
            out.append(f"{name}: a note names training row {n['leaf']!r}, not a leaf of {n['session']!r}: ignored")
    return out
