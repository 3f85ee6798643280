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

**Alternatives left in the file.** When the line comes from a plain (uncompressed) file on disk
(:class:`FileRef`), the top-k alternatives are not decoded at all: the entries are read with a
decoder that keeps only each entry's ``token`` and ``logprob`` and skips ``top_logprobs`` (msgspec
still checks the skipped bytes' JSON syntax: strings, escapes, numbers, literals, nesting; the span
must also be ASCII or valid UTF-8, or it takes the eager path), and the call's
:class:`~rollout_graph.core.records.TopK` is :meth:`~rollout_graph.core.records.TopK.deferred`: a
:class:`DeferredTop` holding the span's offset in the file reads and decodes it when the
alternatives are first read (the token view, the cache writer, an export). A summary never reads
them. Types inside the alternatives (which never produce findings: an alternative that is not an
id is kept as text or left absent) are checked then, by the same typed-then-generic decode as the
eager path, so the result is the same array either way (tests/ingest/test_cold_path.py).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from rollout_graph.core.records import TopK
from rollout_graph.ingest.rare_byte import find_by_rare_byte
from rollout_graph.ingest.speedups import native as _native
from rollout_graph.ingest.tokens import joined_tokens

if TYPE_CHECKING:
    from rollout_graph.ingest import typed_decoders


_decoders: list = []  # the module rollout_graph.ingest.typed_decoders, once imported


def _typed():  # -> the module rollout_graph.ingest.typed_decoders
    """The msgspec decoders (msgspec imported on first use: a flat trace never needs it)."""
    if not _decoders:
        from rollout_graph.ingest import typed_decoders

        _decoders.append(typed_decoders)
    return _decoders[0]


_NONCE = os.urandom(4).hex()
# The array spans worth cutting: shorter ones cost more to cut than to parse.
MIN_CUT_BYTES = 2048


# Present alternatives, as every engine writes them (compact): anything else is decoded at once.
_ALTERNATIVES = b'"top_logprobs":[{'
_PROBE = 32  # bytes at each end of a span kept to check the file still holds it


class LogprobColumns:
    """A choice's logprob entries as columns: what the generic path reads with ``itemgetter``.

    ``lengths[i]`` alternatives belong to entry ``i``; ``alt_tokens`` / ``alt_logprobs`` hold them
    flattened in order. Values keep their JSON types (``int`` stays ``int``).

    ``tokens`` and ``logprobs`` may be given as None when the C scanner read the entries
    (:func:`_sampled_only`): they are then built on first read, ``tokens`` as ``joined`` split at
    its commas (the text holds exactly one between tokens), ``logprobs`` as ``floats.tolist()``
    (every one was a JSON float: the same floats msgspec gives). A reader that needs only the
    joined text or the array (engine_pair's ``token_id:N`` path) builds neither.
    """

    __slots__ = (
        "_tokens",
        "_logprobs",
        "lengths",
        "alt_tokens",
        "alt_logprobs",
        "top",
        "located",
        "joined",
        "logprob_array",
        "floats",
        "id_texts",
    )

    def __init__(
        self,
        tokens: list | None,
        logprobs: list | None,
        lengths: list[int],
        alt_tokens: list,
        alt_logprobs: list,
        top: TopK | None = None,
        located: bool = False,
        joined: str | None = None,
        logprob_array: np.ndarray | None = None,
        floats: np.ndarray | None = None,
        id_texts: bool | None = None,
    ) -> None:
        self._tokens = tokens
        self._logprobs = logprobs
        self.lengths = lengths
        self.alt_tokens = alt_tokens
        self.alt_logprobs = alt_logprobs
        self.top = top  # set (deferred) when the alternatives were left in the file
        # cut where the bytes say it is: the parsed record must confirm (placed())
        self.located = located
        # ``tokens`` joined with commas when every token is a string and none holds a comma (the
        # text then gives the tokens back exactly, split at its commas); None otherwise. Read by the
        # check hash and by engine_pair's token_id:N test (tokens.token_id_list), so the tokens are
        # joined once.
        self.joined = joined
        # ``logprobs`` as float64 (``np.array``), when every one is a number below 2**53 in size (so
        # the array stands for them: an int converts exactly) and none is positive: what
        # tokens.logprobs gives for them, built once (None: tokens.logprobs builds and checks it).
        self.logprob_array = logprob_array
        # ``logprobs`` as float64 whatever their sign (the C scanner's; None otherwise)
        self.floats = floats
        # tokens.token_id_list(joined), when the C scanner said (None: not known)
        self.id_texts = id_texts

    @property
    def tokens(self) -> list:
        """The sampled tokens (built from ``joined`` on first read when not given)."""
        if self._tokens is None:
            assert self.joined is not None
            self._tokens = self.joined.split(",")
        return self._tokens

    @property
    def logprobs(self) -> list:
        """The sampled logprobs (built from ``floats`` on first read when not given)."""
        if self._logprobs is None:
            assert self.floats is not None
            self._logprobs = self.floats.tolist()
        return self._logprobs

    def __repr__(self) -> str:
        return f"LogprobColumns(tokens={self.tokens!r}, logprobs={self.logprobs!r}, lengths={self.lengths!r})"

    def __eq__(self, other: object) -> bool:
        """Equal columns (what the dataclass this was compared: every field, the arrays by value;
        the lazy lists compare as the lists they stand for)."""
        if not isinstance(other, LogprobColumns):
            return NotImplemented
        fields = ("tokens", "logprobs", "lengths", "alt_tokens", "alt_logprobs", "top", "located", "joined", "id_texts")
        if any(getattr(self, name) != getattr(other, name) for name in fields):
            return False
        return all(_same_array(getattr(self, name), getattr(other, name)) for name in ("logprob_array", "floats"))

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value


