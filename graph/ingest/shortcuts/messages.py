"""A request's ``messages`` array in a raw line: the values of a recently seen prefix reused, only
the new elements parsed, or the array left in the file.

Entry points: :class:`MessageCutter` (one per file read in order: :meth:`MessageCutter.cut` finds
the array in the original line, proves its end by parsing its new elements on their own, and
returns its span and values; :meth:`MessageCutter.known` a remembered span the other shortcuts'
searches skip, asked through :class:`KnownSpan`), :func:`leave_messages_in_file` and
:class:`MessagesSpan` (a call's messages left in a plain file, read back when asked). A
middle-layer shortcut: ``values/line.py`` cuts the span with the others' and parses the shortened
line; if that fails the whole line takes the validating path. Exact or not taken:
docs/performance.md, "Messages read once" (why each step is exact) and "Request messages left in
the file".
"""

from __future__ import annotations

import os
import re
import threading
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from rollout_graph.core.messages import note_left_in_file
from rollout_graph.core.records import MessagesInFile
from rollout_graph.ingest.files.search import find_by_rare_byte, find_outside
from rollout_graph.ingest.files.sources import FileRef, open_regular
from rollout_graph.ingest.shortcuts.id_arrays import ID_KEY, NEAR
from rollout_graph.ingest.shortcuts.logprob_spans import TOP_KEY

_KEY = b'"messages"'
_OPENING = re.compile(rb"[ \t\r\n]*:[ \t\r\n]*\[")
# Everything up to the next bracket outside a string, strings skipped whole (possessive: a string
# that never closes fails in linear time, the match then stops at its opening quote).
_SKIP = re.compile(rb'[^"\[\]{}]*+(?:"[^"\\]*+(?:\\.[^"\\]*+)*+"[^"\[\]{}]*+)*+', re.DOTALL)
_NUL = b"\\u0000"
_TRIES = 8  # "]" bytes tried by a memchr before the tail is searched for the usual way
_RECENT = 8  # arrays remembered: a conversation, its title call, its subagents
_MIN_BYTES = 2048  # smaller arrays stay in the line: nothing to save
_MAX_BYTES = 8 << 20  # larger arrays (or new elements) too: their copy would double a huge line's cost
_KEPT_BYTES = 32 << 20  # the remembered arrays' bytes, at most
_DEPTH_ROOM = 960  # nesting allowed around and in a cut array (orjson refuses beyond 1024)
_COMMA, _CLOSE = 0x2C, 0x5D
_TAIL_BYTES = 16  # bytes after a cut array's "]" looked for in the next line, to find its end by a memchr
# Whether the shortcut pays is decided on a file's first lines: it must reuse several times the
# bytes it parses itself (a flat trace entry reuses ~10x; short conversations arriving shuffled,
# each call before the one it continues, ~1x: there the scan costs more than it saves).
_PROBE_LINES = 128
_PAYS = 4
# What the other shortcuts search a line for: a remembered body holding none of them is skipped
# by their searches when a line repeats it (known()).
OTHER_KEYS = (ID_KEY, TOP_KEY)
Cuts = list[tuple]  # the other shortcuts' spans of a line, in order: (start, end, ...)
_NO_CUTS: Cuts = []


_LEAVE: ContextVar[bool] = ContextVar("rollout_graph_leave_messages", default=False)


@contextmanager
def leave_messages_in_file() -> Iterator[None]:
    """Within this block, files read in order leave request messages the shortcut does not share
    in the file (a one-shot command that writes no cache: ``--no-cache``)."""
    token = _LEAVE.set(True)
    try:
        yield
    finally:
        _LEAVE.reset(token)


class MessagesSpan(MessagesInFile):
    """A request's ``messages`` array in a plain file: where it is, how many messages, its CRC-32."""

    __slots__ = ("file", "offset", "length", "count", "check")

    def __init__(self, file: FileRef, offset: int, length: int, count: int, check: int) -> None:
        super().__init__()
        self.file, self.offset, self.length, self.count, self.check = file, offset, length, count, check

    @property
    def size(self) -> int:
        """Bytes of the array's JSON."""
        return self.length

    def read(self) -> list[dict[str, Any]] | None:
        """The messages parsed from the span again, or None when the file no longer holds it."""
        try:
            value = _read_again(self.file, self.offset, self.length, self.check)
        except OSError as exc:
            self.unavailable = f"cannot read {self.file.path} again: {exc.strerror or exc}"
            return None
        if value is None or len(value) != self.count or not all(type(m) is dict for m in value):
            self.unavailable = (
                f"{self.file.path} changed since it was loaded: its request messages cannot be read again"
            )
            return None
        self.unavailable = None
        return value

    def __repr__(self) -> str:
        return f"MessagesSpan({self.count} messages, {self.length} bytes at {self.offset} of {self.file.path!r})"

    def __reduce__(self) -> Any:  # the values travel (another process, a copy), not the span
        return (_resolved, (self.messages(),))


