"""Bytes: where a trace's bytes come from and how they are cut into lines and JSON values.

The bottom layer of ingest (docs/architecture.md, "Ingest: one way"): ``sources`` (a file on disk
or an upload, opened without blocking on a FIFO), ``chunks`` (plain, gzip and zstd, bounded),
``lines`` (the line splitter), ``json_values`` (one JSON text -> a value, and :class:`RawValue`),
``parquet`` (Parquet read with a bound before it decodes) and ``search`` (byte searches the
shortcuts share). Nothing here imports another ingest layer.
"""