def _same_array(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    if a is None or b is None:
        return a is b
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _columns(entries: list[typed_decoders.Entry]) -> LogprobColumns:
    tops = [e.top_logprobs or () for e in entries]
    alts = [a for top in tops for a in top]
    tokens = [e.token for e in entries]
    return LogprobColumns(
        tokens=tokens,
        logprobs=[e.logprob for e in entries],
        lengths=[len(top) for top in tops],
        alt_tokens=[a.token for a in alts],
        alt_logprobs=[a.logprob for a in alts],
        joined=joined_tokens(tokens),
    )


@dataclass(frozen=True, slots=True)
class FileRef:
    """A plain file on disk as it was when its lines were read: alternatives are read back from it."""

    path: str
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, fd: int, path: str) -> FileRef | None:
        """The open regular file ``fd`` at ``path`` (None for anything else)."""
        st = os.fstat(fd)
        return cls(path, st.st_size, st.st_mtime_ns) if stat.S_ISREG(st.st_mode) else None


@dataclass(slots=True)
class DeferredTop:
    """Reads one choice's alternatives from the file when they are first needed; never raises."""

    file: FileRef
    offset: int  # of the ``[`` opening the content array, in the file
    length: int
    rows: int  # entries (sampled positions)
    head: bytes = field(default=b"")
    tail: bytes = field(default=b"")
    check: int = 0  # hash of the entries' sampled tokens and logprobs, checked once the file changed
    _untouched: bool = False

    def __call__(self) -> TopK:
        """The alternatives, read from the file now (empty with ``unavailable`` set if they cannot be)."""
        try:
            span = self._read()
        except OSError as exc:
            return _unavailable(self.rows, f"cannot read {self.file.path} again: {exc.strerror or exc}")
        if span is None:
            return _unavailable(self.rows, f"{self.file.path} changed since it was loaded")
        top = decode_top(span, self.rows, None if self._untouched else self.check)
        if top is None:
            return _unavailable(self.rows, f"{self.file.path} changed since it was loaded")
        return top

    def _read(self) -> bytes | None:
        if _PREAD is None:
            return self._read_stream()
        # One open, fstat, pread and close (the stream below also seeks, sets the descriptor
        # blocking and wraps it in a file object: half the calls, for 5,000 spans a cache write).
        # O_NONBLOCK: opening a FIFO put in the file's place never blocks.
        fd = os.open(self.file.path, _OPEN_FLAGS)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return self._read_stream()  # raises the reader's own error, naming what it is
            if st.st_size < self.file.size:
                return None  # truncated or rewritten (appending keeps every span where it was)
            self._untouched = (st.st_size, st.st_mtime_ns) == (self.file.size, self.file.mtime_ns)
            span = _PREAD(fd, self.length, self.offset)
        finally:
            os.close(fd)
        return span if self._holds(span) else None

    def _read_stream(self) -> bytes | None:
        from rollout_graph.ingest.reading import _open_regular

        with _open_regular(Path(self.file.path)) as stream:  # never blocks on a FIFO put in its place
            st = os.fstat(stream.fileno())
            if st.st_size < self.file.size:
                return None  # truncated or rewritten (appending keeps every span where it was)
            self._untouched = (st.st_size, st.st_mtime_ns) == (self.file.size, self.file.mtime_ns)
            stream.seek(self.offset)
            span = stream.read(self.length)
        return span if self._holds(span) else None

    def _holds(self, span: bytes) -> bool:
        return len(span) == self.length and span[:_PROBE] == self.head and span[-_PROBE:] == self.tail


