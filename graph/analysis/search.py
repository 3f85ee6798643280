"""Text search over a rollout: request messages, response, decoded sampled and context spans.

Where it sits: an analysis (graph -> analyses), called by ``rollout-graph search``
(rollout_graph.cli.search) and the app's search box, which builds the index in the background. A
pattern runs in a capped child process (rollout_graph.analysis.patterns; docs/limits.md, "Search patterns").

Entry points: :class:`Query` (plain text, ``ignore_case`` or a regular expression), :class:`SearchIndex`
(a rollout's texts, prepared once for many searches), :func:`search` (one :class:`Hit` per call and
place: ``message``, ``response``, ``sampled``, ``context``), :func:`first_entered` (the earliest call in
graph order, which is arrival order, whose request holds the text), :func:`snippet`, :func:`strip_position`.

Why an index: a request repeats the conversation so far, so each distinct message text is searched once
and its matches mapped back to the calls holding it. It keeps to a byte budget (:data:`DEFAULT_MAX_BYTES`,
``ROLLOUT_GRAPH_SEARCH_MAX_BYTES``; :meth:`SearchIndex.partial_note` names what a search skipped).
What a hit holds: docs/cli.md, "Search"; the budget: docs/limits.md, "The search index".
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rollout_graph.analysis import patterns
from rollout_graph.analysis.decode import Decoder
from rollout_graph.analysis.patterns import PatternLimits
from rollout_graph.core.rollout import Rollout

MESSAGE = "message"
RESPONSE = "response"
SAMPLED = "sampled"
CONTEXT = "context"
WHERES = (MESSAGE, RESPONSE, SAMPLED, CONTEXT)

SNIPPET = 40  # characters either side of a match
_SKIPPED_KEYS = frozenset({"role", "type", "id", "tool_call_id", "call_id", "tool_use_id"})
_PLAIN_KEYS = frozenset({"role", "content"})

ENV_MAX = "ROLLOUT_GRAPH_SEARCH_MAX_BYTES"
DEFAULT_MAX_BYTES = 256 << 20  # the index's own bytes per rollout (docs/limits.md)
_ARRAY = sys.getsizeof(np.empty(0, dtype=np.uint8))  # an array object's own bytes, without its data
_SLOT = 8  # a reference in a list


class SearchError(ValueError):
    """The query cannot be searched for (an empty text, or a regular expression that does not compile)."""


class SearchLimitError(SearchError):
    """A search's pattern ran over its time or memory limit (the message names it); nothing was found."""