_OPEN_FILES = 8  # files kept open for reading messages again (least recently used closed first)
_open_files: dict[FileRef, Any] = {}
_open_lock = threading.Lock()


_buffer = bytearray(1 << 16)  # the span read again (grown as needed): no new bytes object each time
_BUFFER_MOST = 1 << 20  # a longer span is read into a buffer of its own


def _read_again(file: FileRef, offset: int, length: int, check: int) -> list[Any] | None:
    """The values of ``length`` bytes of ``file`` at ``offset`` when they are the bytes loaded
    (the file's size and modification time unchanged, else their CRC-32 is ``check``), else None.
    The file is kept open (one call's messages are read several times over): one replaced after
    its first read again is still the one opened then."""
    global _buffer
    with _open_lock:
        stream = _open_files.get(file)
        if stream is None:
            stream = open_regular(Path(file.path))  # never blocks on a FIFO put in its place
            while len(_open_files) >= _OPEN_FILES:
                _open_files.pop(next(iter(_open_files))).close()
            _open_files[file] = stream
        elif next(reversed(_open_files)) is not file:  # most recently used last
            _open_files[file] = _open_files.pop(file)
        fd = stream.fileno()
        st = os.fstat(fd)
        if len(_buffer) < length <= _BUFFER_MOST:
            _buffer = bytearray(length)
        view = memoryview(_buffer if length <= len(_buffer) else bytearray(length))[:length]
        try:
            if os.preadv(fd, [view], offset) != length:
                return None
            if (st.st_size, st.st_mtime_ns) != (file.size, file.mtime_ns) and zlib.crc32(view) != check:
                return None
            return _values(view)
        finally:
            view.release()


def _resolved(value: Any) -> Any:
    return value


def _clean(body: bytes, start: int = 0) -> bool:
    """Whether no key of OTHER_KEYS starts in ``body`` at ``start`` or after (or straddles it)."""
    return all(body.find(key, max(0, start - len(key) + 1)) < 0 for key in OTHER_KEYS)


@dataclass(slots=True, eq=False)
class _Seen:
    body: bytes  # the array's bytes between its brackets
    items: list[Any]  # their values
    opens: int  # ``[`` and ``{`` bytes in the body: a bound on its nesting
    extended: bool = False  # a longer remembered array starts with this one
    clean: bool = False  # the body holds none of OTHER_KEYS (the other cutters need not search it)


def _opens(data: bytes, start: int = 0, end: int | None = None) -> int:
    end = len(data) if end is None else end
    return data.count(b"[", start, end) + data.count(b"{", start, end)


_NESTED = (dict, list)
_NESTED_TYPES = frozenset(_NESTED)


def _shallow(items: list[Any]) -> bool:
    """Whether the array nests two deep at most (objects of strings, numbers and literals):
    then its depth is known without counting its brackets."""
    for item in items:
        kind = type(item)
        if kind is dict:
            if not _NESTED_TYPES.isdisjoint(map(type, item.values())):  # the values' types looped in C
                return False
        elif kind is list:
            return False
    return True


def _escaped(raw: bytes, at: int) -> bool:
    """Whether the byte at ``at`` follows an odd run of backslashes."""
    run = 0
    while at - run - 1 >= 0 and raw[at - run - 1] == 0x5C:
        run += 1
    return run % 2 == 1


