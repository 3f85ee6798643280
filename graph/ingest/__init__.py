"""Bytes -> records: reading files (plain, gzip, zstd; JSONL or one document), the record shapes
in ``formats/``, token fields, and loading calls into sessions with a load report."""
