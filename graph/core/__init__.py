"""The core model: records, exact-prefix linking, topology, sequences, roles and findings, and the
analysed :class:`~rollout_graph.core.rollout.Rollout` (rules in docs/semantics.md)."""
