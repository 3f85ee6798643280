"""What the near-miss analysis reads of a call's messages: system text, tools, history, replies.

The evidence the classifier decides from (graph/analysis/near_miss/evidence.py) is read here, from
the request messages and the reply as the loader kept them:

- ``system_text``, ``tool_names``: the leading system/developer text and the offered tools' names;
  ``_similar`` (with ``_SystemGrams``) tells a system prompt re-rendered (a date, a listing changed)
  from one written for another job: word 3-grams, Jaccard >= ``SIMILAR_SYSTEM``.
- ``turns`` / ``reply_turn``: the non-system messages and the reply as comparable turns (role, text,
  tool calls with canonical arguments, ids ignored); ``match_history`` aligns an earlier
  conversation with a later request (kept, re-rendered, dropped, inserted, the reply's fate).
- ``_pasted``: earlier messages found inside a later user message (a history pasted into a prompt);
  ``spawn_arguments``: the long strings of a reply's tool-call arguments (a subagent's prompt).
- ``_reply_key`` and friends: a reply as linking compares it, for the replays found from the text.

Pure functions of the calls; the fast paths (packed 3-grams, numpy word numbering, the C 3-gram
counts of rollout_graph.ingest.speedups) give what the plain ones give (tests/analysis/test_near_miss_fast.py,
test_near_miss_words.py, test_near_miss_memo.py).
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import numpy as np

from rollout_graph.core.messages import canonical
from rollout_graph.core.messages import content_text as _text
from rollout_graph.core.records import Call
from rollout_graph.ingest import speedups

T = TypeVar("T")

SIMILAR_SYSTEM = 0.5  # share of word 3-grams (Jaccard) at or above which two system texts are one prompt re-rendered
SYSTEM_COMPARED = 4000  # characters of each system text compared
PASTED_MIN_CHARS = 24  # a message this long found inside a user message was pasted there
SIMILAR_MESSAGE = 0.5  # share of words (Jaccard) at or above which two messages are one message re-rendered
MESSAGE_COMPARED = 4000  # characters of each message compared for a re-rendering
SPAWN_MIN_CHARS = 16  # a tool-call argument this long that is a later call's prompt spawned that call


SYSTEM_ROLES = ("system", "developer")


def system_text(call: Call) -> str | None:
    """The leading system/developer messages' text, or None when the call has no messages."""
    messages = call.request_messages
    if not messages:
        return None
    parts = []
    for m in messages:
        if not isinstance(m, dict) or m.get("role") not in SYSTEM_ROLES:
            break
        parts.append(_text(m.get("content")))
    return "\n".join(parts)


def tool_names(call: Call) -> frozenset[str]:
    """Names of the tools the call offered."""
    names = set()
    for tool in call.tools or ():
        if isinstance(tool, dict):
            function = tool.get("function")
            name = function.get("name") if isinstance(function, dict) else tool.get("name")
            names.add(str(name))
    return frozenset(names)


def history(call: Call) -> list[str]:
    """The non-system messages as comparable keys (role, text, tool calls), in order."""
    out = []
    for m in call.request_messages or ():
        if not isinstance(m, dict) or m.get("role") in SYSTEM_ROLES:
            continue
        calls = m.get("tool_calls")
        extra = json.dumps(calls, sort_keys=True, default=str) if calls else ""
        out.append(f"{m.get('role')}\0{_text(m.get('content')).strip()}\0{extra}")
    return out


def _with_reply(call: Call) -> list[str]:
    reply = call.response_message
    if not isinstance(reply, dict):
        return history(call)
    return history(call) + history(Call("", "", "", 0, "", request_messages=[{"role": "assistant", **reply}]))


def _similar(a: str, b: str, grams: _SystemGrams | None = None) -> bool:
    """Two system texts of one harness (one re-rendered: a date, a directory listing changed), as
    opposed to two prompts written for different jobs: their word 3-gram sets (:func:`_shingles`)
    share at least ``SIMILAR_SYSTEM`` of their union (Jaccard). ``grams`` keeps each distinct
    text's 3-grams for the next comparison (one near-miss pass compares ~1,000 pairs)."""
    if a == b:
        return True
    if not a or not b:
        return False
    return (grams or _SystemGrams()).similar(a, b)


