"""Signals files -> :class:`SignalRow` records, with a report of every row that could not be read.

JSONL (optionally gzip or zstd compressed) or Parquet. A row needs ``session_id`` and
``leaf_id`` (strings); ``trainer_logprobs`` and ``advantages`` are arrays of numbers (``null``
allowed: not computed there), ``reward`` a number. Any other scalar column (string, number, bool) is
kept as row metadata (null means not set); list or object columns other than those are ignored (a row may be
a whole exported training row with the trainer's columns added). ``input_ids``, when present, is
kept so the join can check it against the row it names.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rollout_graph.core.records import Skipped
from rollout_graph.ingest import limits as _limits
from rollout_graph.ingest.files.parquet import open_parquet
from rollout_graph.ingest.files.sources import Source
from rollout_graph.ingest.limits import LimitExceeded, Limits
from rollout_graph.ingest.values.read import read_values

ARRAY_COLUMNS = ("trainer_logprobs", "advantages")
KEY_COLUMNS = ("session_id", "leaf_id")
# Columns of an exported training row that are not metadata (they describe the row itself).
ROW_COLUMNS = frozenset(
    {"root_id", "node_ids", "role", "loss_mask", "logprobs", "prompt_len", "n_trainable", "findings"}
)


class SignalsError(Exception):
    """A signals file that cannot be read at all (missing, not JSONL or Parquet, no rows)."""


@dataclass(slots=True)
class SignalRow:
    """The trainer's side of one training row."""

    session_id: str
    leaf_id: str
    line: int
    trainer_logprobs: np.ndarray | None = None  # float64, NaN = not computed at that position
    advantages: np.ndarray | None = None
    reward: float | None = None
    input_ids: np.ndarray | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    file: str = ""  # the signals file it was read from (its name as given; an upload's file name)

    @property
    def key(self) -> tuple[str, str]:
        """``(session_id, leaf_id)``: the training row this row describes."""
        return (self.session_id, self.leaf_id)


@dataclass(slots=True)
class SignalsFile:
    """Every readable row of one or more signals files, and why the others were skipped."""

    names: list[str] = field(default_factory=list)
    rows: list[SignalRow] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)

    def extend(self, other: SignalsFile) -> None:
        """Add another file's rows (signals from several files are joined together)."""
        self.names += other.names
        self.rows += other.rows
        self.skipped += other.skipped

    def report(self) -> dict[str, Any]:
        """The load report, as ``inspect --json`` prints it under ``signals_load``."""
        return {"files": list(self.names), "rows": len(self.rows), "skipped": [s.as_dict() for s in self.skipped]}


_NUMBER_TYPES = frozenset({float, int, type(None)})


def _float_array(value: Any, column: str) -> np.ndarray:
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if not isinstance(value, list | tuple):
        raise ValueError(f"{column} is not a list")
    if set(map(type, value)) <= _NUMBER_TYPES:  # the fast path: numpy turns None into NaN
        return np.array(value, dtype=np.float64)
    for i, v in enumerate(value):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)):
            raise ValueError(f"{column}[{i}] is not a number: {v!r}"[:160])
    return np.array([np.nan if v is None else float(v) for v in value], dtype=np.float64)


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def parse_row(value: Any, line: int, file: str = "") -> SignalRow:
    """One JSON object -> a :class:`SignalRow`.

    Raises:
        ValueError: the row lacks its keys or a column has the wrong type (the message says which).
    """
    if not isinstance(value, dict):
        raise ValueError(f"not an object but {type(value).__name__}")
    keys = []
    for column in KEY_COLUMNS:
        v = value.get(column)
        if not isinstance(v, str) or not v:
            raise ValueError(f"no {column} (a non-empty string)")
        keys.append(v)
    row = SignalRow(keys[0], keys[1], line, file=file)
    for column in ARRAY_COLUMNS:
        if value.get(column) is not None:
            setattr(row, column, _float_array(value[column], column))
    reward = value.get("reward")
    if reward is not None:
        if isinstance(reward, bool) or not isinstance(reward, int | float) or not math.isfinite(reward):
            raise ValueError(f"reward is not a finite number: {reward!r}"[:160])
        row.reward = float(reward)
    ids = value.get("input_ids")
    if ids is not None:
        try:
            row.input_ids = np.asarray(ids, dtype=np.int64)
        except (TypeError, ValueError, OverflowError) as exc:
            raise ValueError("input_ids is not a list of integers") from exc
    for column, v in value.items():
        if (
            column in KEY_COLUMNS
            or column in ARRAY_COLUMNS
            or column in ROW_COLUMNS
            or column in ("reward", "input_ids")
        ):
            continue
        if v is not None and _scalar(v):  # null = not set (Parquet fills absent columns with null)
            row.extra[column] = v
    return row