@dataclass(frozen=True, slots=True)
class Hit:
    """Where one call holds the text: the first match in that place and how many there are."""

    session_id: str
    node_id: str
    index: int  # arrival index of the call
    where: str
    char_offset: int  # in the message (or response, or decoded span) text
    count: int
    snippet: str
    message_index: int | None = None  # ``message``: which request message
    role: str | None = None  # ``message``: that message's role (``tool`` for a tool result)
    token_index: int | None = None  # ``sampled``: index in the sampled span; ``context``: prompt position

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (docs/cli.md): keys that do not apply to this ``where`` are left out."""
        out: dict[str, Any] = {
            "session_id": self.session_id,
            "node_id": self.node_id,
            "index": self.index,
            "where": self.where,
        }
        if self.message_index is not None:
            out["message_index"] = self.message_index
            out["role"] = self.role
        if self.token_index is not None:
            out["token_index"] = self.token_index
        out.update(char_offset=self.char_offset, count=self.count, snippet=self.snippet)
        return out


@dataclass(frozen=True, slots=True)
class Query:
    """A compiled query: plain text (``str.find``) unless ``regex`` or ``ignore_case``.

    A pattern (a regular expression, or text to match regardless of case outside ASCII) is never
    matched in this process: :mod:`rollout_graph.analysis.patterns` runs it in a capped child that
    is killed at ``limits.seconds`` (docs/limits.md, "Search patterns").
    """

    text: str
    regex: bool = False
    ignore_case: bool = False
    pattern: re.Pattern[str] | None = field(default=None, compare=False)
    # ``ignore_case`` plain ASCII text: the lower-cased query, searched for with ``str.find`` in
    # the lower-cased text wherever that text is ASCII too (the pattern elsewhere)
    folded: str | None = field(default=None, compare=False)
    limits: PatternLimits | None = field(default=None, compare=False)  # None: from the environment

    @classmethod
    def compile(
        cls, text: str, regex: bool = False, ignore_case: bool = False, limits: PatternLimits | None = None
    ) -> Query:
        """Validate and compile; raises :class:`SearchError` for an empty text or a bad pattern
        (one that does not compile, is longer than ``patterns.MAX_PATTERN_CHARS``, or matches the
        empty string), and :class:`SearchLimitError` when telling that took over the limit."""
        if not text:
            raise SearchError("the search text is empty")
        pattern = None
        folded = text.lower() if ignore_case and not regex and text.isascii() else None
        if regex or ignore_case:
            source = text if regex else re.escape(text)
            try:
                if folded is None:
                    patterns.check_length(source)
                # compiling is linear in the pattern's length (bounded above): it stays here
                pattern = re.compile(source, re.IGNORECASE if ignore_case else 0)
            except patterns.PatternError as exc:
                raise SearchError(str(exc)) from exc
            except (re.error, RecursionError, OverflowError) as exc:
                what = "it nests too deeply" if isinstance(exc, RecursionError) else str(exc)
                raise SearchError(f"bad regular expression {text!r}: {what}") from exc
            # matching, even the empty string, can take exponential time: in the child
            if regex and _run(pattern, [], "empty", limits)[0]:
                raise SearchError(f"the regular expression {text!r} matches the empty string")
        return cls(text, regex, ignore_case, pattern, folded, limits)

    def _plain(self, text: str) -> tuple[str, str] | None:
        """(text, query) to search with ``str.find``, or None for the pattern."""
        if self.pattern is None:
            return text, self.text
        if self.folded is not None and text.isascii():
            # ASCII text, ASCII literal: a case-insensitive match is exactly a match of the
            # lower-cased strings, at the same offsets (lower() keeps an ASCII text's length)
            return text.lower(), self.folded
        return None

    def first(self, text: str) -> tuple[int, int] | None:
        """(start, end) of the first match in ``text``."""
        return self.scan(text)[0]

    def count(self, text: str) -> int:
        """How many non-overlapping matches ``text`` holds."""
        return self.scan(text)[1]

    def scan(self, text: str) -> tuple[tuple[int, int] | None, int]:
        """The first match's (start, end) and how many matches there are (0 and None: none),
        with one look at the text (and one lower-casing) for both."""
        return self.scan_all([text])[0]

    def scan_all(self, texts: Sequence[str]) -> list[tuple[tuple[int, int] | None, int]]:
        """:meth:`scan` of each text; the texts the pattern must look at go to one child process.

        Raises:
            SearchLimitError: the pattern ran over its time or memory limit.
        """
        out: list[tuple[tuple[int, int] | None, int]] = []
        left: list[int] = []  # positions in ``texts`` for the pattern
        for k, text in enumerate(texts):
            plain = self._plain(text)
            if plain is None:
                left.append(k)
                out.append((None, 0))
                continue
            haystack, needle = plain
            at = haystack.find(needle)
            out.append((None, 0) if at < 0 else ((at, at + len(needle)), haystack.count(needle, at)))
        if left:
            assert self.pattern is not None
            answer = _run(self.pattern, [texts[k] for k in left], "scan", self.limits)
            for j, k in enumerate(left):
                start, end, count = answer[3 * j : 3 * j + 3]
                if start >= 0:
                    out[k] = ((start, end), count)
        return out

    def matches(self, text: str) -> Iterator[tuple[int, int]]:
        """Every match's (start, end), left to right, not overlapping."""
        plain = self._plain(text)
        if plain is not None:
            haystack, needle = plain
            at = haystack.find(needle)
            while at >= 0:
                yield at, at + len(needle)
                at = haystack.find(needle, at + len(needle))
        else:
            assert self.pattern is not None
            answer = _run(self.pattern, [text], "spans", self.limits)
            for j in range(int(answer[0])):
                yield int(answer[1 + 2 * j]), int(answer[2 + 2 * j])


def _run(pattern: re.Pattern[str], texts: Sequence[str], mode: str, limits: PatternLimits | None) -> Any:
    try:
        return patterns.run(pattern.pattern, pattern.flags, texts, mode, limits)
    except patterns.PatternLimitError as exc:
        raise SearchLimitError(str(exc)) from exc
    except patterns.PatternError as exc:
        raise SearchError(str(exc)) from exc