class _Numbers(dict[str, int]):
    """Words numbered in the order they are first looked up (a lookup numbers a new word).

    The short words numbered from ASCII texts are also kept in a table, at a slot given by a
    multiplicative hash of the integer :class:`_AsciiWords` reads a word of at most 8 bytes as
    (``SLOT_BITS`` bits of it): ``slot_words`` holds the integer, ``slot_numbers`` its number, and
    of two words with one slot the last numbered. A text whose words were all numbered before (a
    harness's system prompts share their words) is numbered by one look-up of its words' slots,
    each checked to hold the word's own integer, without sorting its words."""

    SLOT_BITS = 16

    def __init__(self) -> None:
        super().__init__()
        self.slot_words = np.zeros(1 << self.SLOT_BITS, dtype=np.uint64)  # 0: empty (no short word reads 0)
        self.slot_numbers = np.zeros(1 << self.SLOT_BITS, dtype=np.int64)

    def __missing__(self, word: str) -> int:
        number = self[word] = len(self)
        return number

    def clear(self) -> None:
        super().clear()
        self.slot_words.fill(0)

    def slots(self, integers: np.ndarray) -> np.ndarray:
        """The table's slot of each word's integer (0, a longer word's, is the slot of 0 alone)."""
        return (integers * np.uint64(_SPREAD)) >> np.uint64(64 - self.SLOT_BITS)

    def keep(self, integers: np.ndarray, numbers: np.ndarray) -> None:
        """Put distinct words' ``integers`` and their ``numbers`` in the table (slot 0 stays empty)."""
        slots = self.slots(integers)
        kept = slots != 0
        self.slot_words[slots[kept]] = integers[kept]
        written = kept & (self.slot_words[slots] == integers)  # (of two in one slot, the one written)
        self.slot_numbers[slots[written]] = numbers[written]