def _jsonl(source: Source, out: SignalsFile, limits: Limits) -> None:
    for raw in read_values(source, limits):
        if raw.error is not None:
            out.skipped.append(Skipped(source.name, raw.line, raw.error))
            continue
        try:
            out.rows.append(parse_row(raw.value, raw.line, source.name))
        except ValueError as exc:
            out.skipped.append(Skipped(source.name, raw.line, str(exc)))


def _parquet(name: str, data: bytes, out: SignalsFile, limits: Limits) -> None:
    """A signals Parquet's rows, read with a bound (graph/ingest/files/parquet.py: the footer
    checked before any page, each batch counted as it decodes; never an unbounded read_table())."""
    line = 0
    try:
        for table in open_parquet(data, limits).batches(_PARQUET_BATCH):
            for value in table.to_pylist():
                line += 1
                try:
                    out.rows.append(parse_row(value, line, name))
                except ValueError as exc:
                    out.skipped.append(Skipped(name, line, str(exc)))
    except LimitExceeded as exc:
        raise SignalsError(f"over a limit: {name}: {exc}") from None
    except ValueError as exc:
        raise SignalsError(f"{name}: {exc}") from None


_PARQUET_BATCH = 4096  # rows made Python values at a time


def _limits_for(limits: Limits | None) -> Limits:
    """The caller's limits; else the app's (the public ones under ``--public``, then the environment)."""
    return limits if limits is not None else _limits.for_app()


def read_signals_bytes(name: str, data: bytes, limits: Limits | None = None) -> SignalsFile:
    """Read one signals file held in memory (an upload); Parquet by name or magic bytes.

    Read under ``limits`` (docs/limits.md); by default the app's limits, so a public deployment
    reads signals with the public ones.

    Raises:
        SignalsError: nothing in it could be read as a signals row.
    """
    out = SignalsFile(names=[name])
    if name.endswith(".parquet") or data[:4] == b"PAR1":
        _parquet(name, data, out, _limits_for(limits))
    else:
        _jsonl(Source.from_bytes(name, data), out, _limits_for(limits))
    if not out.rows:
        reason = f"{out.skipped[0].reason} (line {out.skipped[0].line})" if out.skipped else "no rows"
        raise SignalsError(f"{name}: no signals rows: {reason}")
    return out


def read_signals(path: str | Path, limits: Limits | None = None) -> SignalsFile:
    """Read one signals file from disk.

    Raises:
        SignalsError: the file is missing, unreadable, or holds no readable row.
    """
    p = Path(path)
    limits = _limits_for(limits)
    source = Source.from_path(p)  # opened without blocking: a FIFO, device or socket is refused
    over = SignalsError(
        f"{source.name}: over a limit: larger than {_limits.human(limits.max_file_bytes)} "
        "(limit max_file_bytes, --max-file-bytes)"
    )
    try:
        with source.open() as stream:
            if os.fstat(stream.fileno()).st_size > limits.max_file_bytes:
                raise over
            chunks, total = [], 0
            while chunk := stream.read(1 << 20):  # counted as read: a file that grows stops at the limit
                total += len(chunk)
                if total > limits.max_file_bytes:
                    raise over
                chunks.append(chunk)
    except OSError as exc:
        raise SignalsError(f"cannot read {source.name}: {exc.strerror or exc}") from exc
    return read_signals_bytes(source.name, b"".join(chunks), limits)