def array_end(raw: bytes, pos: int, most: int | None = None) -> int | None:
    """The position of the ``]`` closing the array whose elements start at ``pos`` (strings
    skipped), or None: a string or the array never closes, or a bracket does not match in kind
    is left to the parser's verdict (the caller always parses what this finds). With ``most``,
    None as well when the array runs on past that many bytes."""
    depth = 0
    size = len(raw) if most is None else min(len(raw), pos + most + 1)
    while True:
        match = _SKIP.match(raw, pos)
        pos = match.end() if match else pos
        if pos >= size:
            return None
        byte = raw[pos]
        if byte == 0x22:  # a string that never closes
            return None
        if byte in (0x5B, 0x7B):
            depth += 1
        elif depth == 0:
            return pos if byte == _CLOSE else None
        else:
            depth -= 1
        pos += 1


def _find_tail(raw: bytes, tail: bytes, pos: int) -> int:
    """``raw.find(tail, pos)`` for a tail that starts with ``]``: a memchr for each ``]`` (rare
    in message text) and a comparison there, the usual search after :data:`_TRIES` of them."""
    if tail[:1] != b"]":
        return raw.find(tail, pos)
    return find_by_rare_byte(raw, tail, pos, len(raw), 0, _TRIES)


def _holds_nul(raw: bytes, start: int, end: int) -> bool:
    """Whether ``raw[start:end]`` holds ``\\u0000``: a memchr for the first backslash (none in
    most message text), the search from there only when there is one."""
    backslash = raw.find(b"\\", start, end)
    return backslash >= 0 and raw.find(_NUL, backslash, end) >= 0


def _values(data: bytes | memoryview) -> list[Any] | None:
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, list) else None


def _crossed(cuts: Cuts, start: int, end: int) -> bool:
    """Whether one of ``cuts`` (sorted, not overlapping) reaches into ``[start, end)``."""
    for cut in cuts:
        if cut[0] >= end:
            return False
        if cut[1] > start:
            return True
    return False


def _next_cut(cuts: Cuts, at: int, default: int) -> int:
    """Where the first of ``cuts`` starting at or after ``at`` starts (``default`` when none does)."""
    for cut in cuts:
        if cut[0] >= at:
            return cut[0]
    return default


