"""The msgspec structs and decoders of a chat logprob content array and of the skim of a line.

Entry points: ``ENVELOPE`` (the skim: a line's top-level keys and each choice's content array as
raw bytes), ``ENTRIES`` (entries with their alternatives) and ``SAMPLED`` (entries without them).
A module of its own so msgspec is imported only when a line first needs it (a flat trace never
does): ``logprob_entries.typed()`` imports it. Used by ``logprob_entries`` and ``logprob_spans``.
"""

from __future__ import annotations

import msgspec

DecodeError = msgspec.DecodeError
UNSET = msgspec.UNSET


class Alt(msgspec.Struct, gc=False):
    """One top-k alternative."""

    token: str | int | None = None
    logprob: int | float | None = None


class Entry(msgspec.Struct, gc=False):
    """One logprob entry with its alternatives."""

    token: str | int | None = None
    logprob: int | float | None = None
    top_logprobs: list[Alt] | None = None


class Logprobs(msgspec.Struct):
    """A choice's ``logprobs``: the content array kept as bytes."""

    content: msgspec.Raw = msgspec.Raw(b"null")


class Choice(msgspec.Struct):
    """One choice of a response."""

    logprobs: Logprobs | None = None


class Response(msgspec.Struct):
    """A response: its choices."""

    choices: list[Choice] | None = None


# Any shape other than these (a stream's list of chunks, choices that are not objects, ...) fails
# the skim: such a line goes the generic path whole.
_RAW = msgspec.Raw | msgspec.UnsetType


class Envelope(msgspec.Struct):
    """A line's top-level keys that decide whether it is an engine pair."""

    request: _RAW = msgspec.UNSET
    response: Response | msgspec.UnsetType = msgspec.UNSET
    turns: _RAW = msgspec.UNSET
    sequences: _RAW = msgspec.UNSET
    prompt_token_ids: _RAW = msgspec.UNSET
    completion_token_ids: _RAW = msgspec.UNSET
    per_token_logps: _RAW = msgspec.UNSET
    completion_tokens: _RAW = msgspec.UNSET


class SampledEntry(msgspec.Struct, gc=False):
    """An entry without its alternatives (``top_logprobs`` is skipped, not built)."""

    token: str | int | None = None
    logprob: int | float | None = None


ENVELOPE = msgspec.json.Decoder(Envelope)
ENTRIES = msgspec.json.Decoder(list[Entry])
SAMPLED = msgspec.json.Decoder(list[SampledEntry])
