"""Shortcuts: exact fast paths that cut a raw line's big arrays out before the JSON parser sees it.

The middle of ingest (docs/architecture.md, "Ingest: one way"): ``markers`` (the one marker
scheme and :func:`~rollout_graph.ingest.shortcuts.markers.restore`), ``id_arrays`` (prompt ids
parsed from their text, stored in arenas), ``logprob_spans`` and ``logprob_entries`` (chat logprob
content arrays: where they are, what they decode to, alternatives left in the file) and
``messages`` (a request's messages array, its known prefix reused). Each finds spans of the
original line and reads them; ``values/line.py`` cuts them all in one pass. Each is exact or not
taken (docs/performance.md). Imports only ``files/`` and the ingest leaves.
"""
