"""Where a line's chat logprob content arrays are: by their bytes in vLLM's compact layout, else by
a msgspec skim of the line.

Entry points: :func:`located_span` (the one-choice compact layout: the array found between
``"logprobs":{"content":[`` and ``]},"finish_reason"`` without reading it), :func:`skimmed_spans`
(any engine pair's choices, skimmed), :func:`holds_alternatives` (whether a skim can find any)
and :func:`placed` (the parsed record confirms a cut found by bytes; else the line is cut again,
skimmed). A middle-layer shortcut: ``values/line.py`` asks for the spans, ``logprob_entries.py``
reads them. Only engine pairs are cut, so the columns always reach the chat parser.
docs/performance.md, "Cold inspect: prompt ids and content arrays".
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from rollout_graph.ingest.files.search import find_by_rare_byte, find_outside
from rollout_graph.ingest.shortcuts.logprob_entries import LogprobColumns, typed

# The array spans worth cutting: shorter ones cost more to cut than to parse.
MIN_CUT_BYTES = 2048
TOP_KEY = b'"top_logprobs"'  # what a content array with alternatives holds (messages.OTHER_KEYS)


def holds_alternatives(raw: bytes, cut: list, skip: tuple[int, int] | None) -> bool:
    """Whether the line may hold a content array with alternatives, the skim's pre-check:
    ``"content"`` and ``"top_logprobs"`` outside the spans already ``cut`` (id arrays: digits), the
    latter outside ``skip`` too (a span known to hold none: a repeated ``messages`` array)."""
    if find_outside(raw, b'"content"', 0, len(raw), cut) < 0:
        return False
    spans = cut if skip is None else sorted([*cut, skip])
    return find_outside(raw, TOP_KEY, 0, len(raw), spans) >= 0


def _address(buffer) -> int:
    return int(np.frombuffer(buffer, dtype=np.uint8).__array_interface__["data"][0])


def skimmed_spans(raw: bytes) -> list[tuple[int, int]]:
    """``(start, end)`` of each choice's ``logprobs.content`` array in an engine-pair line (the
    array with its brackets), found by msgspec's skim of the whole line."""
    t = typed()
    try:
        envelope = t.ENVELOPE.decode(raw)
    except (t.DecodeError, ValueError):
        return []
    if envelope.request is t.UNSET or not isinstance(envelope.response, t.Response):
        return []
    if envelope.turns is not t.UNSET and envelope.sequences is not t.UNSET:
        return []  # a rollout document
    flat = (envelope.prompt_token_ids, envelope.completion_token_ids, envelope.per_token_logps)
    if any(v is not t.UNSET for v in (*flat, envelope.completion_tokens)):
        return []  # a flat trace entry
    choices = envelope.response.choices or []
    base = _address(raw)
    spans = []
    for choice in choices:
        if choice.logprobs is None:
            continue
        content = choice.logprobs.content
        if len(content) < MIN_CUT_BYTES:
            continue
        start = _address(content) - base
        end = start + len(content)
        # The raw span must point into this very buffer; anything else is not cut.
        if 0 <= start and end <= len(raw) and raw[start : start + 1] == b"[" and raw[start:end] == bytes(content):
            spans.append((start, end))
    return spans


# vLLM's compact layout of a choice: the content array, then the end of the logprobs object and
# the next key. Found by byte searches instead of the skim (the opening from the line's start,
# the closing from its end: neither reads the content); placed() then checks the parsed record
# holds the cut exactly as a choice's logprobs.content.
_CONTENT_OPENS = b'"logprobs":{"content":['
_CONTENT_CLOSES = b']},"finish_reason"'
_HEAD_BYTES = 512  # where a capture record's "request" key opens


_TRIES = 16  # brackets looked at before bytes.find takes over


def find_bracket_key(raw: bytes, key: bytes, start: int, end: int) -> int:
    """``raw.find(key, start, end)`` for a ``key`` ending in ``[``: the brackets are found by
    memchr (``[`` is rare before a record's arrays, and prose holds few), each checked for the
    key before it; after ``_TRIES`` that are not the key's, bytes.find from there (which, for a
    key of letters in prose, looks at nearly every byte)."""
    return find_by_rare_byte(raw, key, start, end, len(key) - 1, _TRIES)


def located_span(raw: bytes, skipped: Callable[[], tuple[int, int] | None] | None = None) -> tuple[int, int] | None:
    """The span of a one-choice line's content array by the bytes alone (None: another layout).

    With several choices the span found runs from the first array to the last and does not
    decode as one array: the caller then takes the skim. ``skipped``: asked (once the line looks
    like a capture record) for a span not searched for the opening, a repeated ``messages``
    array: an opening inside one would not be a choice's, and the cut found is confirmed by
    placed() either way.
    """
    if raw.find(b'"request":{', 0, _HEAD_BYTES) < 0:
        return None  # not a capture record's layout (a flat entry's ids are never scanned for it)
    skip = None if skipped is None else skipped()
    if skip is None:
        at = find_bracket_key(raw, _CONTENT_OPENS, 0, len(raw))
    else:
        at = find_bracket_key(raw, _CONTENT_OPENS, 0, skip[0] + len(_CONTENT_OPENS) - 1)
        if at < 0:
            at = find_bracket_key(raw, _CONTENT_OPENS, max(0, skip[1] - len(_CONTENT_OPENS) + 1), len(raw))
    if at < 0:
        return None
    start = at + len(_CONTENT_OPENS) - 1
    end = raw.rfind(_CONTENT_CLOSES, start)
    if end < 0 or end + 1 - start < MIN_CUT_BYTES:
        return None
    return start, end + 1


_FLAT_KEYS = ("prompt_token_ids", "completion_token_ids", "per_token_logps", "completion_tokens")


def placed(value: object, cut: list) -> bool:
    """Whether every content array cut where its bytes are (``cut``: the values of a line's cuts)
    came back as a choice's ``logprobs.content`` of an engine pair (what the skim checks before it
    cuts); False: the line must be cut again, skimmed."""
    located = {id(c) for c in cut if isinstance(c, LogprobColumns) and c.located}
    if not located:
        return True
    if not isinstance(value, dict) or "request" not in value or not isinstance(value.get("response"), dict):
        return False
    if ("turns" in value and "sequences" in value) or any(k in value for k in _FLAT_KEYS):
        return False
    choices = value["response"].get("choices")
    if not isinstance(choices, list):
        return False
    seen = set()
    for choice in choices:
        logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
        content = logprobs.get("content") if isinstance(logprobs, dict) else None
        if isinstance(content, LogprobColumns):
            seen.add(id(content))
    return seen == located