def _strings(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in _SKIPPED_KEYS:
                _strings(item, out)
    elif isinstance(value, list):
        for item in value:
            _strings(item, out)


def message_text(message: Any) -> str:
    """Every string a message carries (content, content parts, tool results, tool-call names and
    arguments, reasoning), newline-joined; the role, part types and ids are left out."""
    if type(message) is dict and type(message.get("content")) is str and message.keys() <= _PLAIN_KEYS:
        return message["content"]  # the common case, without the walk
    out: list[str] = []
    _strings(message, out)
    return "\n".join(out)


def snippet(text: str, start: int, end: int, width: int = SNIPPET) -> str:
    """The match with about ``width`` characters either side, on one line, ``…`` where cut. A cut
    inside a word moves to that word's edge (the snippet starts at the word after it and ends at the
    word before it), never into the match and at most ``width // 2`` characters: a longer word
    (a path, a hash) is cut where it falls rather than leaving the match without context."""
    lo, hi = max(0, start - width), min(len(text), end + width)
    reach = width // 2
    if 0 < lo < start and not text[lo - 1].isspace() and not text[lo].isspace():
        space = next((k for k in range(lo, min(start, lo + reach)) if text[k].isspace()), None)
        if space is not None:
            lo = space + 1  # the first whole word
    if end < hi < len(text) and not text[hi - 1].isspace() and not text[hi].isspace():
        space = next((k for k in range(hi - 1, max(end, hi - 1 - reach) - 1, -1) if text[k].isspace()), None)
        if space is not None:
            hi = space  # the last whole word
    body = " ".join(text[lo:hi].split())
    return ("…" if lo > 0 else "") + body + ("…" if hi < len(text) else "")


@dataclass
class _Messages:
    """Every distinct message text of the rollout once, and per call which texts its messages are.

    A request repeats the conversation so far; searching each distinct text once and mapping the
    matches back to calls is what keeps a 1,000-call rollout's search well under a second. Over
    the index's budget ``per_call`` and ``roles`` cover the first calls only.
    """

    texts: list[str]  # distinct message texts
    per_call: list[np.ndarray]  # per call: the index in ``texts`` of each of its messages
    roles: list[list[str]]  # per call: each message's role


STEP = 50  # calls between two calls of a build's ``between`` hook
PLACES = {
    MESSAGE: "request messages",
    RESPONSE: "responses",
    SAMPLED: "decoded sampled spans",
    CONTEXT: "decoded context spans",
}


def max_bytes_from_env() -> int:
    """``ROLLOUT_GRAPH_SEARCH_MAX_BYTES`` (bytes, ``K``/``M``/``G`` suffixes), else :data:`DEFAULT_MAX_BYTES`;
    a malformed value is ignored."""
    raw = os.environ.get(ENV_MAX, "").strip().upper()
    if not raw:
        return DEFAULT_MAX_BYTES
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(raw[-1], 1)
    digits = raw[:-1] if scale > 1 else raw
    return int(digits) * scale if digits.isdigit() else DEFAULT_MAX_BYTES


def _lengths(pieces: list[str]) -> np.ndarray:
    """Each piece's length, in the narrowest unsigned type that holds the longest."""
    return _narrowest(np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces)))


def _decoded(decoder: Decoder, ids: np.ndarray) -> tuple[str, np.ndarray]:
    """A span's text and each token's length (as :func:`_lengths`): by the decoder's
    ``joined_pieces`` when it has one (TraceTextDecoder: a table lookup), else by its pieces."""
    joined = getattr(decoder, "joined_pieces", None)
    if joined is not None:
        text, lengths = joined(ids)
        return text, _narrowest(lengths)
    pieces = decoder.pieces(ids)
    return "".join(pieces), _lengths(pieces)


def _narrowest(lengths: np.ndarray) -> np.ndarray:
    longest = int(lengths.max()) if lengths.shape[0] else 0
    for dtype in (np.uint8, np.uint16, np.uint32):
        if longest <= np.iinfo(dtype).max:
            return lengths.astype(dtype)
    return lengths


def _own(text: str, holder: Any) -> int:
    """What keeping ``text`` costs the index: nothing when it is ``holder``'s own ``content``
    (the rollout holds it anyway) or empty."""
    if not text or (type(holder) is dict and holder.get("content") is text):
        return 0
    return sys.getsizeof(text)


