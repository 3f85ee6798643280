"""The one marker scheme: a cut span is replaced by a marker string, put back after the parse.

Entry points: :func:`marker` (the string a cut becomes: a NUL, the cut's kind, one nonce drawn per
process so a trace's own text cannot name one, and its number), :func:`as_json` (the marker as
the JSON string written into the cut line) and :func:`restore` (the parsed value with every
marker replaced by what was cut). ``values/line.py`` writes the markers and calls restore; the
shortcuts only find spans. docs/performance.md, "Cold inspect: reading lines" ("Markers and
restore").
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any

NONCE = os.urandom(4).hex()
# The kinds name the search that found a span: BYTES the byte scan (id arrays, and a content array
# found by its bytes), SKIM the msgspec skim (content arrays), MESSAGES the messages cutter.
BYTES, SKIM, MESSAGES = "ids", "lp", "msg"


@lru_cache(maxsize=1024)  # a line's markers are those of the lines before it
def marker(kind: str, index: int | None = None) -> str:
    """The marker string of the ``index``-th cut of ``kind`` (the messages array has no index)."""
    return f"\x00{kind}-{NONCE}" if index is None else f"\x00{kind}-{NONCE}:{index}"


@lru_cache(maxsize=1024)
def as_json(name: str) -> bytes:
    """``name`` as the JSON string the cut line holds (its NUL escaped)."""
    return b'"\\u0000' + name[1:].encode() + b'"'


_NESTING = frozenset({dict, list})


def restore(value: Any, arrays: dict[str, Any]) -> None:
    """Put the cut arrays (or logprob columns, or messages) back where their markers are (only
    dict values can hold one).

    The places an engine pair holds its markers (the response's prompt ids, its first choice's
    logprob entries, the request's messages) are looked at first; when that places every one the
    walk is not made at all. Otherwise objects are walked before lists, so the walk usually ends
    before it reaches a long list of scalars. Each marker occurs once in the cut line, so the order
    changes nothing but the time (tests/ingest/test_restore.py compares it with the plain walk)."""
    remaining = len(arrays)
    if not remaining:
        return
    if type(value) is dict:
        remaining -= _restore_engine_pair(value, arrays)
        if not remaining:
            return
    objects = [value] if isinstance(value, dict) else []
    lists = [value] if isinstance(value, list) else []
    while remaining and (objects or lists):
        if objects:
            node = objects.pop()
            for key, child in node.items():
                if isinstance(child, str):
                    if child[:1] == "\x00" and child in arrays:
                        node[key] = arrays[child]
                        remaining -= 1
                elif isinstance(child, dict):
                    objects.append(child)
                elif isinstance(child, list):
                    lists.append(child)
            continue
        items = lists.pop()
        if not _NESTING.intersection(map(type, items)):
            continue  # a list of scalars (token ids, texts): a marker is only ever a dict's value
        for child in items:
            if isinstance(child, dict):
                objects.append(child)
            elif isinstance(child, list):
                lists.append(child)


def _put_back(node: Any, key: str, arrays: dict[str, Any]) -> int:
    """1 when ``node`` (a dict) holds a marker under ``key``, put back; else 0."""
    if type(node) is dict:
        child = node.get(key)
        if type(child) is str and child[:1] == "\x00" and child in arrays:
            node[key] = arrays[child]
            return 1
    return 0


def _restore_engine_pair(value: dict, arrays: dict[str, Any]) -> int:
    """The markers put back from where an engine pair holds them (how many)."""
    placed = 0
    response = value.get("response")
    if type(response) is dict:
        placed += _put_back(response, "prompt_token_ids", arrays)
        choices = response.get("choices")
        if type(choices) is list and choices:
            choice = choices[0]
            if type(choice) is dict:
                placed += _put_back(choice.get("logprobs"), "content", arrays)
    return placed + _put_back(value.get("request"), "messages", arrays)