_PREAD = getattr(os, "pread", None)
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def _unavailable(rows: int, why: str) -> TopK:
    top = TopK(np.full((rows, 0), -1, dtype=np.int32), np.full((rows, 0), np.nan, dtype=np.float32))
    top.unavailable = why
    return top


_EXACT = 2.0**53  # every int smaller in size converts to a float64 exactly


def exact_floats(logprobs: list, numbers: bool = True) -> tuple[np.ndarray | None, bool]:
    """``np.array(logprobs, dtype=np.float64)`` when every value is an int or a float smaller in
    size than 2**53 (the bytes then stand for the values: an int converts exactly, -0.0 and 0.0
    differ), and whether none is positive; (None, False) otherwise (None, inf, a larger int, an
    empty list). ``numbers``: every value is known to be an int, a float or None (the typed
    decoders' types); else their types are looked at (numpy reads a string of digits as its number)."""
    if not logprobs or (not numbers and not set(map(type, logprobs)) <= _NUMBERS):
        return None, False
    try:
        arr = np.array(logprobs, dtype=np.float64)
    except (OverflowError, TypeError, ValueError):  # an int beyond the floats
        return None, False
    high = _MAX(arr)
    if _MIN(arr) > -_EXACT and high < _EXACT:  # a NaN (None) fails both
        return arr, bool(high <= 0)
    return None, False


_NUMBERS = frozenset({int, float})
_MIN, _MAX = np.minimum.reduce, np.maximum.reduce


def _check(
    tokens: list | None,
    logprobs: list | None,
    joined: str | None = None,
    floats: np.ndarray | None = None,
    numbers: bool = True,
) -> int:
    """A hash of the entries' sampled tokens and logprobs. The tokens are hashed as their joined
    text when :func:`joined_tokens` gives one (one string to hash instead of a tuple of them; the
    text stands for exactly those tokens), else as a tuple; the logprobs as the bytes of
    :func:`exact_floats` when it gives an array, else as a tuple. ``joined`` and ``floats``: those,
    when known (``tokens`` may then be None when ``joined`` is given, ``logprobs`` when ``floats``
    is: the C scanner's columns); ``numbers`` as for exact_floats. Either form tells apart at least
    what the tuple hash does (equal numbers hash alike there too: ``hash(1) == hash(1.0) ==
    hash(True)``)."""
    if joined is None:
        assert tokens is not None
        joined = joined_tokens(tokens)
    if floats is None:
        assert logprobs is not None
        floats = exact_floats(logprobs, numbers)[0]
    sampled = tuple(tokens or ()) if joined is None else joined
    try:
        return hash((sampled, tuple(logprobs or ()) if floats is None else floats.tobytes()))
    except TypeError:  # a list or an object read by the generic parser: matches no load's hash
        return -1  # (CPython's hash() is never -1)


