"""Bytes -> records: trace files read into calls grouped in sessions, with a load report.

Data flows one way, each folder importing only those before it (docs/architecture.md, "Ingest:
one way"; tests/project/test_layers.py keeps it so):

    files/      bytes: sources, chunks (plain, gzip, zstd), lines, JSON values, Parquet with a bound
    shortcuts/  exact fast paths cutting a raw line's big arrays: markers, ids, logprobs, messages
    values/     one value per line: parse_line (every span cut in one pass), read_values, binary rows
    formats/    one value -> calls: the record readers, registered with a detect and a parse
    load/       files -> a load report: load_files (cache or parse; the pool, two parts), calls

``limits.py`` (the limits of every layer), ``tokens.py`` (token lists -> validated arrays) and
``speedups.py`` (the optional C speedups, sources in ``csrc/``) are leaves any layer may use.
"""
