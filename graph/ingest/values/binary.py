"""Files that are not JSON, as values: Parquet tables (TRL's completions) row by row; pickles never.

Entry points: :func:`is_binary` (by the file's name) and :func:`values` (a Parquet file's rows as
:class:`~rollout_graph.ingest.files.json_values.RawValue` values, its "line" the 1-based row
number, so every record shape applies; one error value for a pickle or an audit table). The
rows are read with a bound (``files/parquet.py``: the footer checked before any page, each batch
counted as it decodes): the refusal names the limit and its flag. Pickles (``.pkl``,
``.pickle``) and ``torch.save`` files (``.pt``, ``.pth``) can run arbitrary code when loaded:
never opened (docs/formats.md, "Pickles"). Called by ``values/read.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rollout_graph.ingest.files.json_values import RawValue
from rollout_graph.ingest.files.parquet import open_parquet
from rollout_graph.ingest.files.sources import Source
from rollout_graph.ingest.limits import LimitExceeded, Limits

PARQUET_SUFFIXES = (".parquet",)
PICKLE_SUFFIXES = (".pkl", ".pickle", ".pt", ".pth")
BINARY_SUFFIXES = PARQUET_SUFFIXES + PICKLE_SUFFIXES

PICKLE_REASON = (
    "a pickle (.pkl/.pt, as SkyRL's and slime's training dumps are) is never unpickled: loading one can run "
    'any code. Convert it where it was written, e.g. python -c "import json, sys, torch; '
    'd = torch.load(sys.argv[1], weights_only=True); ..." writing one JSON line per sample with token_ids, '
    "loss_mask and inference_logprobs (docs/formats.md, 'Pickles')"
)


# `rollout-graph audit --out` tables sit beside traces; their rows describe rollouts, they are none.
AUDIT_COLUMNS = frozenset({"source_file", "session_id", "n_turns", "finding_codes"})
AUDIT_REASON = "a rollout-graph audit table (rows describe rollouts; open it on the Corpus audit page), not a trace"
BATCH_ROWS = 1024  # rows decoded and converted at a time


def is_binary(name: str) -> bool:
    """Whether a file is read by this module rather than as JSON lines."""
    return name.lower().endswith(BINARY_SUFFIXES)


def values(source: Source, limits: Limits) -> Iterator[RawValue]:
    """A binary file's values: Parquet rows, or one error value for a pickle. Never raises on bad
    bytes; a limit passed while decoding keeps the rows before it and ends with one error value.

    Raises:
        OSError: the source cannot be opened.
    """
    if source.name.lower().endswith(PICKLE_SUFFIXES):
        yield RawValue(0, error=PICKLE_REASON)
        return
    with source.open() as stream:
        try:
            parquet = open_parquet(stream, limits)
        except LimitExceeded as exc:
            yield RawValue(0, error=f"over a limit: {exc}")
            return
        except ValueError as exc:
            yield RawValue(0, error=str(exc))
            return
        if AUDIT_COLUMNS <= set(parquet.names):
            yield RawValue(0, error=AUDIT_REASON)
            return
        line = 0
        batches = parquet.batches(BATCH_ROWS)
        while True:
            try:
                table = next(batches, None)
            except LimitExceeded as exc:
                yield RawValue(line + 1, error=f"over a limit: {exc}")
                return
            except ValueError as exc:
                yield RawValue(line + 1, error=str(exc))
                return
            if table is None:
                return
            for row in table.to_pylist():
                line += 1
                yield RawValue(line, _plain(row))


def _plain(value: Any) -> Any:
    """Parquet values as JSON values (bytes as text, anything else unusual as its string)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)
