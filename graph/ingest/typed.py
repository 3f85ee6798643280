"""Typed fast path for chat logprob entries (``choices[i].logprobs.content``).

The logprob entries are most of the bytes of a vLLM chat trace with top-k alternatives: one
object per sampled token, each holding k more objects. Parsed as generic JSON they become millions
of short-lived dicts, read back column by column. Here a msgspec decoder first skims the line
for the byte span of each choice's ``content`` array (skipping everything else), decodes that span
into typed structs, and cuts it out of the line before the ordinary parser sees it; the cut is
replaced by a marker string that :func:`rollout_graph.ingest.id_arrays.restore` swaps for the decoded
columns (:class:`LogprobColumns`).

Only engine pairs (``request`` + ``response``, and none of the keys that make a record a rollout
document or a flat trace entry) are cut, so the columns always reach the chat parser. Any entry the
typed decoder does not accept exactly (a token or logprob of another type, an entry that is not an
object, non-standard JSON) leaves the whole array in the line for the validating generic path, so
both paths give the same calls and the same findings (a property test checks this).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import msgspec
import numpy as np

_NONCE = os.urandom(4).hex()
# The array spans worth cutting: shorter ones cost more to cut than to parse.
MIN_CUT_BYTES = 2048


class _Alt(msgspec.Struct, gc=False):
    token: str | int | None = None
    logprob: int | float | None = None


class _Entry(msgspec.Struct, gc=False):
    token: str | int | None = None
    logprob: int | float | None = None
    top_logprobs: list[_Alt] | None = None


class _Logprobs(msgspec.Struct):
    content: msgspec.Raw = msgspec.Raw(b"null")


class _Choice(msgspec.Struct):
    logprobs: _Logprobs | None = None


class _Response(msgspec.Struct):
    choices: list[_Choice] | None = None


# Any shape other than these (a stream's list of chunks, choices that are not objects, ...) fails
# the skim: such a line goes the generic path whole.
_RAW = msgspec.Raw | msgspec.UnsetType


class _Envelope(msgspec.Struct):
    request: _RAW = msgspec.UNSET
    response: _Response | msgspec.UnsetType = msgspec.UNSET
    turns: _RAW = msgspec.UNSET
    sequences: _RAW = msgspec.UNSET
    prompt_token_ids: _RAW = msgspec.UNSET
    completion_token_ids: _RAW = msgspec.UNSET
    per_token_logps: _RAW = msgspec.UNSET
    completion_tokens: _RAW = msgspec.UNSET


_ENVELOPE = msgspec.json.Decoder(_Envelope)
_ENTRIES = msgspec.json.Decoder(list[_Entry])


@dataclass(slots=True)
class LogprobColumns:
    """A choice's logprob entries as columns: what the generic path reads with ``itemgetter``.

    ``lengths[i]`` alternatives belong to entry ``i``; ``alt_tokens`` / ``alt_logprobs`` hold them
    flattened in order. Values keep their JSON types (``int`` stays ``int``).
    """

    tokens: list
    logprobs: list
    lengths: list[int]
    alt_tokens: list
    alt_logprobs: list


def _columns(entries: list[_Entry]) -> LogprobColumns:
    tops = [e.top_logprobs or () for e in entries]
    alts = [a for top in tops for a in top]
    return LogprobColumns(
        tokens=[e.token for e in entries],
        logprobs=[e.logprob for e in entries],
        lengths=[len(top) for top in tops],
        alt_tokens=[a.token for a in alts],
        alt_logprobs=[a.logprob for a in alts],
    )


def _marker(i: int) -> str:
    return f"\x00lp-{_NONCE}:{i}"


def _address(buffer) -> int:
    return int(np.frombuffer(buffer, dtype=np.uint8).__array_interface__["data"][0])


def _spans(raw: bytes) -> list[tuple[int, int]]:
    """Byte spans of each choice's ``logprobs.content`` array in an engine-pair line."""
    try:
        envelope = _ENVELOPE.decode(raw)
    except (msgspec.DecodeError, ValueError):
        return []
    if envelope.request is msgspec.UNSET or not isinstance(envelope.response, _Response):
        return []
    if envelope.turns is not msgspec.UNSET and envelope.sequences is not msgspec.UNSET:
        return []  # a rollout document
    flat = (envelope.prompt_token_ids, envelope.completion_token_ids, envelope.per_token_logps)
    if any(v is not msgspec.UNSET for v in (*flat, envelope.completion_tokens)):
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


def cut_logprobs(raw: bytes) -> tuple[bytes, dict[str, LogprobColumns]]:
    """The line with each typed-decodable logprob content array replaced by a marker string."""
    if b'"content"' not in raw or b'"top_logprobs"' not in raw:
        return raw, {}
    found: dict[str, LogprobColumns] = {}
    pieces: list[bytes] = []
    pos = 0
    for start, end in _spans(raw):
        try:
            entries = _ENTRIES.decode(raw[start:end])
        except (msgspec.DecodeError, ValueError):
            continue
        marker = _marker(len(found))
        found[marker] = _columns(entries)
        pieces += [raw[pos:start], b'"\\u0000', marker[1:].encode(), b'"']
        pos = end
    if not found:
        return raw, found
    pieces.append(raw[pos:])
    return b"".join(pieces), found
