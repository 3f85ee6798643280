"""Fast path for a request's ``messages`` array in a raw JSON line: the messages already built
are reused, only the new ones parsed.

Every call of a conversation sends the conversation so far, so call N's ``messages`` array is
call N-1's with a few elements added: in a flat trace entry they are 40% of the line's bytes (the
token ids, cut by :mod:`rollout_graph.ingest.id_arrays`, are the rest). When the bytes of a
recently seen array are a prefix of this line's array ending at an element boundary, its elements
are those values again: the objects built then are reused, only the elements after it are parsed,
and the array is replaced in the line by a marker string that
:func:`rollout_graph.ingest.id_arrays.restore` swaps for the list of values. The line left to the
JSON parser, the duplicate-key check and the message-text sharing of the loader then handle a few
kilobytes instead of the whole conversation.

Exactly what the validating path gives, or not taken (docs/performance.md, "Messages read
once"):

- The key is the first ``"messages"`` whose opening quote is not escaped, followed by ``:`` and
  ``[``. In valid JSON such a quote opens a string, so this is an object key and the array its value.
- The array's end is found where the bytes that followed the last cut array (the same request
  keys follow it line after line) last occur in the line, else where they first occur (a memchr),
  else by a scan that skips strings; either way the bytes up to it must parse (orjson) as
  a sequence of values on their own. From the state after ``[`` (or after a reused prefix and its
  comma) JSON lexing is deterministic, so they lex the same inside the line: the end is the real end.
  A reused prefix is the same bytes in the same state, so the same values. A trailing comma or an
  element that does not parse on its own leaves the array in the line.
- Replacing one value by another (a string) keeps a line valid or invalid: the caller parses the
  shortened line and, if that fails, parses the whole line the validating way (NaN, lone
  surrogates, nesting limits get their own message from that path).
- An array holding ``\\u0000`` (the escape of the cutters' markers) stays in the line; nesting is
  bounded (the brackets before the key and in the array, counted) far below orjson's limit, so
  cutting never lets through a line too deep for the validating path.

The reused element objects are shared between the calls of a load (as message texts already
are): the library never mutates a message after loading. Where it does not pay (a file whose
first 128 arrays reuse less than 4x the bytes parsed here) the shortcut stops trying; an array
over 8 MB is left to the validating path, and at most 32 MB of arrays are remembered.

**Left in the file** (:func:`leave_messages_in_file`, docs/performance.md, "Request messages left
in the file"). Where the shortcut is off and the line comes from a plain file on disk, the array
is still cut the same way (its end proven by parsing its elements on their own, the rest of the
line parsed without it), and its place in the file is noted (:class:`MessagesSpan`). When the
loader then finds that very list (the same element objects, none dropped) as a call's request
messages, the call holds the span instead of the values
(:func:`rollout_graph.core.messages.share_repeats`), and ``Call.request_messages`` reads the
bytes again when asked: the same bytes parse to the same values. The span is checked on reading
(the file's size and modification time, else a CRC-32 of the bytes taken at load); a file that
no longer holds them gives None and says why (:attr:`MessagesSpan.unavailable`).
"""

from __future__ import annotations

import os
import re
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from rollout_graph.core.messages import note_left_in_file
from rollout_graph.core.records import MessagesInFile
from rollout_graph.ingest.rare_byte import find_by_rare_byte

if TYPE_CHECKING:
    from rollout_graph.ingest.typed import FileRef

_KEY = b'"messages"'
_OPENING = re.compile(rb"[ \t\r\n]*:[ \t\r\n]*\[")
# Everything up to the next bracket outside a string, strings skipped whole (possessive: a string
# that never closes fails in linear time, the match then stops at its opening quote).
_SKIP = re.compile(rb'[^"\[\]{}]*+(?:"[^"\\]*+(?:\\.[^"\\]*+)*+"[^"\[\]{}]*+)*+', re.DOTALL)
_NONCE = os.urandom(4).hex()
MARKER = f"\x00msg-{_NONCE}"
_MARKER_JSON = b'"\\u0000msg-' + _NONCE.encode() + b'"'
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
# What the other cutters search a line for (graph/ingest/id_arrays.py, typed.py): a remembered
# body holding none of them is skipped by their searches when a line repeats it (known()).
OTHER_KEYS = (b'_ids"', b'"top_logprobs"')


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
            from rollout_graph.ingest.reading import _open_regular

            stream = _open_regular(Path(file.path))  # never blocks on a FIFO put in its place
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


def _array_opening(raw: bytes) -> tuple[int, int] | None:
    """Where the line's first ``"messages"`` key starts and its array's first byte after ``[``
    (None: no such key, an escaped one, or not an array)."""
    key = raw.find(_KEY)
    if key < 0 or _escaped(raw, key):
        return None
    opening = _OPENING.match(raw, key + len(_KEY))
    return None if opening is None else (key, opening.end())


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


