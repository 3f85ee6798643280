"""Near-miss links: why a call did not continue the call it nearly continued.

Exact prefix linking is right for training data, but harnesses rewrite history before replaying it
(a stop string cut from the model's output, a closing tag appended, reasoning dropped, tool-call JSON
re-serialised, the model's text re-tokenized differently), and then each step becomes a new root or
makes the previous step look like a discarded retry. For every root after the first, every discarded
call, every later child of a fork, and every call whose request replays an earlier reply with other
ids, this finds the call it nearly continued, where the token prefix broke, what kind of break it was
and the evidence for it. It never changes the exact graph, its sequences or exports. This module is
the one classifier: ``inspect``, ``explain``, ``tail``, the app's banner, tour and near-miss view and
the JSON contract all read its kinds, and :func:`describe` is the one sentence they print for one.

Kinds, in the order they are decided (the evidence each needs: docs/semantics.md, "Why a call broke"):
- ``retry``: the two prompts are identical, or within ``NEAR_IDENTICAL`` of each other in length
  and shared prefix: the same request sampled again. A discarded call is compared with every
  sibling, and an identical-prompt sibling wins over the one that continued.
- ``retokenized``: the later request carries the earlier call's reply as text, unchanged (modulo
  the normalisations of rollout_graph.core.messages), but the prompt ids diverge inside that reply's
  sampled span: the engine tokenized the model's text again, differently. Found from the messages
  (:func:`text_replays`); without messages, a tokenizer can show it (the rest of the earlier end ids
  decodes to exactly the text that follows in the later prompt).
- ``rewritten_continuation``: the break falls inside or after the earlier call's sampled span and
  the replay is not the same text (a stop string cut, reasoning dropped, arguments re-serialised),
  or nothing could tell (no messages, no tokenizer: the miss records that the text was not checked).
- Breaks inside the earlier call's prompt, told apart by system text, tool names and history (the
  non-system messages; without messages, by the token overlap alone):
  - ``rejected``: the same system text and tools, the later history is the earlier one with the
    earlier reply left out and only harness messages (user, tool) added: the harness rejected the
    reply (a format error, a length cut) and asked again (mini-swe-agent);
  - ``subagent`` / ``side_call``: a system prompt written for another job (not a re-render of the
    earlier one), or a history pasted into a user message (a memory agent): with tools or a
    continuation of its own a subagent, else a side call;
  - ``resumed``: the same conversation re-sent (its first message the same, at least
    ``HISTORY_KEPT`` of the earlier history kept) by a new invocation: the system prompt re-rendered,
    the tool set changed, or ``RESUME_GAP`` seconds between the calls; dropped messages are named;
  - ``compaction``: same system text and tools, history replaced or cut (without messages: at least
    ``SHARED_SYSTEM_TOKENS`` shared tokens);
  - ``new_conversation``: the root of the rollout's main conversation (the root whose tree has the
    most calls), when another call (a title, say) arrived before it;
  - ``unknown``: no messages and fewer than ``SHARED_SYSTEM_TOKENS`` shared ids: nothing to tell.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import numpy as np

from rollout_graph.analysis.decode import Decoder, TokenizerDecoder
from rollout_graph.core.ids import same_ids, same_memory
from rollout_graph.core.messages import canonical
from rollout_graph.core.messages import content_text as _text
from rollout_graph.core.records import EMPTY_IDS, FATAL, WARN, Call, Finding, NearMiss
from rollout_graph.core.types import (
    BROKEN_REPLAYS,
    COMPACTION,
    NEAR_MISS_KINDS,
    NEW_CONVERSATION,
    NEW_CONVERSATIONS,
    REJECTED,
    RESUMED,
    RETOKENIZED,
    RETRY,
    REWRITTEN,
    SIDE_CALL,
    SUBAGENT,
    UNKNOWN,
    NearMissKind,
)
from rollout_graph.ingest import speedups

__all__ = [
    "BROKEN_REPLAYS", "COMPACTION", "KINDS", "NEW_CONVERSATION", "NEW_CONVERSATIONS", "REJECTED", "RESUMED",
    "RETOKENIZED",
    "RETRY", "REWRITTEN", "SIDE_CALL", "SUBAGENT", "UNKNOWN", "NearMiss", "describe", "near_misses",
    "replay_chains", "replayed", "retokenized_finding", "rewrite_finding", "text_replays",
]  # fmt: skip

KINDS = NEAR_MISS_KINDS
T = TypeVar("T")

NEAR_IDENTICAL = 0.98
SHARED_SYSTEM_TOKENS = 32
HISTORY_KEPT = 0.5
RETOKENIZE_REACH = 8  # a break this close to the end of the earlier prompt may still be a retokenization
STOP_TAIL = 2  # a replay that changed at most this many final sampled ids of a stopped reply cut its stop string
SIMILAR_SYSTEM = 0.5  # share of word 3-grams (Jaccard) at or above which two system texts are one prompt re-rendered
SYSTEM_COMPARED = 4000  # characters of each system text compared
PASTED_MIN_CHARS = 24  # a message this long found inside a user message was pasted there
RESUME_GAP = 60.0  # seconds between two calls that mark a new invocation of the harness
REPLY_CANDIDATES = 4  # earlier calls with the same reply compared with a replay (the latest ones)
RETOKENIZED_FATAL_SHARE = 0.25  # a replay changing more of the reply's ids than this is FATAL


def _prompt(call: Call) -> np.ndarray:
    """The prompt ids of a call that carries them (near misses only compare such calls)."""
    assert call.prompt_ids is not None, f"call {call.node_id!r} has no prompt ids"
    return call.prompt_ids


def _first_difference(a: np.ndarray, b: np.ndarray) -> int:
    """The first index where two 1-d arrays of one length differ (their length when none does):
    ``argmax`` of the comparison stops at its first True, where ``flatnonzero`` lists them all
    (one C loop where both are contiguous ids of one width: ``speedups.native.first_difference``)."""
    native = speedups.native
    if native is not None:
        at = native.first_difference(a, b)
        if at is not None:
            return at
    differ = a != b
    n = differ.shape[0]
    if not n:
        return 0
    at = int(differ.argmax())
    return at if differ[at] else n


def common_prefix(earlier: Call, prompt: np.ndarray) -> int:
    """Length of the common prefix of ``earlier``'s end ids and ``prompt``."""
    mine = _prompt(earlier)
    n_e, n = mine.shape[0], prompt.shape[0]
    n_p = min(n_e, n)
    at = _first_difference(mine[:n_p], prompt[:n_p])
    if at < n_p or n_p < n_e:
        return at
    sampled = earlier.sampled_ids
    rest = min(sampled.shape[0], n - n_p)
    return n_p + _first_difference(sampled[:rest], prompt[n_p : n_p + rest])