class _SystemGrams:
    """The word 3-gram sets of system texts, each distinct text's computed once.

    A set is kept as a sorted array of integers, not as a set of word tuples (a set of ~600
    tuples for each text was half of a cold analysis of a trace with many distinct system
    prompts, and ten times the memory): the words are numbered (``number``: one number for each
    distinct word, so equal words, and only those, get equal numbers) and a 3-gram is its three
    numbers packed into one integer, ``w0 << 2b | w1 << b | w2`` with ``b`` bits a number. The
    packing is one-to-one, so the intersection and union have the sizes the tuple sets have and
    every decision is theirs (tests/analysis/test_near_miss_fast.py compares the two on random texts). A
    text under 20 words keeps the set of its words, as :func:`_shingles` does.

    While at most ``FIRST_WORDS`` distinct words are numbered (a harness's prompts, a synthetic
    trace) a number has 10 bits and a 3-gram fits 4 bytes; past that the numbering starts over
    with 16 bits (8 bytes a 3-gram), and again past ``WORDS``. Texts are kept by a 16-byte
    digest, not by their text.

    A pass also keeps what it read from its last few calls (:meth:`recent`: their system texts
    and history texts, and the digests of the texts last met): the pass classifies the calls one
    earlier call nearly continued one after the other, so that call's messages are read once."""

    FIRST_WORDS, FIRST_BITS = 1 << 10, 10
    WORDS, BITS = 1 << 16, 16  # WORDS >= the words of a pair, 2 * (SYSTEM_COMPARED // 2 + 1)
    KEPT_BYTES = 32 << 20  # packed arrays kept before the cache starts over
    RECENT = 4  # calls (and texts) whose values are kept by :meth:`recent`

    def __init__(self) -> None:
        self.number = _Numbers()
        self.grams: dict[bytes, np.ndarray | frozenset[str]] = {}
        self.kept = 0
        self.generation = 0  # bumped when the numbering starts over (arrays of before are void)
        self._recent: dict[tuple[int, object], tuple[object, object]] = {}  # (id, what) -> (owner, value)

    def recent(self, owner: Any, what: Callable[[Any], T]) -> T:
        """``what(owner)``, kept for the last ``RECENT`` owners asked (a call, a text: the pass's
        owners live to its end, and the entry holds its owner, so an id is never another's)."""
        key = (id(owner), what)
        hit = self._recent.pop(key, None)
        if hit is not None and hit[0] is owner:
            self._recent[key] = hit  # the most recently asked last
            return cast(T, hit[1])
        value = what(owner)
        self._recent[key] = (owner, value)
        if len(self._recent) > 5 * self.RECENT:  # five kinds of value: system, history, turns, digest, reply
            del self._recent[next(iter(self._recent))]
        return value

    def _start_over(self) -> None:
        self.number.clear()
        self.grams.clear()
        self.kept = 0
        self.generation += 1

    def of(self, text: str) -> np.ndarray | frozenset[str]:
        """The text's 3-grams, packed (a frozenset of words for a text under 20 words)."""
        key = self.recent(text, _digest)
        text = text[:SYSTEM_COMPARED]
        found = self.grams.get(key)
        if found is not None:
            return found
        words: _AsciiWords | list[str] | None = _AsciiWords.of(text) if text.isascii() else None
        if words is None:
            words = text.split()
        if len(words) < 20:
            found = frozenset(text.split() if isinstance(words, _AsciiWords) else words)
        else:
            while True:
                limit = self.FIRST_WORDS if self.generation == 0 else self.WORDS
                if isinstance(words, _AsciiWords):
                    # (generation 0: numbers under 2 ** 32 whatever the count, so its 3-grams fit 32 bits)
                    ids = words.numbers(self.number, np.uint32 if self.generation == 0 else np.int64)
                else:
                    ids = np.fromiter(map(self.number.__getitem__, words), dtype=np.int64, count=len(words))
                if len(self.number) <= limit:  # every number fits the generation's bits
                    break
                self._start_over()  # (a text alone always fits WORDS)
            bits = self.FIRST_BITS if self.generation == 0 else self.BITS
            packed = (ids[:-2] << (2 * bits)) | (ids[1:-1] << bits) | ids[2:]
            if self.generation == 0 and packed.dtype != np.uint32:
                packed = packed.astype(np.uint32)
            packed.sort()
            found = packed[np.concatenate(([True], packed[1:] != packed[:-1]))]
            if self.kept + found.nbytes > self.KEPT_BYTES:
                self.grams.clear()
                self.kept = 0
            self.kept += found.nbytes
        self.grams[key] = found
        return found

    def similar(self, a: str, b: str) -> bool:
        """Whether the two texts' 3-gram sets share at least ``SIMILAR_SYSTEM`` of their union."""
        native = speedups.native  # the C count (ASCII texts of 20 words or more), else the packed arrays
        if native is not None:
            head_a, head_b = a[:SYSTEM_COMPARED], b[:SYSTEM_COMPARED]
            if head_a.isascii() and head_b.isascii():
                counts = native.gram_counts(head_a.encode("ascii"), head_b.encode("ascii"))
                if counts is not None:
                    shared, both = counts
                    return shared / (both - shared) >= SIMILAR_SYSTEM
        generation = self.generation
        grams_a = self.of(a)
        grams_b = self.of(b)
        if self.generation != generation:
            generation = self.generation
            grams_a = self.of(a)  # the numbering started over for b: number a's words again
            assert self.generation == generation, "one pair's words exceed the numbering"
        if isinstance(grams_a, frozenset) or isinstance(grams_b, frozenset):
            # a text under 20 words is compared by its words, and so is the other one (a short
            # prompt with a date added can cross 20 words: still one prompt re-rendered)
            if not isinstance(grams_a, frozenset):
                grams_a = frozenset(a[:SYSTEM_COMPARED].split())
            if not isinstance(grams_b, frozenset):
                grams_b = frozenset(b[:SYSTEM_COMPARED].split())
            if not grams_a or not grams_b:
                return False
            return len(grams_a & grams_b) / len(grams_a | grams_b) >= SIMILAR_SYSTEM
        both = np.concatenate((grams_a, grams_b))
        both.sort()
        shared = int(np.count_nonzero(both[1:] == both[:-1]))  # each side is unique: a repeat is in both
        return shared / (both.shape[0] - shared) >= SIMILAR_SYSTEM


_SPLIT_BYTES = bytes(1 if chr(c).isspace() else 0 for c in range(256))  # str.split's ASCII whitespace -> 1
_HEADS = np.zeros(10, dtype=np.uint64)  # a word of n bytes: the mask of its first n bytes (9: longer, 0)
_HEADS[1:9] = [((1 << (8 * n)) - 1) << (64 - 8 * n) for n in range(1, 9)]
_SPREAD, _U64 = 0x9E3779B97F4A7C15, (1 << 64) - 1  # an odd multiplier (Fibonacci hashing), 64-bit wrap
_SPREAD_MOST = 64  # distinct words up to which :meth:`_AsciiWords.numbers` tries the hash (a 13-bit table)