class MessageCutter:
    """Cuts a line's ``messages`` array out, reusing the values of a recently seen prefix of it."""

    def __init__(self) -> None:
        self._recent: list[_Seen] = []
        self._tail = b""  # the bytes after the last cut array's "]"
        self._pending: tuple[_Seen | None, _Seen | None, bytes] | None = None
        self._tried = self._reused = self._parsed = 0
        self.off = False  # the shortcut did not pay on the first lines: not tried again
        self._leave = _LEAVE.get()
        self._line: tuple[FileRef, bytes, int] | None = None

    def at(self, file: FileRef | None, raw: bytes, offset: int | None) -> None:
        """The next :meth:`cut` is of this line, read from ``file`` at ``offset`` (after other
        cutters may have shortened it): an array left in the file is noted there."""
        self._line = (file, raw, offset) if self._leave and file is not None and offset is not None else None

    def _left(self, raw: bytes, start: int, end: int, items: list[Any]) -> None:
        """Note where the array ``raw[start - 1 : end + 1]`` is in the file (when it is at the
        same place in the line as read: nothing before it was cut).

        The other cutters make ``raw`` from the line read by replacing values with markers, each
        a JSON string ``"\\u0000..."`` holding no bracket. The array's bytes were checked to
        hold no ``\\u0000`` (:meth:`_rest`), and it opens with ``[`` and closes with ``]``, which
        no marker holds: no marker is in it or straddles it. So when no ``\\u0000`` is before
        it either, nothing before it was cut, and its bytes are the line's at the same place
        without comparing them (a memchr of the line's head instead of a compare of the array's
        ~16 KB; tests/ingest/test_message_prefix_glue.py compares both verdicts)."""
        line, self._line = self._line, None
        if line is None:
            return
        file, whole, offset = line
        span = memoryview(raw)[start - 1 : end + 1]
        if whole is not raw and _holds_nul(raw, 0, start - 1) and not whole.startswith(span, start - 1):
            return
        note_left_in_file(items, MessagesSpan(file, offset + start - 1, len(span), len(items), zlib.crc32(span)))

    def _cut_only(self, raw: bytes) -> tuple[bytes, list[Any] | None]:
        """The array cut without reuse, to leave it in the file (the shortcut is off)."""
        opened = _array_opening(raw)
        if opened is None:
            return raw, None
        key, start = opened
        found = self._rest(raw, start)
        if found is None:
            return raw, None
        end, items = found
        if end - start < _MIN_BYTES:
            return raw, None
        nesting = 2 if _shallow(items) else _opens(raw, start, end)  # the elements' depth, or a bound on it
        if nesting + _opens(raw, 0, key) >= _DEPTH_ROOM:
            return raw, None
        self._tail = raw[end : end + _TAIL_BYTES]
        self._left(raw, start, end, items)
        return raw[: start - 1] + _MARKER_JSON + raw[end + 1 :], items

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

    def cut(self, raw: bytes) -> tuple[bytes, list[Any] | None]:
        """The line with its ``messages`` array replaced by :data:`MARKER` (as a JSON string) and
        the array's values, or the line unchanged and None (no array, a small one, or anything
        this path does not prove equal: the validating path then reads it).

        The array is remembered for the next lines only once the caller calls :meth:`keep` (the
        shortened line parsed); otherwise its values are dropped with the caller's reference.
        """
        self._pending = None
        if self.off:
            return (raw, None) if self._line is None else self._cut_only(raw)
        self._tried += 1
        if self._tried == _PROBE_LINES and self._reused < _PAYS * self._parsed:
            self.off = True
            self._recent.clear()
        opened = _array_opening(raw)
        if opened is None:
            return raw, None
        key, start = opened  # the array's first byte after "["
        seen = self._longest(raw, start)
        if seen is not None and raw[start + len(seen.body)] == _CLOSE:
            end, items, opens = start + len(seen.body), list(seen.items), seen.opens  # the same array
        else:
            first = start if seen is None else start + len(seen.body) + 1  # after the prefix and its comma
            found = self._rest(raw, first)
            if found is None:
                return raw, None
            end, new = found
            if seen is None:
                if end - start < _MIN_BYTES:
                    return raw, None
                items, opens = new, _opens(raw, start, end)
            elif not new:  # "[prefix,]": a trailing comma, invalid JSON
                return raw, None
            else:
                items, opens = seen.items + new, seen.opens + _opens(raw, first, end)
        if opens + _opens(raw, 0, key) >= _DEPTH_ROOM:
            return raw, None
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
            self._left(raw, start, end, items)
        self._line = None
        return raw[: start - 1] + _MARKER_JSON + raw[end + 1 :], items

    def known(self, raw: bytes, pos: int = 0, end: int | None = None) -> tuple[int, int] | None:
        """A span of ``raw`` holding the bytes of a remembered array that contains no key of
        :data:`OTHER_KEYS` (the start of this line's first ``messages`` array whose key starts in
        ``raw[pos:end]``, repeated): the other cutters' searches for those keys may skip it. None when there is none."""
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

    def _rest(self, raw: bytes, first: int) -> tuple[int, list[Any]] | None:
        """Where the array whose elements start at ``first`` ends, and those elements' values.

        The bytes that followed the last cut array (``],"temperature":...``) are looked for first
        (a memchr), else the end is scanned for; either way the elements before it must parse on
        their own, which proves it is the array's end (see the module docstring).

        The tail's last place in the line is tried first: the rest of the line after the array
        (a few KB) is searched from its end instead of the array (~16 KB) from its start. Only
        the array's end can have elements before it that parse, so when they parse there the
        first place (the search below) gives that very end too: ahead of it, no tail place's
        elements parse (each lies inside the array), and the scan then finds it
        (tests/ingest/test_message_prefix_glue.py compares both on odd lines). Otherwise the search
        below decides, as before."""
        if self._tail:
            late = raw.rfind(self._tail, first)
            if late >= 0 and late - first <= _MAX_BYTES and not _holds_nul(raw, first, late):
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
            if end - first > _MAX_BYTES or _holds_nul(raw, first, end):
                return None  # a huge array; a marker of the other cutters or a NUL escape
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