_TOKEN, _LOGPROB, _TOPS = attrgetter("token"), attrgetter("logprob"), attrgetter("top_logprobs")


def decode_top(span: bytes, rows: int, check: int | None = None) -> TopK | None:
    """The alternatives of a content array's bytes, exactly as the eager path builds them (typed
    decode, else the generic columns); None when the bytes are not such an array of ``rows``
    (or, with ``check``, not the entries whose sampled tokens and logprobs hashed to it)."""
    from rollout_graph.ingest.tokens import top_k

    t = _typed()
    try:
        entries = t.ENTRIES.decode(span)
    except (t.DecodeError, ValueError):
        entries = None
    if entries is not None:
        if len(entries) != rows:
            return None
        if check is not None:
            tokens = list(map(_TOKEN, entries))
            if _check(tokens, list(map(_LOGPROB, entries)), joined_tokens(tokens)) != check:
                return None
        # The columns by C-level maps (attrgetter, chain) rather than comprehensions; no check asked,
        # no sampled column is built (the alternatives alone are read).
        tops = list(map(_TOPS, entries))
        try:
            lengths = list(map(len, tops))
        except TypeError:  # an entry without alternatives (None): none of them
            tops = [top or () for top in tops]
            lengths = list(map(len, tops))
        alts = list(chain.from_iterable(tops))
        top = top_k(lengths, list(map(_TOKEN, alts)), list(map(_LOGPROB, alts)), numbers=True)
    else:
        from rollout_graph.ingest.formats.engine_pair import top_of_entries
        from rollout_graph.ingest.reading import parse_json

        try:
            content = parse_json(span)
        except (ValueError, UnicodeDecodeError, RecursionError):
            return None
        if not isinstance(content, list) or len(content) != rows:
            return None
        if check is not None:
            from rollout_graph.ingest.formats.engine_pair import _column

            if _check(_column(content, "token"), _column(content, "logprob"), numbers=False) != check:
                return None
        top = top_of_entries(content)
    if top is None:  # every entry's list was empty after all: no alternatives, same rows
        return TopK(np.full((rows, 0), -1, dtype=np.int32), np.full((rows, 0), np.nan, dtype=np.float32))
    return top


def _sampled_only(span: bytes, file: FileRef | None, offset: int | None) -> LogprobColumns | None:
    """The entries' tokens and logprobs, the alternatives left in the file (None: decode eagerly)."""
    if file is None or offset is None or span.find(_ALTERNATIVES) < 0:
        return None
    if _native is not None:
        got = _native.sampled_entries(span)
        if got is not None:
            return _from_native(got, span, file, offset)
    return _sampled_python(span, file, offset)


def _from_native(got: tuple, span: bytes, file: FileRef, offset: int) -> LogprobColumns:
    """The columns of the C scanner's answer (``_speedups.sampled_entries``): the same values
    :func:`_sampled_python` gives, the tokens and logprobs lists built only when read."""
    rows, joined, tokens, data, nonpositive, id_texts = got
    floats = np.frombuffer(data, dtype=np.float64).copy()  # owned and writable, as np.array's
    check = _check(tokens, None, joined, floats)  # what decode_top checks a read-back span by
    return _deferred(
        span,
        file,
        offset,
        rows,
        check,
        tokens=tokens,
        logprobs=None,
        joined=joined,
        logprob_array=floats if nonpositive else None,
        floats=floats,
        id_texts=id_texts,
    )


def _deferred(span: bytes, file: FileRef, offset: int, rows: int, check: int, **sampled) -> LogprobColumns:
    """The sampled columns given, the alternatives left in the file (read back by ``check``)."""
    load = DeferredTop(file, offset, len(span), rows, span[:_PROBE], span[-_PROBE:], check)
    return LogprobColumns(lengths=[], alt_tokens=[], alt_logprobs=[], top=TopK.deferred(rows, load), **sampled)


