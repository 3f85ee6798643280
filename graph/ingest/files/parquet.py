"""Parquet read with a bound before it decodes: row group by row group, every count checked.

Entry points: :func:`open_parquet` (a file object or bytes -> a :class:`BoundedParquet`, refused
from its size and its footer before any page is read) with :meth:`BoundedParquet.batches` (the
rows, a batch at a time, each counted as it decodes) and :func:`read_parquet_bounded` (the whole
table, for signals and the Corpus page's audit tables). Traces read their rows through
``values/binary.py``. Bottom of ingest: pyarrow is imported on first use (a JSONL load never
loads it). docs/limits.md lists the limits; docs/architecture.md, "Parquet with a bound", how.

What is checked: the file's size (``max_file_bytes``; the file is read where it lies, never
copied whole into memory), the footer's length, rows (``max_parquet_rows``) and each column
chunk's declared decoded size (``max_parquet_bytes``) before any page; then, as each batch
decodes, the rows and the bytes it really decodes to, text columns read as dictionaries so a
repeated string counts every time it repeats before it is ever expanded.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import IO, Any

from rollout_graph.ingest.limits import LimitExceeded, Limits, human

_ROWS = "limit max_parquet_rows {limit:,}, --max-parquet-rows or ROLLOUT_GRAPH_MAX_PARQUET_ROWS"
_BYTES = "limit max_parquet_bytes {limit}, --max-parquet-bytes or ROLLOUT_GRAPH_MAX_PARQUET_BYTES"
_FILE = "limit max_file_bytes {limit}, --max-file-bytes or ROLLOUT_GRAPH_MAX_FILE_BYTES"
FOOTER_SHARE = 16  # the footer (metadata) may take at most this part of max_parquet_bytes
_VALUE_BYTES = 8  # bytes a value decodes to at least (run-length encoded zeros count this much)
_TEXT_LOGICAL = {"STRING", "NONE", "JSON", "BSON", "ENUM"}  # BYTE_ARRAY columns read as dictionaries


def _rows_over(what: str, limits: Limits) -> LimitExceeded:
    return LimitExceeded(f"{what} ({_ROWS.format(limit=limits.max_parquet_rows)}); the file is not read")


def _bytes_over(what: str, limits: Limits) -> LimitExceeded:
    return LimitExceeded(f"{what} ({_BYTES.format(limit=human(limits.max_parquet_bytes))}); the file is not read")


def _unreadable(exc: BaseException) -> ValueError:
    return ValueError(f"not a readable Parquet file: {type(exc).__name__}: {str(exc)[:200]}")


def _size_of(stream: IO[bytes]) -> int:
    at = stream.tell()
    end = stream.seek(0, io.SEEK_END)
    stream.seek(at)
    return end


class BoundedParquet:
    """A Parquet file whose size and footer passed the limits; its rows decode batch by batch."""

    def __init__(self, stream: IO[bytes], limits: Limits) -> None:
        import pyarrow.parquet as pq  # third-party, heavy: only for a Parquet file

        self.limits = limits
        size = _size_of(stream)
        if size > limits.max_file_bytes:
            raise LimitExceeded(
                f"Parquet file larger than {human(limits.max_file_bytes)} "
                f"({_FILE.format(limit=human(limits.max_file_bytes))}); the file is not read"
            )
        self._footer_length(stream, size)
        try:
            plain = pq.ParquetFile(stream)
            meta = plain.metadata
            self.schema = plain.schema_arrow  # the file's own types (dictionaries read back as it says)
        except Exception as exc:  # noqa: BLE001 - pyarrow raises many types for a corrupt footer
            raise _unreadable(exc) from None
        self.names: list[str] = list(self.schema.names)
        self._check_footer(meta)
        columns = meta.schema
        text = [
            columns.column(i).path
            for i in range(meta.num_columns)
            if columns.column(i).physical_type == "BYTE_ARRAY" and columns.column(i).logical_type.type in _TEXT_LOGICAL
        ]
        try:  # text columns as dictionaries: what a repeated string decodes to is counted, not made
            self._file = pq.ParquetFile(stream, read_dictionary=text) if text else plain
        except Exception as exc:  # noqa: BLE001
            raise _unreadable(exc) from None
        self.row_groups = meta.num_row_groups

    def _footer_length(self, stream: IO[bytes], size: int) -> None:
        """The footer's length (the last 8 bytes: its length and ``PAR1``) before pyarrow reads it."""
        if size < 12:
            return  # pyarrow names what is wrong with it
        at = stream.tell()
        stream.seek(size - 8)
        tail = stream.read(8)
        stream.seek(at)
        if len(tail) == 8 and tail[4:] == b"PAR1":
            footer = int.from_bytes(tail[:4], "little")
            most = self.limits.max_parquet_bytes // FOOTER_SHARE
            if footer > most:
                raise LimitExceeded(
                    f"its footer holds {human(footer)} of metadata, more than {human(most)} (1/{FOOTER_SHARE} of "
                    f"the {_BYTES.format(limit=human(self.limits.max_parquet_bytes))}); the file is not read"
                )

    def _check_footer(self, meta: Any) -> None:
        limits = self.limits
        rows = max(meta.num_rows, sum(meta.row_group(g).num_rows for g in range(meta.num_row_groups)))
        if rows > limits.max_parquet_rows:
            raise _rows_over(f"{rows:,} rows", limits)
        declared = 0
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            for c in range(group.num_columns):
                column = group.column(c)
                declared += max(column.total_uncompressed_size, _VALUE_BYTES * column.num_values)
        if declared > limits.max_parquet_bytes:
            raise _bytes_over(f"decodes to about {human(declared)} by its footer", limits)

    def batches(self, batch_size: int = 1024) -> Iterator[Any]:
        """The rows as ``pyarrow.Table`` pieces in the file's own schema, row group by row group,
        each counted before it is expanded.

        Raises:
            LimitExceeded: the rows or the bytes decoded so far pass a limit (a footer that
                understates them), or memory ran out while decoding.
            ValueError: a page cannot be decoded.
        """
        import pyarrow as pa

        limits = self.limits
        rows = decoded = 0
        try:
            for group in range(self.row_groups):
                for batch in self._file.iter_batches(batch_size=batch_size, row_groups=[group], use_threads=False):
                    rows += batch.num_rows
                    if rows > limits.max_parquet_rows:
                        raise _rows_over(f"more than its footer says, {rows:,} rows so far", limits)
                    decoded += sum(decoded_bytes(column) for column in batch.columns)
                    if decoded > limits.max_parquet_bytes:
                        raise _bytes_over(f"decodes to more than its footer says, {human(decoded)} so far", limits)
                    yield pa.Table.from_batches([batch]).cast(self.schema)
        except LimitExceeded:
            raise
        except MemoryError:
            raise LimitExceeded("out of memory while decoding; the file is not read") from None
        except Exception as exc:  # noqa: BLE001 - ArrowMemoryError, ArrowInvalid, OSError for corrupt pages
            if "memory" in type(exc).__name__.lower() or "alloc" in str(exc).lower():
                raise LimitExceeded(f"out of memory while decoding ({str(exc)[:160]}); the file is not read") from None
            raise _unreadable(exc) from None