class SearchIndex:
    """A rollout's text, prepared once for many searches (messages at once, decoded spans on demand).

    ``max_bytes`` (default :func:`max_bytes_from_env`) bounds what the index itself keeps; each
    place then covers the calls, in arrival order, that fit (:attr:`covered`, :meth:`partial_note`).
    """

    def __init__(self, rollout: Rollout, decoder: Decoder | None = None, max_bytes: int | None = None) -> None:
        self.rollout = rollout
        self.decoder = decoder
        self.max_bytes = max_bytes_from_env() if max_bytes is None else max_bytes
        self.nbytes = 0  # what the index keeps so far (texts it made, arrays, list slots)
        self.covered: dict[str, int] = {}  # per place built: how many calls (the first ones) it covers
        self._messages: _Messages | None = None
        self._responses: list[str] | None = None
        self._spans: dict[str, list[tuple[str, np.ndarray]]] = {}

    def _fits(self, cost: int) -> bool:
        if self.nbytes + cost > self.max_bytes:
            return False
        self.nbytes += cost
        return True

    def messages(self, between: Callable[[], None] | None = None) -> _Messages:
        """The distinct message texts and which of them each call's request holds. ``between``,
        when given, is called every :data:`STEP` calls while they are built (a background build
        pauses there while a page runs)."""
        if self._messages is None:
            ids: dict[str, int] = {}
            per_call: list[np.ndarray] = []
            roles: list[list[str]] = []
            calls = self.rollout.calls
            for k, call in enumerate(calls):
                if between is not None and k % STEP == 0:
                    between()
                messages = call.request_messages or ()
                texts = [message_text(m) for m in messages]
                cost = _ARRAY + 8 * len(texts) + sys.getsizeof(texts) + 2 * _SLOT
                new: set[str] = set()
                for m, text in zip(messages, texts, strict=True):
                    if text not in ids and text not in new:
                        new.add(text)
                        cost += _own(text, m) + 100  # its key in the map of texts, its slot in the list
                if not self._fits(cost):
                    break
                per_call.append(
                    np.fromiter((ids.setdefault(t, len(ids)) for t in texts), dtype=np.int64, count=len(texts))
                )
                roles.append([str(m.get("role", "")) if isinstance(m, dict) else "" for m in messages])
            self.covered[MESSAGE] = len(per_call)
            self._messages = _Messages(list(ids), per_call, roles)
        return self._messages

    def responses(self) -> list[str]:
        """Per call, its response message's text (empty without one); over the budget, the first calls'."""
        if self._responses is None:
            out: list[str] = []
            for c in self.rollout.calls:
                message = c.response_message
                text = message_text(message) if message is not None else ""
                if not self._fits(_SLOT + _own(text, message)):
                    break
                out.append(text)
            self.covered[RESPONSE] = len(out)
            self._responses = out
        return self._responses

    def prepare(self, between: Callable[[], None] | None = None) -> None:
        """Build everything a search reads now instead of at the first search (the app does this
        on a background thread after the first paint); the same texts and spans either way."""
        self.messages(between)
        self.responses()
        if self.decoder is not None:
            for where in (SAMPLED, CONTEXT):
                self.span(where, between)

    def span(self, where: str, between: Callable[[], None] | None = None) -> list[tuple[str, np.ndarray]]:
        """Per call: the decoded span and the length of each token's text in it (their running sum
        is each token's end offset; ``between``: as for :meth:`messages`). Over the budget, the
        first calls' spans."""
        if where not in self._spans:
            if self.decoder is None:
                raise SearchError("token search needs a decoder")
            built: list[tuple[str, np.ndarray]] = []
            empty = ("", np.empty(0, dtype=np.uint8))
            for i, call in enumerate(self.rollout.calls):
                if between is not None and i % STEP == 0:
                    between()
                ids: np.ndarray | None = call.sampled_ids
                if where == CONTEXT:
                    ids = call.prompt_ids[self.rollout.context_start(i) :] if call.prompt_ids is not None else None
                n = 0 if ids is None else int(ids.shape[0])
                # at least a byte a token: a span that cannot fit is not decoded at all
                if self.nbytes + _SLOT + n + (_ARRAY if n else 0) > self.max_bytes:
                    break
                if ids is None or not n:
                    self.nbytes += _SLOT
                    built.append(empty)
                    continue
                text, lengths = _decoded(self.decoder, ids)
                if not self._fits(_SLOT + 64 + sys.getsizeof(text) + _ARRAY + lengths.nbytes):
                    break
                built.append((text, lengths))
            self.covered[where] = len(built)
            self._spans[where] = built
        return self._spans[where]

    def partial_note(self, wheres: tuple[str, ...] = WHERES) -> str | None:
        """What a search of ``wheres`` did not look at because the index's budget was full, in
        words (None when it looked at every call); the places not built yet are not judged."""
        n = len(self.rollout.calls)
        left: dict[int, list[str]] = {}  # first call left out -> the places it is left out of
        for where in WHERES:
            k = self.covered.get(where, n) if where in wheres else n
            if k < n:
                left.setdefault(k, []).append(PLACES[where])
        if not left:
            return None

        def calls(k: int) -> str:
            if k == 0:
                return "every call"
            return f"call #{k:,}" if k == n - 1 else f"calls #{k:,} to #{n - 1:,}"

        def listed(places: list[str]) -> str:
            return places[0] if len(places) == 1 else ", ".join(places[:-1]) + " and " + places[-1]

        parts = "; ".join(f"the {listed(places)} of {calls(k)}" for k, places in left.items())
        return f"Not searched: {parts} (the search index holds at most {_size(self.max_bytes)} per rollout: {ENV_MAX})."