def prompt_of(call: Call) -> np.ndarray:
    """The call's prompt ids (empty when it has none)."""
    return call.prompt_ids if call.prompt_ids is not None else EMPTY_IDS


def end_ids(call: Call) -> np.ndarray:
    """The call's prompt ids followed by its sampled ids."""
    return np.concatenate([call.prompt_ids, call.sampled_ids]) if call.prompt_ids is not None else call.sampled_ids


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


def _shares_history(earlier: Call, later: Call) -> bool:
    before, after = _with_reply(earlier), history(later)
    if not before or not after or before[0] != after[0]:
        return False
    remaining = Counter(after)
    found = 0
    for key in before:
        if remaining[key] > 0:
            remaining[key] -= 1
            found += 1
    return found >= HISTORY_KEPT * len(before)


def same_text(decoder: Decoder | None, earlier: Call, later: Call, at: int) -> bool | None:
    """Whether the earlier call's end ids from ``at`` decode to exactly the text the later prompt
    goes on with (None: no tokenizer to tell)."""
    if not isinstance(decoder, TokenizerDecoder):
        return None
    rest = end_ids(earlier)[at:]
    if not rest.shape[0]:
        return False
    target = decoder.text(rest)
    text = ""
    for piece in decoder.pieces(prompt_of(later)[at : at + 4 * rest.shape[0] + 8]):
        text += piece
        if len(text) >= len(target):
            break
    return bool(target) and text.startswith(target)


def classify(
    earlier: Call,
    later: Call,
    shared: int,
    decoder: Decoder | None = None,
    continued: bool = False,
    main: bool = False,
) -> tuple[NearMissKind, str, float, bool]:
    """(kind, where, kept, text_checked) for ``later``'s prompt against ``earlier``'s end ids;
    ``continued``: the later call has children of its own; ``main``: it is the root of the
    rollout's main conversation. :func:`classify_with_evidence` also says what the kind was read from."""
    kind, where, kept, checked, _ = classify_with_evidence(earlier, later, shared, decoder, continued, main)
    return kind, where, kept, checked


def classify_with_evidence(
    earlier: Call,
    later: Call,
    shared: int,
    decoder: Decoder | None = None,
    continued: bool = False,
    main: bool = False,
    grams: _SystemGrams | None = None,
) -> tuple[NearMissKind, str, float, bool, str]:
    """:func:`classify`, and the evidence in words (``grams``: the system texts' 3-grams kept
    between the calls of one near-miss pass)."""
    p_e, n_e, n_l = earlier.n_prompt, earlier.n_end, later.n_prompt
    where = "prompt" if shared < p_e else "sampled" if shared < n_e else "after"
    kept = min(1.0, max(0.0, (shared - p_e) / earlier.n_sampled)) if earlier.n_sampled else 0.0
    longest = max(n_l, p_e)
    if same_ids(_prompt(earlier), _prompt(later)):
        return RETRY, where, kept, False, "the identical prompt ids"
    if min(n_l, p_e) >= NEAR_IDENTICAL * longest and min(shared, p_e) >= NEAR_IDENTICAL * longest:
        return RETRY, where, kept, False, f"nearly the same prompt ({min(shared, p_e):,} of {longest:,} ids shared)"
    checked = False
    if where != "prompt" or p_e - shared <= RETOKENIZE_REACH:
        text = same_text(decoder, earlier, later, shared)
        checked = text is not None
        if text:
            return RETOKENIZED, where, kept, True, "the tokenizer decodes both sides to the same text"
    if where != "prompt":
        evidence = "the tokenizer decodes the two sides to different text" if checked else "the token ids alone"
        return REWRITTEN, where, kept, checked, evidence
    kind, evidence = _context_kind(earlier, later, shared, continued, main, grams)
    return kind, where, kept, checked, evidence


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
        if len(self._recent) > 3 * self.RECENT:  # three kinds of value: system, history, digest
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
            if not isinstance(grams_a, frozenset) or not isinstance(grams_b, frozenset):
                return False  # single words against 3-grams: nothing shared
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


def _pasted(earlier: Call, later: Call, grams: _SystemGrams | None = None) -> int:
    """How many of the earlier conversation's messages (with its reply) reappear as text inside
    one of the later call's user messages: a history pasted into a prompt (a memory or summary
    agent), not re-sent as messages (``grams``: the pass's, which keeps the earlier texts)."""
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


def _gap(earlier: Call, later: Call) -> float | None:
    """Seconds from the earlier call's end to the later call's start (None: not recorded)."""
    end, start = earlier.timing.get("ended_at"), later.timing.get("started_at")
    if isinstance(end, bool) or isinstance(start, bool):
        return None
    if isinstance(end, (int, float)) and isinstance(start, (int, float)):
        return float(start) - float(end)
    return None


def _dropped(earlier: Call, later: Call) -> list[str]:
    """The earlier conversation's messages (with its reply) that the later call no longer carries."""
    remaining = Counter(history(later))
    out = []
    for key in _with_reply(earlier):
        if remaining[key] > 0:
            remaining[key] -= 1
        else:
            out.append(key)
    return out


def _quote(text: str, width: int = 40) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= width else text[: width - 1] + "…")


def _dropped_words(dropped: list[str]) -> str:
    """ "dropped 3 messages ('Output token limit hit…' ×3)"."""
    if not dropped:
        return ""
    counts = Counter(f"{key.split(chr(0))[0]} {_quote(key.split(chr(0))[1])}" for key in dropped)
    named = ", ".join(f"{what}" + (f" ×{n}" if n > 1 else "") for what, n in counts.most_common(3))
    more = "" if len(counts) <= 3 else f" and {len(counts) - 3} more"
    return f"dropped {len(dropped)} message{'s' * (len(dropped) != 1)} ({named}{more})"


