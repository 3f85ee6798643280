"""Values: one JSON value per line, row or item of a source, with a reason for each one that is not.

The layer above the shortcuts (docs/architecture.md, "Ingest: one way"): ``line`` (one raw line ->
a value: every shortcut's span found on the original line, cut in one pass, parsed, put back),
``read`` (a source -> its values: JSONL, one pretty-printed document, one array, or the rows of a
binary file), ``binary`` (Parquet rows as values; pickles refused) and ``record_text`` (a
record's text read back by file and line). ``formats/`` converts the values to calls.
"""
