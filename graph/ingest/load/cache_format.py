"""What one entry of the persistent cache holds: its files, the call fields each keeps, its format.

An entry is a folder of five files: ``arrays.bin`` (the token arrays a summary reads, raw bytes;
prompts sharing their parent's ids in memory written once), ``top.bin`` (each call's top-k
alternatives, a checksum per call), ``calls.jsonl`` (a line per call), ``values.jsonl`` (each
distinct request message or tool list once) and ``meta.json`` (the load report, the sessions
and their links, every file's size and CRC-32). Entry points: :data:`FORMAT`, :data:`CALL_FIELDS`,
:class:`NotCacheable`, :func:`note`. Shared by ``cache_write.py`` and ``cache_read.py``; load layer.
docs/performance.md, "The cached reopen".
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from rollout_graph.core.records import Call

FORMAT = 3  # 3: the sessions' links in meta.json


# Every Call field, so a new field without a place fails loudly (a test checks) instead of
# being silently dropped from cached loads.
CALL_FIELDS = (
    "node_id",
    "session_id",
    "source",
    "line",
    "shape",
    "prompt_ids",
    "sampled_ids",
    "sampled_logprobs",
    "top_k",
    "token_texts",
    "request_messages",
    "response_message",
    "tools",
    "requested_params",
    "submitted_params",
    "model",
    "finish_reason",
    "timing",
    "usage",
    "harness",
    "issues",
    "claims",
)


TEXT_FIELDS = ("node_id", "session_id", "source", "line", "shape", "model", "finish_reason", "harness")


JSON_FIELDS = ("token_texts", "response_message", "requested_params", "submitted_params", "timing", "usage", "claims")


# waits at most one batch (about 20 ms of CPU on 5,000 vLLM calls, their alternatives read) for it to pause
ALIGN = 16


FILES = ("meta.json", "calls.jsonl", "values.jsonl", "arrays.bin", "top.bin")


CHUNK = 1 << 20


def note(message: str, *args: Any) -> None:
    """A warning on the ``rollout_graph.cache`` logger (stderr unless configured otherwise);
    logging is imported only when there is something to say."""
    import logging

    logging.getLogger("rollout_graph.cache").warning(message, *args)


class NotCacheable(ValueError):
    """A value the cache cannot store exactly; the load is used as is, uncached."""


def call_fields_covered() -> bool:
    """Every field of :class:`Call` has a place in the cache (checked by a test)."""
    return {f.name for f in fields(Call)} == set(CALL_FIELDS)
