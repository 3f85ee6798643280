"""Prompt-id arrays: found in a raw line, parsed from their text, stored once in arenas.

Entry points: :class:`IdArrayCutter` (one per file: :meth:`IdArrayCutter.spans` finds each plain
digit array under a ``prompt_token_ids`` / ``input_ids`` key in a part of a line and reads it,
parsing only the tail a recent array's text does not already open) and :func:`held_bytes` (what
loaded prompts hold together). A middle-layer shortcut: ``values/line.py`` asks it for spans and
cuts them; the ids are read by one C pass (``_speedups.plain_ids``) or by numpy, the reference
(:func:`_parse_plain_python`). Anything but plain digits stays in the line for the validating
parser. Arrays whose ids fit int32 are read-only views of append-only arenas; nothing is written
over a part a view covers. docs/performance.md, "Cold inspect: prompt ids and content arrays" and
"Peak memory of the cold path".
"""

from __future__ import annotations

import mmap
import re
import warnings
import weakref
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable

import numpy as np

from rollout_graph.ingest.files.search import find_by_rare_byte, find_outside
from rollout_graph.ingest.limits import LimitExceeded
from rollout_graph.ingest.speedups import native

# Keys whose arrays are large and repetitive: prompts, and rollout documents' sequences. One scan
# for their common tail finds both.
ID_KEY = b'_ids"'  # what the other shortcuts call the id keys (messages.OTHER_KEYS)
_HEADS = (b'"prompt_token', b'"input')
_OPENING = re.compile(rb"\s*:\s*\[")
# numpy clamps numbers beyond int64 to its maximum: anything this large goes the validating path.
_IMPLAUSIBLE_ID = 2**62
_RECENT = 16
_INT32_MAX = 2**31 - 1
# Ids per arena: 64 MB of address space, of which only the pages written become resident.
ARENA_IDS = 1 << 24
_FIRST_ARENA_IDS = 1 << 18  # 1 MB of address space for a cutter's first arena
_SMALL = 64  # arrays this short are neither remembered nor put in an arena
_PAGE_IDS = 1024  # int32 ids in a 4 KB page: slots start on a page
_ROOM = 4 * _PAGE_IDS  # the least room left after an array written whole


_NO_IDS = np.empty(0, dtype=np.int32)
_NO_IDS.flags.writeable = False
_DIGITS = b"0123456789,"
_SPACE = b" \t\r\n"
# An element with no digits (``[1, ,2]``, ``[ ,1]``): numpy reads it as 0, JSON refuses it.
_EMPTY_ELEMENT = re.compile(rb"(?:^|,)[ \t\r\n]*(?:,|$)")