class _AsciiWords:
    """The words ``str.split()`` gives of an ASCII text without NUL, found with numpy rather than as
    one string object each (hashing ~700 new strings to number them was most of a system text's
    3-grams): a word of at most 8 bytes is its bytes read as one big-endian integer, masked to its
    length (NUL-free, so two words share an integer only when they are equal); a longer word is
    read as text. Equal words, and only those, get equal numbers (tests/analysis/test_near_miss_words.py)."""

    __slots__ = ("text", "starts", "ends", "heads")

    def __init__(self, text: str, starts: np.ndarray, ends: np.ndarray, heads: np.ndarray) -> None:
        self.text, self.starts, self.ends, self.heads = text, starts, ends, heads

    @property
    def first(self) -> np.ndarray:
        """The words' distinct integers, sorted (0 first when a word is longer than 8 bytes)."""
        ordered = np.sort(self.heads)
        first = np.empty(ordered.shape[0], dtype=bool)
        first[:1] = True
        np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
        return ordered[first]

    @property
    def longer(self) -> np.ndarray:
        """Where the words over 8 bytes are (they read as 0, which no shorter word does)."""
        return (self.heads == 0).nonzero()[0]

    @classmethod
    def of(cls, text: str) -> _AsciiWords | None:
        """The words of an ASCII ``text`` (None when it holds a NUL: read it with ``str.split``)."""
        raw = text.encode("ascii")
        if b"\0" in raw:
            return None
        blank = np.frombuffer((b" " + raw + b" ").translate(_SPLIT_BYTES), dtype=np.bool_)
        edges = (blank[1:] != blank[:-1]).nonzero()[0]  # a word from each edge to the next
        starts, ends = edges[0::2], edges[1::2]
        view = np.ndarray((len(raw),), dtype=">u8", buffer=raw + bytes(8), strides=(1,))  # 8 bytes at each byte
        heads = view[starts] & _HEADS[np.minimum(ends - starts, 9)] if starts.shape[0] else np.zeros(0, dtype=np.uint64)
        return cls(text, starts, ends, heads)

    def __len__(self) -> int:
        return int(self.starts.shape[0])

    def numbers(self, number: _Numbers, dtype: type[np.integer] = np.int64) -> np.ndarray:
        """Each word's number in ``number`` (a word not numbered yet gets the next one), as ``dtype``
        (one that holds every number)."""
        slots = number.slots(self.heads)
        if (number.slot_words[slots] == self.heads).all():  # every word numbered before (a longer one: set below)
            ids = number.slot_numbers[slots].astype(dtype)
        else:
            ids = self._numbered(number, dtype)
        for j in self.longer.tolist():
            ids[j] = number[self.text[self.starts[j] : self.ends[j]]]
        return ids

    def _numbered(self, number: _Numbers, dtype: type[np.integer]) -> np.ndarray:
        """:meth:`numbers` of a text with a word not in ``number``'s table (the longer words left
        unset), its distinct short words put there."""
        first = self.first
        values = first.tolist()
        names = [v.to_bytes(8, "big").rstrip(b"\0").decode("ascii") for v in values]
        table = np.array([number[name] if name else 0 for name in names], dtype=dtype)  # (0: longer, set below)
        n = len(values)
        spread = None
        if 1 < n <= _SPREAD_MOST:
            # few distinct words: each one's place found by a multiplicative hash, used only when it
            # gives the distinct words distinct slots (then a word's slot is its own, as searchsorted's
            # place is; a binary search per word, its branches mispredicted, cost 2x the whole hash)
            shift = 64 - max(6, (2 * n * n).bit_length())
            slots = [((v * _SPREAD) & _U64) >> shift for v in values]
            if len(set(slots)) == n:
                spread = np.empty(1 << (64 - shift), dtype=dtype)
                spread[slots] = table
                ids = spread[(self.heads * np.uint64(_SPREAD)) >> np.uint64(shift)]
        if spread is None:
            ids = table[first.searchsorted(self.heads)]
        number.keep(first, table)
        return ids


