"""Files that are not JSON: Parquet tables (TRL's completions) are read row by row; pickles never.

A Parquet row becomes one JSON-like value (its "line" is the 1-based row number), so every record
shape applies to it. Pickles (``.pkl``, ``.pickle``) and ``torch.save`` files (``.pt``, ``.pth``),
which SkyRL's and slime's training dumps are, can run arbitrary code when loaded: they are never
opened, and the load report names how to convert them (docs/formats.md, "Pickles").
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

from rollout_graph.ingest.limits import Limits, human
from rollout_graph.ingest.reading import RawValue, Source

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


def is_binary(name: str) -> bool:
    """Whether a file is read by this module rather than as JSON lines."""
    return name.lower().endswith(BINARY_SUFFIXES)


def values(source: Source, limits: Limits) -> Iterator[RawValue]:
    """A binary file's values: Parquet rows, or one error value for a pickle. Never raises on bad bytes."""
    if source.name.lower().endswith(PICKLE_SUFFIXES):
        yield RawValue(0, error=PICKLE_REASON)
        return
    with source.open() as stream:
        data = stream.read(limits.max_file_bytes + 1)
    if len(data) > limits.max_file_bytes:
        yield RawValue(
            0, error=f"over a limit: Parquet file larger than {human(limits.max_file_bytes)} (max_file_bytes)"
        )
        return
    try:
        import pyarrow.parquet as pq

        table = pq.read_table(io.BytesIO(data))
    except Exception as exc:  # noqa: BLE001 - an untrusted file must never stop a load
        yield RawValue(0, error=f"not a readable Parquet file: {type(exc).__name__}: {str(exc)[:200]}")
        return
    if AUDIT_COLUMNS <= set(table.column_names):
        yield RawValue(0, error=AUDIT_REASON)
        return
    line = 0
    for batch in table.to_batches(max_chunksize=1024):
        for row in batch.to_pylist():
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