def _fromstring_warns() -> bool:
    """Whether this numpy warns (DeprecationWarning, numpy 1.x) rather than raises ValueError on
    text ``np.fromstring`` cannot read to its end ("1 2"); newer numpy raises."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        try:
            np.fromstring(b"1 2", dtype=np.int64, sep=",")
        except DeprecationWarning:
            return True
        except ValueError:
            return False
    return True


_WARNS = _fromstring_warns()


_NATIVE_IDS = None if native is None else native.plain_ids


def _parse_plain(text: bytes) -> tuple[np.ndarray, int] | None:
    """The ids of a comma-separated run of digits and the largest (0 when none), or None when it
    is not exactly one JSON array's body (a byte other than a digit, a comma or JSON whitespace,
    an empty element, two numbers in one, a trailing comma, a leading zero, a number of 2**62 or
    more).

    Read in one C pass when the speedups are built (``_speedups.plain_ids``: the same answer,
    tests/ingest/test_speedups_ids.py; its int64 buffer wrapped without a copy), else by
    :func:`_parse_plain_python`."""
    if _NATIVE_IDS is not None:
        parsed = _NATIVE_IDS(text)
        if parsed is None:
            return None
        ids, top = parsed
        return np.frombuffer(ids, dtype=np.int64), top
    return _parse_plain_python(text)


def _parse_plain_python(text: bytes) -> tuple[np.ndarray, int] | None:
    """:func:`_parse_plain` by numpy: the reference the C pass is held to."""
    others = text.translate(None, _DIGITS)
    if others:  # whitespace, or anything else (not plain: left to the parser)
        if others.translate(None, _SPACE):
            return None
        if not text.strip():
            return np.empty(0, dtype=np.int64), 0
        if _EMPTY_ELEMENT.search(text):  # an element that holds no digit
            return None
    elif not text:
        return np.empty(0, dtype=np.int64), 0
    elif text[:1] == b"," or text[-1:] == b",":
        return None
    # Compact text (digits and commas): an empty element inside, ",,", is text numpy cannot read
    # to its end (the except below; tests/ingest/test_id_text_exact.py holds numpy to it), and would
    # also leave a comma the digit count below does not account for.
    try:
        if _WARNS:  # numpy 1.x: the text not read to its end is a warning, not an error
            with warnings.catch_warnings():
                warnings.simplefilter("error", DeprecationWarning)
                arr = np.fromstring(text, dtype=np.int64, sep=",")
        else:
            arr = np.fromstring(text, dtype=np.int64, sep=",")
    except (ValueError, DeprecationWarning):  # "1 2": left to the JSON parser, which says why
        return None
    n = arr.shape[0]
    if not n or (others and n != text.count(b",") + 1):
        return None
    # Each element is one run of digits: the numbers read must have as many digits as the text
    # (fewer: a leading zero, "01", which JSON refuses; or a number numpy clamped; or an element
    # not read, whose digits and comma are then left over).
    top = int(arr.max())
    if top >= _IMPLAUSIBLE_ID:  # perhaps clamped by numpy: its digits would not tell
        return None
    if not others and not _zero_opens(text):
        # Compact, read to its end (n elements, n - 1 commas) and nothing clamped: with no
        # element opening with a zero, each number has its element's digits (the count below
        # would find them all; tests/ingest/test_id_text_exact.py compares it with that count).
        return arr, top
    digits = n
    power = 10
    while power <= top:
        digits += int(np.count_nonzero(arr >= power))
        power *= 10
    return (arr, top) if digits == len(text) - (n - 1) - len(others) else None


_COMMA = ord(",")
_VECTOR_BYTES = 4096  # shorter texts are counted by bytes.count (numpy's call costs more there)
_COMMA_ZERO = int(np.frombuffer(b",0", dtype=np.uint16)[0])  # the two bytes as one uint16 here
_PAIRS_BYTES = 256  # shorter texts are searched by bytes.find


def _zero_opens(text: bytes) -> bool:
    """Whether an element of compact text (digits and commas) opens with a zero: the text does,
    or holds ``,0``; a long text's pairs compared as uint16 at both alignments (half the CPU of
    the digit count for which it stands, where bytes.find would cost more than that count)."""
    if text[:1] == b"0":
        return True
    size = len(text)
    if size < _PAIRS_BYTES:
        return b",0" in text
    even = np.frombuffer(text, dtype=np.uint16, count=size // 2)
    odd = np.frombuffer(text, dtype=np.uint16, count=(size - 1) // 2, offset=1)
    return bool((even == _COMMA_ZERO).any() or (odd == _COMMA_ZERO).any())


def _commas(text: bytes, start: int) -> int:
    """``text.count(b",", start)``: a long text's by a vectorised compare (bytes.count looks at one
    byte at a time)."""
    if len(text) - start < _VECTOR_BYTES:
        return text.count(b",", start)
    return int(np.count_nonzero(np.frombuffer(text, dtype=np.uint8, offset=start) == _COMMA))


class _Slot:
    """Room in an arena where one line of prompts grows: ids up to ``written`` are covered by
    views and never written again; ``limit`` is where the next slot begins."""

    __slots__ = ("arena", "written", "limit")

    def __init__(self, arena: np.ndarray, start: int, limit: int) -> None:
        self.arena, self.written, self.limit = arena, start, limit


class _Seen:
    """A recently cut array: its text, its ids, and the slot and start of its arena view (or None)."""

    __slots__ = ("text", "ids", "slot", "start")

    def __init__(self, text: bytes, ids: np.ndarray, slot: _Slot | None, start: int) -> None:
        self.text, self.ids, self.slot, self.start = text, ids, slot, start


def new_arena(ids: int) -> np.ndarray:
    """Anonymous memory for ``ids`` int32 ids: a page is resident only once written (the room
    left after each prompt costs address space, not memory; numpy's own large arrays ask for
    2 MB pages, which a written byte would make resident whole). Private to this process.

    Raises:
        MemoryError: the system refused the mapping (the loader reports it as out of memory).
    """
    try:
        memory = mmap.mmap(-1, ids * 4, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    except OSError as exc:
        raise MemoryError(f"cannot map {ids * 4:,} bytes for token ids: {exc.strerror or exc}") from None
    arena = np.frombuffer(memory, dtype=np.int32)
    ARENAS[id(arena)] = arena
    return arena


# for held_bytes: which bases are arenas (an entry goes when its arena does)
ARENAS: weakref.WeakValueDictionary[int, np.ndarray] = weakref.WeakValueDictionary()


class IdArrayCutter:
    """Cuts id arrays out of lines, remembering a few recent ones to parse only new tails.

    Arrays of more than 64 ids that fit int32 become read-only views of append-only arenas
    (the first 1 MB of address space, each next one twice as big up to ``ARENA_IDS`` ids;
    docs/performance.md, "Peak memory of the cold path"): each array written whole gets a
    slot with as much room again after it; a later prompt that extends the array written last in
    its slot adds only its tail there, and a prompt that is a prefix of a recent one (a parent
    read after its child) is a view of that one's ids. Any other (a fork, a retry of an older
    prompt, a slot full) is written whole in a new slot. Larger ids give plain int64 arrays.
    """

    def __init__(self, arena_ids: int | None = None) -> None:
        self._recent: list[_Seen] = []  # in the order met, the last _RECENT
        self._by_length: list[_Seen] = []  # the same, longest first (of those as long, the one met first)
        self._keys: list[int] = []  # minus the text length of each of _by_length, in its order
        self._arena_ids = ARENA_IDS if arena_ids is None else arena_ids
        # the first arena is small (a small trace, or many small files, maps little); each next
        # one twice the last, up to arena_ids
        self._next_ids = min(self._arena_ids, _FIRST_ARENA_IDS)
        self._arena: np.ndarray | None = None
        self._top = 0  # where the current arena's next slot begins

    def _seen_around(self, text: bytes) -> tuple[_Seen | None, _Seen | None]:
        """The longest recent text that opens ``text`` at an element boundary (of those as long,
        the one met first), and the first met recent text that ``text`` opens (so its ids are a
        prefix of that one's). Looked for longest first: the first that opens ``text`` is the
        one, so a conversation's earlier prompts (all of them prefixes) cost no comparison."""
        size = len(text)
        best = longer = None
        keys, by_length = self._keys, self._by_length
        # from the first no longer than ``text`` (the keys are minus the lengths, in the list's order)
        for at in range(bisect_left(keys, -size), len(keys)):
            n = -keys[at]
            if (n == size or text[n] == _COMMA) and text.startswith(by_length[at].text):
                best = by_length[at]
                break
        if best is not None and len(best.text) == size:
            return best, None  # the same text: a view of it whatever is longer
        if not keys or -keys[0] <= size:
            return best, None  # no recent text is longer
        for seen in self._recent:
            if (
                len(seen.text) > size
                and seen.slot is not None
                and seen.text[size : size + 1] == b","
                and seen.text.startswith(text)
            ):
                longer = seen
                break
        return best, longer

    def _remember(self, seen: _Seen) -> None:
        self._recent.append(seen)
        if len(self._recent) > _RECENT:
            at = self._by_length.index(self._recent.pop(0))  # _Seen compares by identity
            del self._by_length[at], self._keys[at]
        # after every one at least as long (so of equal texts the one met first comes first); the
        # keys kept beside the list: a bisect of ints, no key function called per comparison
        key = -len(seen.text)
        at = bisect_right(self._keys, key)
        self._keys.insert(at, key)
        self._by_length.insert(at, seen)

    def _ids(self, text: bytes) -> np.ndarray | None:
        prefix, longer = self._seen_around(text)
        if longer is not None and (prefix is None or len(prefix.text) < len(text)):
            # Every element of a remembered text was checked and parsed when it was first met.
            assert longer.slot is not None
            # as many ids as elements: those of a seen prefix and one per comma after it
            n = _commas(text, 0) + 1 if prefix is None else prefix.ids.shape[0] + _commas(text, len(prefix.text))
            view = longer.slot.arena[longer.start : longer.start + n]
            view.flags.writeable = False
            self._remember(_Seen(text, view, longer.slot, longer.start))
            return view
        # Only text not already parsed needs checking: a seen prefix was checked when first met.
        head, tail = (_NO_IDS, text) if prefix is None else (prefix.ids, text[len(prefix.text) + 1 :])
        parsed = _parse_plain(tail)
        if parsed is None:
            return None
        rest, top = parsed
        if prefix is not None and len(text) > len(prefix.text) and rest.shape[0] == 0:
            return None
        n = head.shape[0] + rest.shape[0]
        if n <= _SMALL:
            return np.concatenate([head, rest]) if head.shape[0] else rest
        if top <= _INT32_MAX and head.dtype != np.int64:
            seen = self._place(text, prefix, head, rest)
        else:
            seen = _Seen(text, np.concatenate([head, rest]) if head.shape[0] else rest, None, 0)
        self._remember(seen)
        return seen.ids

    def _place(self, text: bytes, prefix: _Seen | None, head: np.ndarray, rest: np.ndarray) -> _Seen:
        """``head + rest`` as a read-only int32 view of an arena (``head`` is ``prefix``'s ids)."""
        m, k = head.shape[0], rest.shape[0]
        slot = None if prefix is None else prefix.slot
        if (
            slot is not None
            and prefix is not None
            and (k == 0 or (prefix.start + m == slot.written and slot.written + k <= slot.limit))
        ):
            start = prefix.start
            if k:
                slot.arena[slot.written : slot.written + k] = rest
                slot.written += k
        else:
            slot = self._slot(m + k)
            start = slot.written
            slot.arena[start : start + m] = head
            slot.arena[start + m : start + m + k] = rest
            slot.written = start + m + k
        view = slot.arena[start : start + m + k]
        view.flags.writeable = False
        return _Seen(text, view, slot, start)

    def _slot(self, n: int) -> _Slot:
        """A new slot for ``n`` ids and as many again to grow into (whole pages of ids)."""
        size = -(-(2 * n + _ROOM) // _PAGE_IDS) * _PAGE_IDS
        if self._arena is None or self._top + size > self._arena.shape[0]:
            self._arena = new_arena(max(self._next_ids, size))
            self._next_ids = min(self._arena_ids, 2 * self._next_ids)
            self._top = 0
        slot = _Slot(self._arena, self._top, self._top + size)
        self._top += size
        return slot

    def spans(
        self,
        raw: bytes,
        lo: int = 0,
        hi: int | None = None,
        ask: Ask | None = None,
        max_ids: int | None = None,
        before: int | None = None,
    ) -> list[tuple[int, int, np.ndarray]]:
        """``(start, end, ids)`` of each plain id array whose key starts in ``raw[lo:hi]``, in
        order: ``raw[start:end]`` is the array with its brackets. ``ask``: the span of the line
        known to hold no id key (asked as the search goes: :class:`rollout_graph.ingest.shortcuts.
        messages.KnownSpan`), not searched; ``before``: an array whose body reaches this position
        is left alone (it runs into a content array cut there).

        Raises:
            LimitExceeded: an array holds more than ``max_ids`` ids.
        """
        found: list[tuple[int, int, np.ndarray]] = []
        pos = 0
        for start, end in _array_spans(raw, lo, hi, ask):
            if (before is not None and end >= before) or start < pos:
                continue
            ids = self._ids(raw[start:end])
            if ids is None:
                continue
            if max_ids is not None and ids.shape[0] > max_ids:
                raise LimitExceeded(f"an id array holds {ids.shape[0]:,} ids (limit max_ids {max_ids:,}, --max-ids)")
            found.append((start - 1, end + 1, ids))
            pos = end + 1
        return found


_SEARCHES: dict[bytes, Callable[[bytes, int, int], re.Match[bytes] | None]] = {}


def _search(key: bytes) -> Callable[[bytes, int, int], re.Match[bytes] | None]:
    """``key`` as a compiled literal: the regex engine looks for its first byte in a tight loop
    (an underscore or a quote, rare in running text), where ``bytes.find`` stops at every byte
    equal to the key's last, here a quote (every JSON string has two): 1.5x as fast on both
    bench traces' lines."""
    search = _SEARCHES.get(key)
    if search is None:
        search = _SEARCHES[key] = re.compile(re.escape(key)).search
    return search


_TRIES = 4  # first bytes looked at before the compiled search takes over


def _find(raw: bytes, key: bytes, pos: int, hi: int) -> int:
    """``raw.find(key, pos, hi)``: the key's first byte found by memchr (for the id keys an
    underscore: a record's prose has few, its keys some), each checked for the key; after
    ``_TRIES`` that are not the key's (snake_case code in a message), the compiled search from
    there (the regex engine's scan for the first byte is slower than memchr, faster than
    bytes.find stopping at every quote)."""
    return find_by_rare_byte(raw, key, pos, hi, 0, _TRIES, _search(key))


Ask = Callable[[bytes, int, int | None], tuple[int, int] | None]  # (raw, from, near) -> a span holding no key
NEAR = 512  # bytes from where a search starts in which a messages key is looked for at once


def _array_spans(raw: bytes, lo: int = 0, hi: int | None = None, ask: Ask | None = None) -> list[tuple[int, int]]:
    """(start, end) of each array body under one of the keys, in order, whose key starts in
    ``raw[lo:hi]`` (its array may run on); ``ask``: a span holding no key, not searched."""
    spans = []
    hi = len(raw) if hi is None else hi
    # a messages key near where the search starts (a capture record's request) is asked for at
    # once; else from where the first id array ends (a flat entry's ids come first)
    span = None if ask is None else ask(raw, lo, lo + NEAR)
    skip = () if span is None else (span,)
    at = find_outside(raw, ID_KEY, lo, hi, skip, _find)
    while at >= 0:
        after = at + len(ID_KEY)
        if raw.endswith(_HEADS, 0, at):  # one of the keys (what precedes ``at`` is one of the heads)
            opening = _OPENING.match(raw, after)
            if opening:
                end = raw.find(b"]", opening.end())
                if end < 0:
                    break
                spans.append((opening.end(), end))
                after = end
        if ask is not None and span is None:
            span = ask(raw, after, None)
            skip = () if span is None else (span,)
        at = find_outside(raw, ID_KEY, after, hi, skip, _find)
    return spans


def held_bytes(arrays: Iterable[np.ndarray | None], *, any_buffer: bool = False) -> int:
    """Bytes these arrays hold together: a plain array its own, the views of one arena (prompts
    sharing their parent's ids) the part of it at least one of them covers, counted once. With
    ``any_buffer``, contiguous views inside any contiguous buffer count the same way (the buffer a
    cache entry is reopened into)."""
    total = 0
    spans: dict[int, list[tuple[int, int]]] = {}
    for arr in arrays:
        if arr is None:
            continue
        base = arr.base
        if isinstance(base, np.ndarray):
            start = arr.__array_interface__["data"][0] - base.__array_interface__["data"][0]
            if ARENAS.get(id(base)) is base or (
                any_buffer
                and arr.flags.c_contiguous
                and base.flags.c_contiguous
                and 0 <= start
                and start + arr.nbytes <= base.nbytes
            ):
                spans.setdefault(id(base), []).append((start, start + arr.nbytes))
                continue
        total += arr.nbytes
    for intervals in spans.values():
        end = -1
        for a, b in sorted(intervals):
            total += max(0, b - max(a, end))
            end = max(end, b)
    return total