def _digest(text: str) -> bytes:
    """The cache key of a system text's 3-grams: 16 bytes of the SHA-256 of its compared head."""
    return hashlib.sha256(text[:SYSTEM_COMPARED].encode("utf-8", "surrogatepass")).digest()[:16]


def _shingles(text: str) -> set[tuple[str, ...]]:
    """The text's runs of 3 words (single words for a text under 20 words): linear, unlike an edit
    distance, and a re-rendered prompt (a date, a directory listing changed) keeps most of them.
    :class:`_SystemGrams` keeps them packed, with the same counts."""
    words = text.split()
    if len(words) >= 20:
        return set(zip(words, words[1:], words[2:], strict=False))  # the 3-grams, no slice for each
    return {(word,) for word in words}


def _pasted(earlier: Call, later: Call, grams: _SystemGrams | None = None, users: list[str] | None = None) -> int:
    """How many of the earlier conversation's messages (with its reply) reappear as text inside
    one of the later call's user messages: a history pasted into a prompt (a memory or summary
    agent), not re-sent as messages (``grams``: the pass's, which keeps the earlier texts;
    ``users``: the later call's user messages' texts, when already read)."""
    if users is None:
        users = _user_texts(later)
    if not users:
        return 0
    texts = _history_texts(earlier) if grams is None else grams.recent(earlier, _history_texts)
    longest = max(map(len, users))
    found = 0
    for text in texts:  # (the lengths first: a text as long as every user message is in none)
        if PASTED_MIN_CHARS <= len(text) < longest and any(len(u) > len(text) and _inside(text, u) for u in users):
            found += 1
    return found


def _inside(needle: str, haystack: str, head: int = 100, tries: int = 8) -> bool:
    """``needle in haystack``, its first ``head`` characters looked for only where the whole needle
    can still start (a long needle in a haystack not much longer is a short search), each place
    they occur checked whole; after ``tries`` such places (a repetitive text), the plain search.
    (A lead of 100 characters, not 32: str.find skips further with a longer one; the vLLM bench's
    ~6,900 searches a pass 25 -> 15 ms.)"""
    last = len(haystack) - len(needle)  # the last place the needle can start
    if last < 0:
        return False
    lead = needle[:head]
    end = last + len(lead)  # a match of the lead that starts at ``last`` or before ends by here
    at = haystack.find(lead, 0, end)
    for _ in range(tries):
        if at < 0:
            return False
        if haystack.startswith(needle, at):
            return True
        at = haystack.find(lead, at + 1, end)
    return needle in haystack


def _user_texts(call: Call) -> list[str]:
    """The text of each of the call's user messages."""
    return [
        _text(m.get("content")) for m in call.request_messages or () if isinstance(m, dict) and m.get("role") == "user"
    ]


def _history_texts(call: Call) -> list[str]:
    """``[key.split("\\0")[1] for key in _with_reply(call)]`` (each key's second field: the message's
    text, cut at a NUL; a field of the role when the role holds one), without writing the keys'
    tool calls as JSON."""
    reply = call.response_message
    messages = list(call.request_messages or ())
    if isinstance(reply, dict):
        messages.append({"role": "assistant", **reply})
    out = []
    for m in messages:
        if not isinstance(m, dict) or m.get("role") in SYSTEM_ROLES:
            continue
        role = f"{m.get('role')}"
        out.append(role.split("\0")[1] if "\0" in role else _text(m.get("content")).strip().split("\0", 1)[0])
    return out


def _quote(text: str, width: int = 40) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= width else text[: width - 1] + "…")


def _reply_key(message: object) -> tuple | None:
    """An assistant message as linking compares it (text and tool calls, modulo the harness
    normalisations of rollout_graph.core.messages); None when it has neither."""
    if not isinstance(message, dict):
        return None
    turn = canonical(message, "assistant")
    return turn if turn[1] or turn[2] else None


def _last_assistant(call: Call) -> dict | None:
    for message in reversed(call.request_messages or ()):
        if isinstance(message, dict) and message.get("role") == "assistant":
            return message
    return None


def _raw_arguments(message: dict) -> list[str]:
    out = []
    for tc in message.get("tool_calls") or ():
        if isinstance(tc, dict):
            fn = tc["function"] if isinstance(tc.get("function"), dict) else tc
            args = fn.get("arguments")
            out.append(args if isinstance(args, str) else json.dumps(args, sort_keys=True))
    return out