def _rejected(earlier: Call, later: Call) -> str | None:
    """The evidence that the harness rejected the earlier reply and asked again: the later history
    is the earlier history, whole and in order, then only harness messages (user, tool), none of
    them the earlier reply (None otherwise, or when the earlier call recorded no reply)."""
    before, after = history(earlier), history(later)
    reply = _with_reply(earlier)[len(before) :]
    if not before or not reply or len(after) <= len(before) or after[: len(before)] != before:
        return None
    added = after[len(before) :]
    if any(key.startswith("assistant\0") for key in added) or any(key in added for key in reply):
        return None
    counts = Counter(f"{key.split(chr(0))[0]} {_quote(key.split(chr(0))[1])}" for key in added)
    named = ", ".join(what + (f" ×{n}" if n > 1 else "") for what, n in counts.most_common(2))
    more = "" if len(counts) <= 2 else f" and {len(counts) - 2} more"
    return f"the same history, {earlier.node_id}'s reply left out, then {named}{more} added"


def _context_kind(
    earlier: Call, later: Call, shared: int, continued: bool, main: bool, grams: _SystemGrams | None = None
) -> tuple[NearMissKind, str]:
    """A break inside the earlier prompt: compaction, resumed, the main conversation, a subagent or a
    side call (or unknown when there is too little to tell), with the evidence in words."""
    if grams is None:
        systems = system_text(earlier), system_text(later)
    else:
        systems = grams.recent(earlier, system_text), grams.recent(later, system_text)
    if systems[0] is None or systems[1] is None:
        if shared >= SHARED_SYSTEM_TOKENS:
            return COMPACTION, f"{shared:,} leading ids shared (no messages recorded to tell more)"
        if main:
            return NEW_CONVERSATION, "the root of the conversation with the most calls"
        if later.has_tools or continued:
            return SUBAGENT, "a conversation of its own: " + ("tools offered" if later.has_tools else "it continues")
        return UNKNOWN, f"only {shared:,} ids shared and no messages recorded"
    same_system = systems[0] == systems[1]
    same_tools = tool_names(earlier) == tool_names(later)
    pasted = 0 if same_system else _pasted(earlier, later, grams)  # a history pasted into a prompt of another job
    if (pasted and not same_system) or not _similar(systems[0], systems[1], grams):
        # a prompt written for another job: a subagent, a side agent (the history pasted in), a title
        if main:
            return NEW_CONVERSATION, "the root of the conversation with the most calls"
        what = "its own system prompt"
        if pasted:
            what += f"; {pasted} of the conversation's messages pasted into a user message"
        if later.has_tools or continued:
            return SUBAGENT, what + ("; tools of its own" if later.has_tools else "; it continues")
        return SIDE_CALL, what + "; a single call without tools"
    rejected = _rejected(earlier, later) if same_tools else None
    if rejected is not None:
        return REJECTED, rejected
    shares = _shares_history(earlier, later)
    gap = _gap(earlier, later)
    lost = _dropped(earlier, later)
    dropped = _dropped_words(lost)
    signs = []
    if not same_system:
        signs.append("the system prompt re-rendered")
    if not same_tools:
        signs.append("the tool set changed")
    if gap is not None and gap >= RESUME_GAP:
        signs.append(f"{gap:,.0f} s after {earlier.node_id} ended")
    if lost and all(key.startswith("user\0") for key in lost):
        signs.append("every reply kept, only the harness's user messages dropped")
    if shares and signs:
        return RESUMED, "; ".join(["the same conversation re-sent", *signs, *([dropped] if dropped else [])])
    if same_system and same_tools and shared > 0:
        what = "the same system prompt and tools"
        if shares and dropped:
            return COMPACTION, f"{what}; {dropped}, the rest of the history kept"
        return COMPACTION, f"{what}; the history replaced or cut" + (f" ({dropped})" if dropped else "")
    if main:
        return NEW_CONVERSATION, "the root of the conversation with the most calls"
    what = "the same system prompt, " + ("other tools" if not same_tools else "no shared history")
    if later.has_tools or continued:
        return SUBAGENT, what
    return SIDE_CALL, what + "; a single call without tools"


# -- replays found from the text: the request carries an earlier call's reply ---------------------


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


@dataclass(frozen=True, slots=True)
class Alignment:
    """The earlier call's sampled ids from the break against the later prompt from the break:
    ``segments`` are the differing spans (earlier start, end; later start, end), ``changed`` how
    many sampled ids are in them, ``synced`` whether the two sides meet again at the sampled end."""

    changed: int
    segments: tuple[tuple[int, int, int, int], ...]
    synced: bool


def align(sampled: np.ndarray, replay: np.ndarray, anchor: int = 3, reach: int = 8) -> Alignment:
    """Walk two tokenizations of (nearly) one text: equal ids step together; at a difference, the
    nearest point where ``anchor`` ids agree again (each side at most ``reach`` ahead) closes the
    differing span. Linear in the sampled length."""
    n, m = sampled.shape[0], replay.shape[0]
    i = j = changed = 0
    segments = []
    while i < n:
        if j < m and sampled[i] == replay[j]:
            i, j = i + 1, j + 1
            continue
        step = None
        for total in range(1, 2 * reach + 1):
            for di in range(max(0, total - reach), min(total, reach) + 1):
                a, b = i + di, j + total - di
                width = min(anchor, n - a)
                if width > 0 and b + width <= m and np.array_equal(sampled[a : a + width], replay[b : b + width]):
                    step = (di, total - di)
                    break
            if step is not None:
                break
        if step is None:
            segments.append((i, n, j, min(m, j + n - i)))
            return Alignment(changed + n - i, tuple(segments), False)
        segments.append((i, i + step[0], j, j + step[1]))
        changed += step[0]
        i, j = i + step[0], j + step[1]
    return Alignment(changed, tuple(segments), True)


def replay_alignment(earlier: Call, later: Call, shared: int) -> Alignment:
    """:func:`align` for a break at ``shared`` inside the earlier call's sampled span (indices are
    into the earlier call's sampled ids and the later prompt)."""
    k = max(0, shared - earlier.n_prompt)
    rest = earlier.sampled_ids[k:]
    replay = prompt_of(later)[shared : shared + 2 * rest.shape[0] + 16]
    found = align(rest, replay)
    segments = tuple((a + k, b + k, c + shared, d + shared) for a, b, c, d in found.segments)
    return Alignment(found.changed, segments, found.synced)


