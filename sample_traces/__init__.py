"""Bundled sample traces and the tokenizer they need (package data; see rollout_graph.resources)."""