def _reasoning(message: dict) -> str:
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return ""


# -- conversations as turns: what a later request kept of an earlier conversation -----------------

Turn = tuple[str, str, tuple]  # (role, stripped text, tool calls as (name, canonical arguments))


def _turn(message: dict, default_role: str | None = None) -> Turn:
    role = message.get("role") or default_role
    return (str(role), _text(message.get("content")).strip(), canonical(message)[2])


def turns(call: Call) -> list[Turn]:
    """The request's non-system messages as turns, in order."""
    return [_turn(m) for m in call.request_messages or () if isinstance(m, dict) and m.get("role") not in SYSTEM_ROLES]


def reply_turn(call: Call) -> Turn | None:
    """The call's reply as a turn (None when it recorded none, or an empty one)."""
    reply = call.response_message
    if not isinstance(reply, dict):
        return None
    turn = _turn(reply, "assistant")
    return turn if turn[1] or turn[2] else None


@functools.lru_cache(maxsize=4096)
def _words(text: str) -> frozenset[str]:
    """The words of a message's compared head (kept for the pass's repeated messages)."""
    return frozenset(text[:MESSAGE_COMPARED].split())


def similar_text(a: str, b: str) -> bool:
    """Two renderings of one message: equal; the shorter (24+ characters) inside the longer (a
    reminder or a note added around it, or taken out); or, within 4x of each other's length, at
    least ``SIMILAR_MESSAGE`` of their words shared (Jaccard)."""
    if a == b:
        return True
    if not a or not b:
        return False
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    if len(short) >= PASTED_MIN_CHARS and _inside(short, long_):
        return True
    if 4 * len(short) < len(long_):
        return False
    wa, wb = _words(a), _words(b)
    return bool(wa and wb) and len(wa & wb) >= SIMILAR_MESSAGE * len(wa | wb)


@dataclass(frozen=True, slots=True)
class HistoryMatch:
    """An earlier conversation (its request's non-system turns, then its reply) against a later
    request's turns. Indices: ``before`` into the earlier turns (the reply last), ``after`` into
    the later ones.

    ``kept``: pairs found unchanged, in order; ``rerendered``: pairs of one role, not equal but one
    message written again (``similar_text``) where the unchanged ones left a gap for it, or equal
    but moved out of order (24+ characters, or a tool call);
    ``dropped``: earlier turns in neither; ``inserted``: later turns in neither; ``first``: the
    first turn ``same``, ``re-rendered``, ``changed`` or ``none``; ``reply``: the earlier reply
    ``kept``, ``re-rendered``, ``merged`` (a later assistant turn starts with it and goes on: the
    reply merged with the text that continued it),
    ``left out`` or ``none`` (no reply recorded); ``prefix``: the later turns begin with every
    earlier request turn, unchanged and in order."""

    n_before: int
    n_after: int
    kept: tuple[tuple[int, int], ...]
    rerendered: tuple[tuple[int, int], ...]
    dropped: tuple[int, ...]
    inserted: tuple[int, ...]
    first: str
    reply: str
    prefix: bool

    @property
    def carried(self) -> int:
        """Earlier turns the later request carries (unchanged or re-rendered)."""
        return len(self.kept) + len(self.rerendered)