def _replay_kind(
    earlier: Call, later: Call, shared: int, replayed: dict, decoder: Decoder | None
) -> tuple[NearMissKind, bool, str]:
    """A replay of ``earlier``'s reply found from the text: retokenized or rewritten, and why."""
    reply = earlier.response_message or {}
    name = earlier.node_id
    if _raw_arguments(reply) != _raw_arguments(replayed):
        return REWRITTEN, False, f"{name}'s tool-call arguments replayed re-serialised"
    if _reasoning(reply) and not _reasoning(replayed):
        return REWRITTEN, False, f"{name}'s reasoning dropped from the replayed reply"
    content, again = reply.get("content"), replayed.get("content")
    if isinstance(content, str) and isinstance(again, str) and content != again:
        return REWRITTEN, False, f"{name}'s reply text replayed edited (whitespace)"
    text = same_text(decoder, earlier, later, shared)
    if text is False:
        return REWRITTEN, True, f"the request carries {name}'s reply, but the tokenizer decodes the ids to other text"
    found = replay_alignment(earlier, later, shared)
    tail = earlier.n_end - (found.segments[-1][0] + earlier.n_prompt) if found.segments else 0
    if text is None and not found.synced and earlier.finish_reason == "stop" and tail <= STOP_TAIL:
        return REWRITTEN, False, f"{name}'s last sampled ids replaced (a stop string cut or a tag appended)"
    # the same words with or without a tokenizer (tail has none): the messages are the evidence, a
    # tokenizer's agreement is recorded in text_checked
    return RETOKENIZED, text is True, f"its request carries the reply as text; the ids diverge inside {name}'s reply"


def text_replays(calls: list[Call], parents: list[int | None], decoder: Decoder | None = None) -> dict[int, NearMiss]:
    """Calls whose request replays an earlier call's reply (the same text and tool calls) while
    their prompt ids break inside that reply's sampled span, keyed by the later call. One pass:
    replies are indexed by their canonical message, each request looks up its last assistant turn."""
    by_reply: dict[tuple, list[int]] = {}
    found: dict[int, NearMiss] = {}
    replies = _Replies(calls)
    for i, call in enumerate(calls):
        # a request is read only when an earlier reply could be the one it replays (its prompt
        # starts with that call's prompt and breaks inside its sampled span)
        replayed = _last_assistant(call) if call.prompt_ids is not None and replies.may_replay(i) else None
        key = _reply_key(replayed) if replayed is not None else None
        if key is not None and key in by_reply:
            best: tuple[int, int] | None = None
            for e in by_reply[key][-REPLY_CANDIDATES:]:
                if e == parents[i]:
                    best = None  # the reply is the parent's: an exact continuation
                    break
                shared = common_prefix(calls[e], _prompt(call))
                if calls[e].n_prompt <= shared < calls[e].n_end and (best is None or shared > best[0]):
                    best = (shared, e)
            if best is not None:
                shared, e = best
                assert replayed is not None
                kind, checked, evidence = _replay_kind(calls[e], call, shared, replayed, decoder)
                earlier = calls[e]
                kept = min(1.0, max(0.0, (shared - earlier.n_prompt) / earlier.n_sampled)) if earlier.n_sampled else 0.0
                found[i] = NearMiss(i, e, e, i, shared, kept, "sampled", kind, checked, evidence)
        reply = _reply_key(call.response_message) if call.prompt_ids is not None and call.n_sampled else None
        if reply is not None:
            by_reply.setdefault(reply, []).append(i)
            replies.add(i)
    return found


class _Replies:
    """The calls with a reply so far, grouped by their prompt's first ``LEAD`` ids, so that a request
    whose prompt no earlier reply's call could be broken inside (:meth:`may_replay`) is never read.

    A reply can be the one a later request replays (:func:`text_replays`) only when the later prompt
    shares at least the earlier call's whole prompt and breaks inside its sampled span; such a call
    starts with the same ``LEAD`` ids (or has a shorter prompt: those are kept apart and always
    compared). Only the calls of one group are compared, and none when the group is larger than
    ``MOST`` (one long conversation: the request is read, as it would be without the groups)."""

    LEAD = 16
    MOST = 8

    def __init__(self, calls: list[Call]) -> None:
        self.calls = calls
        self.groups: dict[int, list[int]] = {}
        self.short: list[int] = []  # calls whose prompt is under LEAD ids
        self._last: tuple[int, int | None] = (-1, None)  # the last call's lead

    def _lead(self, i: int) -> int | None:
        """A hash of the call's first ``LEAD`` ids (of their values, whatever the array's width):
        equal leads, equal hashes; two leads that share a hash only put more calls in a group."""
        if self._last[0] != i:
            prompt = _prompt(self.calls[i])
            lead = prompt[: self.LEAD].astype(np.int64, copy=False).tobytes() if prompt.shape[0] >= self.LEAD else None
            self._last = (i, None if lead is None else hash(lead))
        return self._last[1]

    def add(self, e: int) -> None:
        lead = self._lead(e)
        if lead is None:
            self.short.append(e)
        else:
            self.groups.setdefault(lead, []).append(e)

    def may_replay(self, i: int) -> bool:
        """Whether some call added before may share its whole prompt with call ``i``'s prompt and
        break inside its sampled span (False: none does, for certain)."""
        prompt = _prompt(self.calls[i])
        lead = self._lead(i)
        group = self.groups.get(lead, ()) if lead is not None else ()
        if len(group) + len(self.short) > self.MOST:
            return True
        for candidates in (self.short, group):
            for e in candidates:
                if _breaks_inside_reply(self.calls[e], prompt):
                    return True
        return False


def _breaks_inside_reply(earlier: Call, prompt: np.ndarray) -> bool:
    """``earlier.n_prompt <= common_prefix(earlier, prompt) < earlier.n_end``, comparing no more
    than it must: a prompt that goes on with all of the earlier call's sampled ids (its own reply
    continued) is passed over before its first part is compared (known from the memory when both
    are views of one id arena from the same start)."""
    mine = _prompt(earlier)
    n_e, n = mine.shape[0], prompt.shape[0]
    if n_e > n or (n_e and prompt[n_e - 1] != mine[n_e - 1]):
        return False  # the prompt does not start with the earlier prompt
    sampled = earlier.sampled_ids
    n_end = n_e + sampled.shape[0]
    if n >= n_end and _first_difference(prompt[n_e:n_end], sampled) == n_end - n_e:
        return False  # it shares the earlier call's end ids, or breaks before its sampled span
    return n_e == 0 or same_memory(prompt, mine) or _first_difference(prompt[:n_e], mine) == n_e


def _key(ids: np.ndarray, wide: bool) -> bytes:
    """Big-endian bytes: their lexicographic order is the order of the id sequences."""
    return ids.astype(">u8" if wide else ">u4").tobytes()