def _sampled_python(span: bytes, file: FileRef, offset: int) -> LogprobColumns | None:
    """:func:`_sampled_only` by msgspec (the reference the C scanner is held to)."""
    if not span.isascii():
        try:
            span.decode("utf-8")  # the check orjson would make of the skipped strings
        except UnicodeDecodeError:
            return None
    t = _typed()
    try:
        entries = t.SAMPLED.decode(span)
    except (t.DecodeError, ValueError):
        return None
    rows = len(entries)
    tokens, logprobs = [e.token for e in entries], [e.logprob for e in entries]
    joined, (floats, nonpositive) = joined_tokens(tokens), exact_floats(logprobs)
    check = _check(tokens, logprobs, joined, floats)
    return _deferred(
        span,
        file,
        offset,
        rows,
        check,
        tokens=tokens,
        logprobs=logprobs,
        joined=joined,
        logprob_array=floats if nonpositive else None,
    )


def _marker(i: int) -> str:
    return f"\x00lp-{_NONCE}:{i}"


def _address(buffer) -> int:
    return int(np.frombuffer(buffer, dtype=np.uint8).__array_interface__["data"][0])


def _spans(raw: bytes) -> list[tuple[int, int]]:
    """Byte spans of each choice's ``logprobs.content`` array in an engine-pair line."""
    t = _typed()
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


def columns_for(span: bytes, file: FileRef | None, offset: int | None, located: bool) -> LogprobColumns | None:
    """A content array's columns (the alternatives left in the file when it is given); None when
    the typed decoder does not accept the bytes."""
    columns = _sampled_only(span, file, offset)
    if columns is None:
        t = _typed()
        try:
            columns = _columns(t.ENTRIES.decode(span))
        except (t.DecodeError, ValueError):
            return None
    columns.located = located
    return columns


_FLAT_KEYS = ("prompt_token_ids", "completion_token_ids", "per_token_logps", "completion_tokens")


def placed(value: object, arrays: dict) -> bool:
    """Whether every located cut in ``arrays`` came back as a choice's ``logprobs.content`` of an
    engine pair (what the skim checks before it cuts); False: the line must be cut again, skimmed."""
    located = {id(c) for c in arrays.values() if isinstance(c, LogprobColumns) and c.located}
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


_TOP_KEY = b'"top_logprobs"'


def _find_outside(raw: bytes, key: bytes, skip: tuple[int, int] | None) -> int:
    """``raw.find(key)``, ``raw[skip[0]:skip[1]]`` known to hold no ``key`` (not searched)."""
    if skip is None:
        return raw.find(key)
    a, b = skip
    at = raw.find(key, 0, a + len(key) - 1)
    return at if at >= 0 else raw.find(key, max(0, b - len(key) + 1))


def cut_logprobs(
    raw: bytes,
    file: FileRef | None = None,
    where: Callable[[int], int] | None = None,
    skip: tuple[int, int] | None = None,
) -> tuple[bytes, dict[str, LogprobColumns]]:
    """The line with each typed-decodable logprob content array (found by the skim) replaced by
    a marker string.

    With ``file`` and ``where`` (a position in ``raw`` -> its offset in that file) the
    alternatives are left in the file (see the module docstring). ``skip``: a span of ``raw`` known
    to hold no ``"top_logprobs"`` (a repeated ``messages`` array), not searched for it.
    """
    if b'"content"' not in raw or _find_outside(raw, _TOP_KEY, skip) < 0:
        return raw, {}
    found: dict[str, LogprobColumns] = {}
    pieces: list[bytes] = []
    pos = 0
    for start, end in _spans(raw):
        columns = columns_for(raw[start:end], file, None if where is None else where(start), located=False)
        if columns is None:
            continue
        marker = _marker(len(found))
        found[marker] = columns
        pieces += [raw[pos:start], b'"\\u0000', marker[1:].encode(), b'"']
        pos = end
    if not found:
        return raw, found
    pieces.append(raw[pos:])
    return b"".join(pieces), found