class MessageCutter:
    """Finds a line's ``messages`` array, reusing the values of a recently seen prefix of it."""

    def __init__(self) -> None:
        self._recent: list[_Seen] = []
        self._tail = b""  # the bytes after the last cut array's "]"
        self._pending: tuple[_Seen | None, _Seen | None, bytes] | None = None
        self._tried = self._reused = self._parsed = 0
        self.off = False  # the shortcut did not pay on the first lines: not tried again
        self._leave = _LEAVE.get()
        self._cuts: Cuts = _NO_CUTS  # the other shortcuts' spans of the line being cut

    def _array_opening(self, raw: bytes) -> tuple[int, int] | None:
        """Where the line's first ``"messages"`` key outside the other shortcuts' spans starts and
        its array's first byte after ``[`` (None: no such key, an escaped one, or not an array)."""
        key = find_outside(raw, _KEY, 0, len(raw), self._cuts)
        if key < 0 or _escaped(raw, key):
            return None
        opening = _OPENING.match(raw, key + len(_KEY))
        return None if opening is None else (key, opening.end())

    def _opens_before(self, raw: bytes, key: int) -> int:
        """The ``[`` and ``{`` bytes before ``key`` outside the other shortcuts' spans (each of
        which the parsed line holds as a string): a bound on the nesting around the array."""
        count = pos = 0
        for cut in self._cuts:
            if cut[0] >= key:
                break
            count += _opens(raw, pos, cut[0])
            pos = cut[1]
        return count + _opens(raw, pos, key)

    def _left(self, raw: bytes, start: int, end: int, items: list[Any], file: FileRef | None, at: int | None) -> None:
        """Note where the array ``raw[start - 1 : end + 1]`` is in the file the line was read from
        (``at``: the line's offset in it), when the cutter leaves messages in files."""
        if not self._leave or file is None or at is None:
            return
        span = memoryview(raw)[start - 1 : end + 1]
        note_left_in_file(items, MessagesSpan(file, at + start - 1, len(span), len(items), zlib.crc32(span)))

    def _cut_only(self, raw: bytes, file: FileRef | None, at: int | None) -> tuple[int, int, list[Any]] | None:
        """The array found without reuse, to leave it in the file (the shortcut is off)."""
        opened = self._array_opening(raw)
        if opened is None:
            return None
        key, start = opened
        found = self._rest(raw, start)
        if found is None:
            return None
        end, items = found
        if end - start < _MIN_BYTES:
            return None
        nesting = 2 if _shallow(items) else _opens(raw, start, end)  # the elements' depth, or a bound on it
        if nesting + self._opens_before(raw, key) >= _DEPTH_ROOM:
            return None
        self._tail = raw[end : end + _TAIL_BYTES]
        self._left(raw, start, end, items, file, at)
        return start - 1, end + 1, items

    def _longest(self, raw: bytes, start: int) -> _Seen | None:
        """The longest remembered array whose bytes start this one and end at an element (the
        first match, longest first: the shorter states of one conversation are never compared)."""
        for seen in sorted(self._recent, key=lambda s: len(s.body), reverse=True):
            after = start + len(seen.body)
            if (
                after < len(raw)
                and raw[after] in (_COMMA, _CLOSE)
                # the last bytes first: the states of one conversation share their start, not their end
                and raw.endswith(seen.body[-_TAIL_BYTES:], start, after)
                and raw.startswith(seen.body, start)
            ):
                return seen
        return None

    def cut(
        self, raw: bytes, cuts: Cuts | None = None, file: FileRef | None = None, at: int | None = None
    ) -> tuple[int, int, list[Any]] | None:
        """``(start, end, values)`` of the line's ``messages`` array (``raw[start:end]``, brackets
        included) and its values, or None (no array, a small one, one holding or crossing another
        shortcut's span, or anything this path does not prove equal: the validating path then
        reads it). ``cuts``: the other shortcuts' spans of ``raw``, in order; ``file`` and ``at``:
        the plain file the line was read from and where it starts there (an array parsed whole is
        then noted as left in the file, when the load leaves messages there).

        The array is remembered for the next lines only once the caller calls :meth:`keep` (the
        shortened line parsed); otherwise its values are dropped with the caller's reference.
        """
        self._pending = None
        self._cuts = cuts or _NO_CUTS  # the line's, until the next line's
        if self.off:
            return None if not (self._leave and file is not None and at is not None) else self._cut_only(raw, file, at)
        self._tried += 1
        if self._tried == _PROBE_LINES and self._reused < _PAYS * self._parsed:
            self.off = True
            self._recent.clear()
        opened = self._array_opening(raw)
        if opened is None:
            return None
        key, start = opened  # the array's first byte after "["
        seen = self._longest(raw, start)
        if seen is not None and raw[start + len(seen.body)] == _CLOSE:
            end, items, opens = start + len(seen.body), list(seen.items), seen.opens  # the same array
        else:
            first = start if seen is None else start + len(seen.body) + 1  # after the prefix and its comma
            found = self._rest(raw, first)
            if found is None:
                return None
            end, new = found
            if seen is None:
                if end - start < _MIN_BYTES:
                    return None
                items, opens = new, _opens(raw, start, end)
            elif not new:  # "[prefix,]": a trailing comma, invalid JSON
                return None
            else:
                items, opens = seen.items + new, seen.opens + _opens(raw, first, end)
        if self._cuts and _crossed(self._cuts, start - 1, end + 1):
            return None  # another shortcut's span inside (never so for a remembered prefix: checked when cut)
        if opens + self._opens_before(raw, key) >= _DEPTH_ROOM:
            return None
        reused = 0 if seen is None else len(seen.body)
        self._reused += reused
        self._parsed += end - start - reused
        grown = seen is None or end > start + len(seen.body)
        longer = None
        if grown:
            body = raw[start:end]
            clean = _clean(body) if seen is None else seen.clean and _clean(body, len(seen.body))
            longer = _Seen(body, items, opens, clean=clean)
        self._pending = (seen, longer, raw[end : end + _TAIL_BYTES])
        if seen is None:  # parsed whole: left in the file (one the shortcut reuses stays shared)
            self._left(raw, start, end, items, file, at)
        return start - 1, end + 1, items

    def known(self, raw: bytes, pos: int = 0, end: int | None = None) -> tuple[int, int] | None:
        """A span of ``raw`` holding the bytes of a remembered array that contains no key of
        :data:`OTHER_KEYS` (the start of this line's first ``messages`` array whose key starts in
        ``raw[pos:end]``, repeated): the other shortcuts' searches may skip it. None when there is none."""
        if self.off or not self._recent:
            return None
        key = raw.find(_KEY, pos, len(raw) if end is None else end + len(_KEY))
        if key < 0:
            return None
        opening = _OPENING.match(raw, key + len(_KEY))
        if opening is None:
            return None
        start = opening.end()
        seen = self._longest(raw, start)
        if seen is None or not seen.clean:
            return None
        return start, start + len(seen.body)

    def keep(self) -> None:
        """Remember the array the last :meth:`cut` took (its line parsed)."""
        if self._pending is None:
            return
        seen, grown, self._tail = self._pending
        self._pending = None
        if seen is not None:
            self._recent.remove(seen)
            self._recent.append(seen)  # most recently used last
            if grown is not None:
                seen.extended = True
        if grown is not None:
            self._remember(grown)

    def _excluded(self, raw: bytes, first: int, end: int) -> bool:
        """Whether ``raw[first:end]`` holds ``\\u0000`` or reaches into another shortcut's span:
        such an array stays in the line."""
        return _holds_nul(raw, first, end) or (bool(self._cuts) and _crossed(self._cuts, first - 1, end + 1))

    def _rest(self, raw: bytes, first: int) -> tuple[int, list[Any]] | None:
        """Where the array whose elements start at ``first`` ends, and those elements' values.

        The bytes that followed the last cut array (``],"temperature":...``) are looked for first,
        at their last place before the next other shortcut's span, then at their first (a memchr),
        else the end is scanned for; either way the elements before it must parse on their own, which proves it is the
        array's end (docs/performance.md, "Messages read once"; tests/ingest/test_message_prefix_glue.py
        compares the places on odd lines)."""
        if self._tail:
            # the array holds no other shortcut's span: it ends before the first one after it
            bound = _next_cut(self._cuts, first, len(raw)) + len(self._tail) - 1 if self._cuts else len(raw)
            late = raw.rfind(self._tail, first, bound)
            if late >= 0 and late - first <= _MAX_BYTES and not self._excluded(raw, first, late):
                values = _values(
                    memoryview(raw)[first - 1 : late + 1] if raw[first - 1] == 0x5B else b"[" + raw[first:late] + b"]"
                )
                if values is not None:
                    return late, values
        guess = _find_tail(raw, self._tail, first) if self._tail else -1
        for end in (guess, None):
            if end is None:
                end = array_end(raw, first, _MAX_BYTES)
                if end is None or end == guess:
                    return None
            elif end < 0:
                continue
            if end - first > _MAX_BYTES or self._excluded(raw, first, end):
                return None  # a huge array; another shortcut's span or a NUL escape
            # the elements with their brackets: the line's own bytes when "[" precedes them
            values = _values(
                memoryview(raw)[first - 1 : end + 1] if raw[first - 1] == 0x5B else b"[" + raw[first:end] + b"]"
            )
            if values is not None:
                return end, values
        return None

    def _remember(self, seen: _Seen) -> None:
        """Keep ``seen``; when full, forget the least recently used array a longer one extends
        (a conversation's older state: kept a while for forks and retries), else the least
        recently used (another conversation, a subagent, left long ago)."""
        self._recent.append(seen)
        while len(self._recent) > _RECENT or (
            len(self._recent) > 1 and sum(len(s.body) for s in self._recent) > _KEPT_BYTES
        ):
            old = next((s for s in self._recent if s.extended), self._recent[0])
            self._recent.remove(old)


class KnownSpan:
    """The span of a line :meth:`MessageCutter.known` gives (a repeated messages body holding no
    key the other shortcuts look for), asked for once, from where a search first needs it."""

    __slots__ = ("known", "span")

    def __init__(self, known: Callable[[bytes, int, int | None], tuple[int, int] | None] | None) -> None:
        self.known = known
        self.span: tuple[int, int] | None = None

    def ask(self, raw: bytes, pos: int, end: int | None = None) -> tuple[int, int] | None:
        """The span, asked for from ``pos`` (with ``end``: asked again later unless found before it)."""
        if self.known is not None:
            span = self.known(raw, pos, end)
            if span is not None or end is None:
                self.span, self.known = span, None
        return self.span

    def near_start(self, raw: bytes) -> tuple[int, int] | None:
        """The span, asked for near the line's start (the content array's search asks it so)."""
        return self.ask(raw, 0, NEAR)
