"""The core model: records, exact-prefix linking, topology, sequences, roles and findings, and the
analysed :class:`~graph.core.rollout.Rollout` (rules in docs/semantics.md)."""
