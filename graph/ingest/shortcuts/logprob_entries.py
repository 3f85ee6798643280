"""A chat logprob content array's bytes -> columns, and its alternatives read back from the file.

Entry points: :func:`columns_for` (a span's entries as :class:`LogprobColumns`: the C scanner or
msgspec's typed decoders, the alternatives left in the file as a :class:`DeferredTop` when the
line came from a plain file), :func:`decode_top` (a span's alternatives, typed or by the generic
reference :func:`top_of_entries`, the same arrays either way) and :func:`exact_floats`. A
middle-layer shortcut: ``logprob_spans.py`` finds the spans, ``values/line.py`` cuts them, the
engine-pair reader (formats/engine_pair.py) reads the columns. Any entry the typed decoders do
not accept exactly leaves the whole array to the validating path. docs/performance.md, "Cold
inspect: prompt ids and content arrays" and "Top-k alternatives stay in the file until read".
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from rollout_graph.core.records import TopK
from rollout_graph.ingest.files.json_values import parse_json
from rollout_graph.ingest.files.sources import FileRef, open_regular
from rollout_graph.ingest.speedups import native as _native
from rollout_graph.ingest.tokens import joined_tokens, top_k

if TYPE_CHECKING:
    from rollout_graph.ingest.shortcuts import logprob_structs


_decoders: list = []  # the module rollout_graph.ingest.shortcuts.logprob_structs, once imported


def typed():  # -> the module rollout_graph.ingest.shortcuts.logprob_structs
    """The msgspec decoders (msgspec, a third-party import, loaded on first use: a flat trace never
    needs it; docs/performance.md, "Start-up and the print of the cold command")."""
    if not _decoders:
        from rollout_graph.ingest.shortcuts import logprob_structs

        _decoders.append(logprob_structs)
    return _decoders[0]


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


def _columns(entries: list[logprob_structs.Entry]) -> LogprobColumns:
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
        with open_regular(Path(self.file.path)) as stream:  # never blocks on a FIFO put in its place
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
    t = typed()
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
        try:
            content = parse_json(span)
        except (ValueError, UnicodeDecodeError, RecursionError):
            return None
        if not isinstance(content, list) or len(content) != rows:
            return None
        if check is not None:
            if _check(column(content, "token"), column(content, "logprob"), numbers=False) != check:
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
    t = typed()
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


def column(rows: list, key: str) -> list:
    """``[row.get(key) for row in rows]``, at C speed when every row is a dict holding the key."""
    try:
        return list(map(itemgetter(key), rows))
    except (KeyError, TypeError, IndexError):
        return [row.get(key) if isinstance(row, dict) else None for row in rows]


def _flatten(rows: list) -> tuple[list[int], list]:
    lists = [r if type(r) is list else () for r in rows]
    return [len(r) for r in lists], list(chain.from_iterable(lists))


def top_of_entries(content: list) -> TopK | None:
    """The alternatives of chat logprob entries parsed as generic JSON (``top_logprobs`` lists):
    the reference the typed decode is held to, and its fallback."""
    lengths, alternatives = _flatten(column(content, "top_logprobs"))
    return top_k(lengths, column(alternatives, "token"), column(alternatives, "logprob"))


def columns_for(span: bytes, file: FileRef | None, offset: int | None, located: bool) -> LogprobColumns | None:
    """A content array's columns (the alternatives left in the file when it is given); None when
    the typed decoder does not accept the bytes."""
    columns = _sampled_only(span, file, offset)
    if columns is None:
        t = typed()
        try:
            columns = _columns(t.ENTRIES.decode(span))
        except (t.DecodeError, ValueError):
            return None
    columns.located = located
    return columns