def _size(n: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale:,} {unit}"
    return f"{n:,} bytes"


Found = list[tuple[tuple[int, int] | None, int]]  # per text: the first match's span and the count


def _message_hits(index: SearchIndex, results: Found) -> Iterator[Hit]:
    calls = index.rollout.calls
    sid = index.rollout.session_id
    messages = index.messages()
    found: dict[int, tuple[int, int]] = {}
    counts = np.zeros(len(messages.texts), dtype=np.int64)
    for k, (span, count) in enumerate(results):
        if span is not None:
            found[k] = span
            counts[k] = count
    if not found:
        return
    matched = np.zeros(len(messages.texts), dtype=bool)
    matched[list(found)] = True
    for i, ids in enumerate(messages.per_call):
        where = np.flatnonzero(matched[ids])
        if not where.size:
            continue
        m = int(where[0])
        text_id = int(ids[m])
        start, end = found[text_id]
        yield Hit(
            session_id=sid,
            node_id=calls[i].node_id,
            index=i,
            where=MESSAGE,
            char_offset=start,
            count=int(counts[ids].sum()),
            snippet=snippet(messages.texts[text_id], start, end),
            message_index=m,
            role=messages.roles[i][m],
        )


def _response_hits(index: SearchIndex, results: Found) -> Iterator[Hit]:
    for i, (text, (found, count)) in enumerate(zip(index.responses(), results, strict=True)):
        if found is not None:
            call = index.rollout.calls[i]
            yield Hit(index.rollout.session_id, call.node_id, i, RESPONSE, found[0], count, snippet(text, *found))


def _span_hits(index: SearchIndex, results: Found, where: str) -> Iterator[Hit]:
    rollout = index.rollout
    for i, ((text, lengths), (found, count)) in enumerate(zip(index.span(where), results, strict=True)):
        if found is None:
            continue
        ends = np.cumsum(lengths, dtype=np.int64)
        token = int(np.searchsorted(ends, found[0], side="right"))
        if where == CONTEXT:
            token += rollout.context_start(i)
        yield Hit(
            rollout.session_id,
            rollout.calls[i].node_id,
            i,
            where,
            found[0],
            count,
            snippet(text, *found),
            token_index=token,
        )


def search(index: SearchIndex, query: Query, wheres: tuple[str, ...] = WHERES) -> list[Hit]:
    """Every hit in the rollout, by call in arrival order, then by ``where`` in :data:`WHERES` order.

    ``sampled`` and ``context`` are searched only when the index has a decoder. Every text the
    query's pattern must look at goes to one child process (:meth:`Query.scan_all`).

    Raises:
        SearchLimitError: the query's pattern ran over its time or memory limit (no hit is returned).
    """
    places: list[tuple[str, list[str]]] = []
    if MESSAGE in wheres:
        places.append((MESSAGE, index.messages().texts))
    if RESPONSE in wheres:
        places.append((RESPONSE, index.responses()))
    if index.decoder is not None:
        for where in (SAMPLED, CONTEXT):
            if where in wheres:
                places.append((where, [text for text, _ in index.span(where)]))
    results = query.scan_all([text for _, texts in places for text in texts])
    hits: list[Hit] = []
    at = 0
    for where, texts in places:
        part, at = results[at : at + len(texts)], at + len(texts)
        if where == MESSAGE:
            hits += _message_hits(index, part)
        elif where == RESPONSE:
            hits += _response_hits(index, part)
        else:
            hits += _span_hits(index, part, where)
    order = {w: k for k, w in enumerate(WHERES)}
    hits.sort(key=lambda h: (h.index, order[h.where]))
    return hits


def first_entered(hits: list[Hit]) -> Hit | None:
    """The ``message`` hit of the earliest call (arrival = graph order) whose request holds the text."""
    return min((h for h in hits if h.where == MESSAGE), key=lambda h: h.index, default=None)


def strip_position(rollout: Rollout, hit: Hit) -> int | None:
    """Where a token hit sits in the call's token view (its context span, then its sampled span)."""
    if hit.token_index is None:
        return None
    start = rollout.context_start(hit.index)
    if hit.where == CONTEXT:
        return hit.token_index - start
    return rollout.calls[hit.index].n_prompt - start + hit.token_index
