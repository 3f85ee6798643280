"""Formats: one JSON value -> calls, each record shape a reader registered with a detect and a parse.

The layer above values (docs/architecture.md, "Ingest: one way"): ``registry`` (the readers in
the order they are tried, and :func:`~rollout_graph.ingest.formats.registry.parse_value`), one
module per record shape (``engine_pair``, ``trace_entry``, ``rollout_document``, ``otel``,
``token_rows``, ``verifiers_trace``, ``openenv_files``, ``text_dumps``) and what they share (``fields``,
``fidelity``, ``streaming``, ``dialect_bodies``). docs/formats.md has a minimal example of each.
"""