def match_history(before: list[Turn], reply: Turn | None, after: list[Turn]) -> HistoryMatch:
    """Align an earlier conversation with a later request (linear in the turns: each earlier turn
    takes the first unused equal later turn after the last one taken, then the gaps between those
    are searched for re-rendered turns of the same role, then the rest for turns moved unchanged)."""
    full = before + ([reply] if reply is not None else [])
    places: dict[Turn, list[int]] = {}
    for j, turn in enumerate(after):
        places.setdefault(turn, []).append(j)
    kept: list[tuple[int, int]] = []
    at = 0
    for i, turn in enumerate(full):
        found = places.get(turn)
        if found:
            k = bisect.bisect_left(found, at)
            if k < len(found):
                kept.append((i, found[k]))
                at = found[k] + 1
    matched_before = {i for i, _ in kept}
    matched_after = {j for _, j in kept}
    rerendered: list[tuple[int, int]] = []
    anchors = [(-1, -1), *kept, (len(full), len(after))]
    for (i0, j0), (i1, j1) in zip(anchors, anchors[1:], strict=False):
        free = [j for j in range(j0 + 1, j1) if j not in matched_after]
        for i in range(i0 + 1, i1):
            for j in free:
                if after[j][0] == full[i][0] and similar_text(full[i][1], after[j][1]):
                    rerendered.append((i, j))
                    free.remove(j)
                    break
    matched_before.update(i for i, _ in rerendered)
    matched_after.update(j for _, j in rerendered)
    # a turn moved: left unmatched by the in-order pass, but found unchanged elsewhere among the
    # later turns (a harness that restores a history may put its own messages in another place)
    for i, turn in enumerate(full):
        if i in matched_before or not (len(turn[1]) >= PASTED_MIN_CHARS or turn[2]):
            continue
        moved = next((j for j in places.get(turn, ()) if j not in matched_after), None)
        if moved is not None:
            rerendered.append((i, moved))
            matched_before.add(i)
            matched_after.add(moved)
    dropped = tuple(i for i in range(len(full)) if i not in matched_before)
    inserted = tuple(j for j in range(len(after)) if j not in matched_after)
    if not full or not after:
        first = "none"
    elif (0, 0) in kept:
        first = "same"
    elif (0, 0) in rerendered:
        first = "re-rendered"
    else:
        first = "changed"
    fate = "none"
    if reply is not None:
        r = len(before)
        if any(i == r for i, _ in kept):
            fate = "kept"
        elif any(i == r for i, _ in rerendered):
            j = next(j for i, j in rerendered if i == r)
            grown = reply[1] and len(after[j][1]) > len(reply[1]) and after[j][1].startswith(reply[1])
            fate = "merged" if grown else "re-rendered"
        elif reply[1] and any(
            after[j][0] == "assistant" and len(after[j][1]) > len(reply[1]) and after[j][1].startswith(reply[1])
            for j in inserted
        ):
            fate = "merged"
        else:
            fate = "left out"
    prefix = bool(before) and after[: len(before)] == before
    return HistoryMatch(len(full), len(after), tuple(kept), tuple(rerendered), dropped, inserted, first, fate, prefix)


def turn_words(turns_: list[Turn], limit: int = 3) -> str:
    """ "user 'Output token limit hit…' ×3, assistant '…'": the turns' roles and quoted texts, the
    most frequent ``limit`` of them."""
    counts: dict[str, int] = {}
    for role, text, calls in turns_:
        shown = text or (f"{calls[0][0]}(…)" if calls else "")
        key = f"{role} {_quote(shown)}"
        counts[key] = counts.get(key, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: -kv[1])
    named = ", ".join(what + (f" ×{n}" if n > 1 else "") for what, n in ranked[:limit])
    return named + ("" if len(ranked) <= limit else f" and {len(ranked) - limit} more")


def spawn_arguments(message: object) -> list[tuple[str, str]]:
    """(tool name, text) for each string of at least ``SPAWN_MIN_CHARS`` characters in a reply's
    tool-call arguments (JSON strings walked, two levels deep): what a subagent's prompt would be."""
    if not isinstance(message, dict) or not (message.get("tool_calls") or isinstance(message.get("content"), list)):
        return []  # (no tool call, and no content blocks that could hold one)
    out: list[tuple[str, str]] = []
    for name, arguments in canonical(message)[2]:
        raw = arguments[5:] if arguments.startswith("json:") else arguments[4:]
        try:
            value = json.loads(raw) if arguments.startswith("json:") else raw
        except ValueError:
            value = raw
        stack = [(value, 0)]
        while stack:
            item, depth = stack.pop()
            if isinstance(item, str):
                if len(item.strip()) >= SPAWN_MIN_CHARS:
                    out.append((name, item.strip()))
            elif depth < 3 and isinstance(item, dict):
                stack.extend((v, depth + 1) for v in item.values())
            elif depth < 3 and isinstance(item, list):
                stack.extend((v, depth + 1) for v in item[:16])
    return out


def prompt_texts(call: Call) -> list[str]:
    """The texts a spawning tool call's arguments would hold: the system text and each user
    message (stripped), non-empty ones."""
    out = []
    system = system_text(call)
    if system:
        out.append(system.strip())
    out.extend(t.strip() for t in _user_texts(call) if t.strip())
    return out