def _end_slice(call: Call, start: int, stop: int) -> np.ndarray:
    """The call's end ids ``[start:stop]`` (prompt then sampled), a view when it lies in one part."""
    prompt = _prompt(call)
    n = prompt.shape[0]
    if stop <= n:
        return prompt[start:stop]
    if start >= n:
        return call.sampled_ids[start - n : stop - n]
    return np.concatenate([prompt[start:], call.sampled_ids[: stop - n]])


def _first_item(pair: tuple[Any, ...]) -> Any:
    return pair[0]


@dataclass
class _Ends:
    """Every call's end ids in sorted order: the call sharing the longest prefix with a prompt sits
    next to where the prompt would sort, so a search looks at a few neighbours, not at every call.

    The order is the one of the end ids cut to ``limit`` tokens (the longest prompt that will be
    looked up: a shared prefix can never be longer than the prompt, so the cut changes no answer),
    as big-endian keys, equal keys in call order. No key is kept: the calls are sorted chunk by
    chunk (``CHUNK`` tokens; only calls tied on every earlier chunk compare the next), so at most
    one chunk of each call is copied at a time, and a prompt finds its place by comparing ids."""

    nodes: list[int]
    wide: bool
    limit: int
    rank: dict[int, int]  # node -> its index in ``nodes``
    BUDGET = 1 << 20  # ids copied at a time while sorting (4 MB, 8 with 64-bit ids)
    CHUNK = 128  # the fewest ids compared per call in one round

    @classmethod
    def of(
        cls,
        calls: list[Call],
        nodes: list[int],
        limit: int,
        budget: int | None = None,
        n_ends: Sequence[int] | None = None,
    ) -> _Ends:
        """The calls ``nodes`` (in call order) sorted by their end ids cut to ``limit`` tokens
        (``n_ends``: every call's ``n_end``, indexed by call, when the caller has them)."""
        wide = any(_prompt(calls[i]).dtype.itemsize > 4 or calls[i].sampled_ids.dtype.itemsize > 4 for i in nodes)
        dtype = ">u8" if wide else ">u4"  # as _key writes them
        n_end: Sequence[int] | dict[int, int] = {i: calls[i].n_end for i in nodes} if n_ends is None else n_ends
        order = list(nodes)
        todo = [(0, len(order), 0)]  # segments of ``order`` tied on every id before ``start``
        while todo:
            lo, hi, start = todo.pop()
            # a segment's calls copy ``budget`` ids in all: the fewer calls tie, the longer the chunk
            stop = min(start + max(cls.CHUNK, (budget or cls.BUDGET) // (hi - lo)), limit)
            keyed = []
            for i in order[lo:hi]:  # _key(_end_slice(calls[i], start, min(stop, n_end[i])), wide), inlined
                call = calls[i]
                prompt = call.prompt_ids
                assert prompt is not None
                n, end = prompt.shape[0], min(stop, n_end[i])
                if end <= n:
                    part = prompt[start:end]
                elif start >= n:
                    part = call.sampled_ids[start - n : end - n]
                else:
                    part = np.concatenate([prompt[start:], call.sampled_ids[: end - n]])
                keyed.append((part.astype(dtype).tobytes(), i))
            keyed.sort(key=_first_item)  # stable: ties stay in call order
            order[lo:hi] = [i for _, i in keyed]
            if stop >= limit:
                continue
            full = (stop - start) * (8 if wide else 4)
            run = 0
            for j in range(1, len(keyed) + 1):
                if j == len(keyed) or keyed[j][0] != keyed[run][0]:
                    if j - run > 1 and len(keyed[run][0]) == full:  # tied on a whole chunk: the next decides
                        todo.append((lo + run, lo + j, stop))
                    run = j
        return cls(order, wide, limit, {node: j for j, node in enumerate(order)})

    def _before(self, call: Call, prompt: np.ndarray) -> bool:
        """Whether the call's end ids, cut to ``limit``, sort before ``prompt`` (as the keys would)."""
        shared = common_prefix(call, prompt)
        if shared == prompt.shape[0]:
            return False  # the prompt is a prefix of the ends (or equal): not before
        if shared >= call.n_end:
            return True  # the ends are a proper prefix of the prompt
        return _key(_end_slice(call, shared, shared + 1), self.wide) < _key(prompt[shared : shared + 1], self.wide)

    def position(self, calls: list[Call], prompt: np.ndarray, hint: int | None = None) -> int:
        """Where ``prompt`` would sort among the ends (bisect_left: before any equal ends).

        ``hint`` is an index known not to sort before the prompt (the call's own ends, which start
        with the prompt): the search gallops back from it, so a prompt next to its own ends costs
        a comparison or two instead of a whole binary search."""
        lo, hi = 0, len(self.nodes)
        if hint is not None:
            hi, step = hint, 1
            while hi - step >= 0 and not self._before(calls[self.nodes[hi - step]], prompt):
                hi -= step
                step *= 2
            lo = max(0, hi - step)  # sorts before the prompt (or is 0)
        while lo < hi:
            mid = (lo + hi) // 2
            if self._before(calls[self.nodes[mid]], prompt):
                lo = mid + 1
            else:
                hi = mid
        return lo


def _best_candidate(
    calls: list[Call], node: int, ends: _Ends, root_of: list[int], order: np.ndarray | None = None
) -> tuple[int, int] | None:
    """The call the node (a root) nearly continued: among the calls that arrived before it, except
    its own descendants (a child that arrived before its parent extends it exactly) and those with
    an identical prompt (retries, matched first), the one whose end ids share the longest prefix
    with the node's prompt (on a tie, the first found). Walking away from the prompt's sorted
    position the shared prefix only shrinks, so each direction stops at the first candidate that
    shares no more than the best found. ``order`` is ``ends.nodes`` as an array: the calls that
    arrived after the node are passed over a block at a time, not one by one."""
    prompt = _prompt(calls[node])
    start = ends.position(calls, prompt, ends.rank.get(node))
    nodes = np.asarray(ends.nodes) if order is None else order
    best: tuple[int, int] | None = None
    for step in (-1, 1):
        for c in _arrived_before(nodes, start, step, node):
            candidate = calls[c]
            if root_of[c] == node or same_ids(_prompt(candidate), prompt):
                continue
            shared = common_prefix(candidate, prompt)
            if best is not None and shared <= best[0]:
                break
            best = (shared, c)
    return best


_FIRST_BLOCK = 16  # neighbours looked at first by the candidate walk (then 4x as many each time)


def _arrived_before(nodes: np.ndarray, start: int, step: int, node: int) -> Iterator[int]:
    """The calls of ``nodes`` below ``node``, walking from ``start`` (down from ``start - 1`` when
    ``step`` is -1, up from ``start`` when it is 1), in walk order; blocks grow 4x."""
    size = _FIRST_BLOCK
    if step < 0:
        hi = start
        while hi > 0:
            lo = max(0, hi - size)
            block = nodes[lo:hi]
            yield from block[block < node][::-1].tolist()
            hi, size = lo, size * 4
    else:
        lo, end = start, nodes.shape[0]
        while lo < end:
            hi = min(end, lo + size)
            block = nodes[lo:hi]
            yield from block[block < node].tolist()
            lo, size = hi, size * 4


def _fingerprint(ids: np.ndarray) -> tuple[int, int]:
    """(length, hash of the first, middle and last 16 ids): equal prompts have equal prints."""
    n, mid = len(ids), len(ids) // 2
    sample = np.concatenate([ids[:16], ids[max(0, mid - 8) : mid + 8], ids[-16:]]).astype(np.int64, copy=False)
    return n, hash(sample.tobytes())


class _SamePrompt:
    """Calls grouped by an exact prompt key, so "the first call with the same prompt" is a lookup:
    a parent with N children (or N identical re-sends) costs O(N), not O(N^2).

    The key is the fingerprint (length and 48 sampled ids, cheap on long prompts); a bucket that
    grows past a few calls is split by the whole prompt's bytes, so distinct prompts that share a
    fingerprint never make a lookup walk the bucket."""

    SPLIT = 8

    def __init__(
        self, calls: list[Call], scope: list[int | None] | None = None, prints: dict[int, tuple] | None = None
    ) -> None:
        self.calls = calls
        self.scope = scope  # group only within the same parent (None: across all calls)
        self.prints = {} if prints is None else prints  # node -> fingerprint, shared between groupings
        self.buckets: dict[tuple, list[int]] = {}
        self.exact: dict[tuple, dict[bytes, list[int]]] = {}

    def _print(self, node: int) -> tuple:
        fingerprint = self.prints.get(node)
        if fingerprint is None:
            fingerprint = self.prints[node] = _fingerprint(_prompt(self.calls[node]))
        return (None if self.scope is None else self.scope[node], *fingerprint)

    def add(self, node: int) -> None:
        key = self._print(node)
        bucket = self.buckets.setdefault(key, [])
        bucket.append(node)
        if key in self.exact:
            self.exact[key].setdefault(_prompt(self.calls[node]).tobytes(), []).append(node)
        elif len(bucket) > self.SPLIT:
            split: dict[bytes, list[int]] = {}
            for member in bucket:
                split.setdefault(_prompt(self.calls[member]).tobytes(), []).append(member)
            self.exact[key] = split

    def members(self, node: int) -> list[int]:
        """Every added call whose prompt equals the node's, in the order they were added."""
        key = self._print(node)
        prompt = _prompt(self.calls[node])
        if key in self.exact:
            return self.exact[key].get(prompt.tobytes(), [])
        return [m for m in self.buckets.get(key, ()) if same_ids(_prompt(self.calls[m]), prompt)]

    def first(self, node: int, accept=lambda m: True) -> int | None:
        """The first added call (other than the node) with the same prompt that ``accept`` takes."""
        for member in self.members(node):
            if member != node and accept(member):
                return member
        return None


def _last_before(topology, start: int, before: int, reach: int = 20_000) -> int:
    """The call that arrived last before ``before`` in the subtree of ``start`` (``start`` itself
    when nothing in it arrived earlier than ``before``), looking at no more than ``reach`` calls."""
    best, stack = start, [start]
    while stack and reach > 0:
        node = stack.pop()
        reach -= 1
        if best < node < before:
            best = node
        stack.extend(topology.children[node])
    return best


def _prompt_groups(
    calls: list[Call], parents: list[int | None], explained: list[int], n_prompts: list[int] | None = None
) -> tuple[_SamePrompt, _SamePrompt]:
    """The calls grouped by identical prompt: across all calls (``same``: looked up only for the
    ``explained`` roots) and among one parent's children or the roots (``siblings``). Only calls
    that can be a twin are added, since an identical prompt has the same length: to ``same`` the
    calls of a length some explained root has, to ``siblings`` the calls that share their parent and
    length with another call. The lookups answer what they answer with every call added
    (tests/analysis/test_near_miss_fast.py), at a fraction of the fingerprints. ``n_prompts``: every call's
    ``n_prompt``, when the caller has them."""
    n = [c.n_prompt for c in calls] if n_prompts is None else n_prompts
    prompted = [i for i, k in enumerate(n) if k]  # (a call without prompt ids has n_prompt 0)
    lengths = {n[r] for r in explained}
    same = _SamePrompt(calls)
    for i in prompted:
        if n[i] in lengths:
            same.add(i)
    siblings = _SamePrompt(calls, scope=parents, prints=same.prints)
    scoped = Counter([(parents[i], n[i]) for i in prompted])
    for i in prompted:
        if scoped[parents[i], n[i]] > 1:
            siblings.add(i)
    return same, siblings


def near_misses(calls: list[Call], topology, decoder: Decoder | None = None) -> dict[int, NearMiss]:
    """Every root after the first, every discarded call, every later child of a fork and every
    call whose request replays an earlier reply with other ids, explained (keyed by that call).

    ``topology`` is the exact graph (graph/core/topology.py); ``decoder``, when it is a tokenizer,
    lets a break be recognised as a retokenization from the ids alone (with messages the text
    already shows it)."""
    parents, children, discarded = topology.parents, topology.children, topology.discarded
    found: dict[int, NearMiss] = {}
    # every call's prompt and end length, read once (Call's properties cost more than a list's items)
    n_prompts = [0 if c.prompt_ids is None else c.prompt_ids.shape[0] for c in calls]
    n_ends = [0 if c.prompt_ids is None else c.prompt_ids.shape[0] + c.sampled_ids.shape[0] for c in calls]
    roots = [i for i, p in enumerate(parents) if p is None and calls[i].prompt_ids is not None]
    explained = [r for r in roots[1:] if r not in discarded and n_prompts[r]]
    # calls by prompt length and a sample of their ids: an identical prompt is looked for only
    # among these (a harness that compacts into same-sized summaries makes every root the same length)
    same, siblings = _prompt_groups(calls, parents, explained, n_prompts)
    size = Counter(topology.root_of)
    main = max(topology.roots, key=lambda r: (size[r], -r)) if topology.roots else None
    grams = _SystemGrams()  # each distinct system text's 3-grams, computed once for the whole pass
    pending = []
    for node in explained:
        # an identical earlier prompt that no call continued (a discarded one is explained by the
        # discard rule, from its side)
        twin = same.first(node, lambda i, node=node: i < node and discarded.get(i) != node)
        if twin is not None:
            kind, where, kept, _, evidence = classify_with_evidence(calls[twin], calls[node], calls[node].n_prompt)
            found[node] = NearMiss(node, twin, twin, node, calls[node].n_prompt, kept, where, kind, False, evidence)
        else:
            pending.append(node)
    limit = max((n_prompts[r] for r in pending), default=0)
    tokened = [i for i, n in enumerate(n_ends) if n > 0]  # (a call without prompt ids has n_end 0)
    ends = _Ends.of(calls, tokened, limit, n_ends=n_ends) if pending else None
    order = np.array(ends.nodes, dtype=np.int64) if ends is not None else None
    chosen = []
    for node in pending:
        assert ends is not None  # built whenever something is pending
        best = _best_candidate(calls, node, ends, topology.root_of, order)
        if best is not None:
            chosen.append((best[1], node, best[0]))
    # classified one earlier call's roots after the other (its messages read once: a kind depends on
    # its two calls alone, never on the order), entered in the order of the roots
    classified = {}
    for candidate, node, shared in sorted(chosen, key=_first_item):
        classified[node] = classify_with_evidence(
            calls[candidate], calls[node], shared, decoder, bool(children[node]), node == main, grams
        )
    for candidate, node, shared in chosen:
        kind, where, kept, checked, evidence = classified[node]
        found[node] = NearMiss(node, candidate, candidate, node, shared, kept, where, kind, checked, evidence)
    first = roots[0] if roots else None
    if first is not None and main is not None and first != main and first not in discarded and calls[main].n_prompt:
        # the first call is not the main conversation (a title call that arrived first): name it
        # against the main conversation's first call
        shared = common_prefix(calls[main], _prompt(calls[first]))
        kind, where, kept, checked, evidence = classify_with_evidence(
            calls[main], calls[first], shared, decoder, bool(children[first]), grams=grams
        )
        found[first] = NearMiss(first, main, main, first, shared, kept, where, kind, checked, evidence)
    for node, sibling in discarded.items():
        if calls[node].prompt_ids is None:
            continue
        if calls[sibling].prompt_ids is None or not same_ids(_prompt(calls[sibling]), _prompt(calls[node])):
            twin = siblings.first(node) if calls[node].n_prompt else None
            if twin is not None:
                sibling = twin
        if calls[sibling].prompt_ids is None:
            continue
        shared = common_prefix(calls[node], _prompt(calls[sibling]))
        kind, where, kept, checked, evidence = classify_with_evidence(
            calls[node], calls[sibling], shared, decoder, bool(children[sibling]), grams=grams
        )
        found[node] = NearMiss(node, sibling, node, sibling, shared, kept, where, kind, checked, evidence)
        if kind == RETRY and parents[sibling] is None and sibling not in found and sibling > node:
            # the re-send is a root of its own (qwen-code re-sending its first call with a larger
            # max_tokens): it gets the retry from its side too, never "shares no token"
            found[sibling] = NearMiss(sibling, node, node, sibling, shared, kept, where, kind, checked, evidence)
    unfinished = {m for group in topology.unfinished for m in group}
    for group in topology.unfinished:  # re-sends nobody continued (qwen-code after a length cut)
        members = set(group)
        for node in group[1:]:
            twin = None
            if node not in found and calls[node].n_prompt:
                twin = siblings.first(node, lambda m, node=node, members=members: m < node and m in members)
            if twin is not None:
                kind, where, kept, _, evidence = classify_with_evidence(calls[twin], calls[node], calls[node].n_prompt)
                found[node] = NearMiss(node, twin, twin, node, calls[node].n_prompt, kept, where, kind, False, evidence)
    for fork in topology.forks:  # why did the second branch start? the same rules, against the branch before it
        branches = sorted(children[fork])
        for k, child in enumerate(branches[1:], 1):
            if child in found or child in discarded or calls[child].prompt_ids is None:
                continue
            if any(m.other == child or m.later == child for m in (found.get(b) for b in branches[:k]) if m):
                continue  # already the other end of a sibling's near miss
            earlier = _last_before(topology, branches[k - 1], child)
            shared = common_prefix(calls[earlier], _prompt(calls[child]))
            kind, where, kept, checked, evidence = classify_with_evidence(
                calls[earlier], calls[child], shared, decoder, bool(children[child]), grams=grams
            )
            if child in unfinished and kind != REJECTED:
                continue  # an attempt nobody continued is named only when its messages show why
            found[child] = NearMiss(child, earlier, earlier, child, shared, kept, where, kind, checked, evidence)
    by_text: set[int] = set()
    for node, miss in text_replays(calls, parents, decoder).items():
        # the request shows which reply it replays: that outranks a guess from the ids alone. A
        # discarded earlier call is explained by it from its own side (why was it discarded? the
        # later call replayed it); otherwise the later call carries it.
        earlier = miss.earlier
        if earlier in discarded:
            if earlier not in by_text:
                found[earlier] = NearMiss(earlier, node, earlier, node, miss.common_prefix, miss.kept, miss.where,
                                          miss.kind, miss.text_checked, miss.evidence)  # fmt: skip
                by_text.add(earlier)
            continue
        current = found.get(node)
        if current is not None and current.kind == RETRY and current.evidence == "the identical prompt ids":
            continue
        if node in by_text:
            continue
        found[node] = miss
        by_text.add(node)
    return found


def replayed(misses: dict[int, NearMiss], kinds: tuple[str, ...] = BROKEN_REPLAYS) -> set[int]:
    """Both ends of every broken replay (the reply replayed and the call replaying it): calls
    the harness continued in text, so neither an unfinished attempt nor discarded by a retry."""
    return {end for m in misses.values() if m.kind in kinds for end in (m.earlier, m.later)}


def replay_chains(calls: list[Call], misses: dict[int, NearMiss]) -> list[list[int]]:
    """Re-tokenized replays linked end to end (each replaying the reply of the one before): one
    conversation each, in order, longest first."""
    after: dict[int, int] = {}
    for m in misses.values():
        if m.kind == RETOKENIZED and m.earlier < m.later:
            after.setdefault(m.earlier, m.later)
    later = set(after.values())
    chains = []
    for start in sorted(after):
        if start in later:
            continue
        chain, seen = [start], {start}
        while chain[-1] in after and after[chain[-1]] not in seen:
            chain.append(after[chain[-1]])
            seen.add(chain[-1])
        chains.append(chain)
    return sorted(chains, key=lambda c: (-len(c), c[0]))


def rewrite_finding(calls: list[Call], found: dict[int, NearMiss], discarded: dict[int, int]) -> Finding | None:
    """WARN ``history_rewritten``: how many calls replayed an edited assistant turn, and how many
    sampled tokens that left only in discarded rows (never trained as the agent's work)."""
    rewritten = [m for m in found.values() if m.kind == REWRITTEN]
    if not rewritten:
        return None
    lost = sum(calls[m.earlier].n_sampled for m in rewritten if m.earlier in discarded)
    roots = sum(1 for m in rewritten if m.node == m.later)
    return Finding(
        WARN,
        "history_rewritten",
        f"{len(rewritten)} broken replays: calls replayed a rewritten reply of the model ({roots} became new "
        f"roots, {len(rewritten) - roots} made the original call look discarded); "
        f"{lost:,} sampled tokens are left only in discarded rows",
        node_id=calls[rewritten[0].node].node_id,
    )


def retokenized_finding(calls: list[Call], found: dict[int, NearMiss]) -> Finding | None:
    """``retokenized_replay``: the harness replayed the model's text and the engine tokenized it
    again with other ids (train/inference skew). WARN; FATAL when a replay changes the ids of more
    than ``RETOKENIZED_FATAL_SHARE`` of the reply's sampled tokens."""
    misses = sorted((m for m in found.values() if m.kind == RETOKENIZED), key=lambda m: m.later)
    if not misses:
        return None
    changed = total = 0
    worst = 0.0
    for m in misses:
        earlier = calls[m.earlier]
        n = earlier.n_sampled
        c = replay_alignment(earlier, calls[m.later], m.common_prefix).changed if m.where == "sampled" else 0
        changed, total = changed + c, total + n
        worst = max(worst, c / n if n else 0.0)
    chains = replay_chains(calls, found)
    longest = f"; the longest chain has {len(chains[0])} calls" if chains and len(chains[0]) > 2 else ""
    level = FATAL if worst > RETOKENIZED_FATAL_SHARE else WARN
    first = misses[0]
    return Finding(
        level,
        "retokenized_replay",
        f"{len(misses)} calls replay the model's own reply as text that the engine tokenized again with other "
        f"ids: {changed:,} of the {total:,} replayed sampled tokens change ids (first: {calls[first.later].node_id} "
        f"re-tokenizes {calls[first.earlier].node_id}'s reply at token {first.common_prefix:,}){longest}",
        node_id=calls[first.later].node_id,
    )


def near_miss_json(calls: list[Call], miss: NearMiss) -> dict:
    """The ``near_miss`` object of ``inspect --json`` (docs/cli.md)."""
    return {
        "node_id": calls[miss.other].node_id,
        "common_prefix": miss.common_prefix,
        "kept": round(miss.kept, 4),
        "kind": miss.kind,
        "where": miss.where,
        "text_checked": miss.text_checked,
        "earlier_id": calls[miss.earlier].node_id,
        "later_id": calls[miss.later].node_id,
        "evidence": miss.evidence,
        "why": describe(calls, miss),
    }


LABELS = {
    RETRY: "retry",
    RETOKENIZED: "broken replay (re-tokenized)",
    REWRITTEN: "broken replay (rewritten)",
    REJECTED: "rejected",
    COMPACTION: "compaction",
    RESUMED: "resumed",
    NEW_CONVERSATION: "new conversation",
    SUBAGENT: "subagent",
    SIDE_CALL: "side call",
    UNKNOWN: "unknown cause",
}


def describe(calls: list[Call], miss: NearMiss) -> str:
    """The one sentence every surface prints for a near miss (``tail``, ``inspect --json``'s
    ``why``, ``explain``, the app): its kind, worded from the later call's side, and the evidence."""
    e, l_ = calls[miss.earlier], calls[miss.later]
    earlier, later, at = e.node_id, l_.node_id, miss.common_prefix
    kept = max(0, min(e.n_sampled, at - e.n_prompt))
    if miss.kind == RETRY:
        first, second = sorted((miss.earlier, miss.later))  # the one that arrived later re-sent it
        text = f"{calls[second].node_id} re-sends {calls[first].node_id}'s prompt"
        if miss.node == miss.earlier:
            text += f"; {earlier} is discarded"
    elif miss.kind == RETOKENIZED:
        text = f"{later} re-tokenizes {earlier}'s reply: the same text, other ids from token {at:,}"
        if miss.where == "sampled":
            found = replay_alignment(e, l_, at)
            text += f" ({found.changed:,} of {e.n_sampled:,} sampled tokens change ids"
            if found.segments:
                a, b, c, d = found.segments[0]
                ids = prompt_of(l_)
                sampled = "|".join(str(t) for t in e.sampled_ids[a : max(b, a + 1)][:8].tolist())
                replayed = "|".join(str(t) for t in ids[c : max(d, c + 1)][:8].tolist())
                text += f"; ids {sampled} became {replayed}"
            text += ")"
    elif miss.kind == REWRITTEN:
        text = (
            f"{later} replays {earlier}'s reply cut at token {at:,}"
            if miss.where == "sampled"
            else f"{later} replays {earlier}'s reply, then breaks at token {at:,}"
        ) + f" ({kept:,} of {e.n_sampled:,} sampled tokens kept)"
    elif miss.kind == REJECTED:
        text = f"{later} asks again without {earlier}'s reply"
    elif miss.kind == COMPACTION:
        text = f"{later} compacts {earlier}'s history: {at:,} tokens shared, then replaced"
    elif miss.kind == RESUMED:
        text = f"{later} resumes {earlier}'s conversation ({at:,} tokens shared)"
    elif miss.kind == NEW_CONVERSATION:
        text = f"{later} begins the main conversation after {earlier}"
    elif miss.kind == SUBAGENT:
        text = f"{later} starts a conversation of its own beside {earlier}'s"
    elif miss.kind == SIDE_CALL:
        text = f"{later} is a single call of its own beside {earlier}'s conversation"
    else:
        text = f"{later} breaks from {earlier} after {at:,} tokens"
    evidence = f" [{miss.evidence}]" if miss.evidence else ""
    return f"{LABELS.get(miss.kind, miss.kind)}: {text}{evidence}"