def decoded_bytes(array: Any) -> int:
    """What ``array`` takes once every dictionary is expanded (a repeated string counted each
    time), computed from its indices and the dictionary's value lengths without expanding it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = array.type
    if pa.types.is_dictionary(kind):
        values = array.dictionary
        value_type = values.type
        if (
            pa.types.is_string(value_type)
            or pa.types.is_binary(value_type)
            or pa.types.is_large_string(value_type)
            or pa.types.is_large_binary(value_type)
        ):
            if len(values) == 0 or len(array) == 0:
                return _VALUE_BYTES * len(array)
            each = pc.take(pc.binary_length(values), array.indices)
            total = pc.sum(each).as_py() or 0
            return int(total) + _VALUE_BYTES * len(array)
        try:
            width = value_type.bit_width // 8
        except ValueError:  # a nested dictionary value: each row counted as the whole dictionary
            width = max(1, values.nbytes)
        return max(width, 1) * len(array)
    if pa.types.is_struct(kind):
        return sum(decoded_bytes(field) for field in array.flatten())
    if pa.types.is_map(kind):
        return _VALUE_BYTES * len(array) + decoded_bytes(array.keys) + decoded_bytes(array.items)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return _VALUE_BYTES * len(array) + decoded_bytes(array.flatten())
    return int(array.nbytes)


def open_parquet(data: bytes | IO[bytes], limits: Limits | None = None) -> BoundedParquet:
    """A Parquet file (an open seekable file or bytes held in memory), refused from its size and
    its footer when over the limits, before any page is decoded.

    Raises:
        LimitExceeded: over a limit (the message names it and the flag that raises it).
        ValueError: not a readable Parquet file.
    """
    stream = io.BytesIO(data) if isinstance(data, (bytes, bytearray, memoryview)) else data
    return BoundedParquet(stream, limits or Limits())


def read_parquet_bounded(name: str, data: bytes | IO[bytes], limits: Limits | None = None) -> Any:
    """A whole Parquet file as a ``pyarrow.Table`` (signals, audit tables), read row group by row
    group under the limits; never ``read_table()`` unbounded.

    Raises:
        LimitExceeded: over a limit (the message names the file, the limit and its flag).
        ValueError: not a readable Parquet file (the message says why).
    """
    import pyarrow as pa

    try:
        parquet = open_parquet(data, limits)
        pieces = list(parquet.batches(batch_size=65536))
    except LimitExceeded as exc:
        raise LimitExceeded(f"{name}: {exc}") from None
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None
    if not pieces:
        return parquet.schema.empty_table()
    return pa.concat_tables(pieces)
