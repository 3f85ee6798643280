"""Bundled sample traces and the tokenizer they need (package data; see graph.resources)."""
