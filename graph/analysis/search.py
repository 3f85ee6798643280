"""Text search over a rollout: request messages, response, decoded sampled and context spans.

A hit says which call holds the text, *where* (``message``: the request messages, tool results
included; ``response``: the response message; ``sampled``: the decoded sampled span;
``context``: the decoded context span, what the harness added since the parent's end), the first
position (message index and character offset, or token index) and a short snippet around it,
plus how many times the text occurs there. One hit per call and place keeps the answer readable:
a request repeats the whole conversation, so text that entered early is in every later request.

For each rollout :func:`first_entered` names the earliest call, in graph order, whose request
holds the text. Graph order is arrival order: a call's parent always arrived before it (its
prompt extends the parent's end), so the earliest call holding the text is where it entered.

Speed: a request repeats the conversation so far, so every distinct message text is searched
once (``str.find`` for plain text, a compiled pattern otherwise) and the matches are mapped back
to the calls holding that text (:class:`SearchIndex`, built lazily and reused). Token spans are
decoded once per call on the first token search.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rollout_graph.analysis.decode import Decoder
from rollout_graph.core.rollout import Rollout

MESSAGE = "message"
RESPONSE = "response"
SAMPLED = "sampled"
CONTEXT = "context"
WHERES = (MESSAGE, RESPONSE, SAMPLED, CONTEXT)

SNIPPET = 40  # characters either side of a match
_SKIPPED_KEYS = frozenset({"role", "type", "id", "tool_call_id", "call_id", "tool_use_id"})
_PLAIN_KEYS = frozenset({"role", "content"})


class SearchError(ValueError):
    """The query cannot be searched for (an empty text, or a regular expression that does not compile)."""


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
    """A compiled query: plain text (``str.find``) unless ``regex`` or ``ignore_case``."""

    text: str
    regex: bool = False
    ignore_case: bool = False
    pattern: re.Pattern[str] | None = field(default=None, compare=False)

    @classmethod
    def compile(cls, text: str, regex: bool = False, ignore_case: bool = False) -> Query:
        """Validate and compile; raises :class:`SearchError` for an empty text or a bad pattern."""
        if not text:
            raise SearchError("the search text is empty")
        pattern = None
        if regex or ignore_case:
            try:
                pattern = re.compile(text if regex else re.escape(text), re.IGNORECASE if ignore_case else 0)
            except re.error as exc:
                raise SearchError(f"bad regular expression {text!r}: {exc}") from exc
            if pattern.search("") is not None:
                raise SearchError(f"the regular expression {text!r} matches the empty string")
        return cls(text, regex, ignore_case, pattern)

    def first(self, text: str) -> tuple[int, int] | None:
        """(start, end) of the first match in ``text``."""
        if self.pattern is None:
            at = text.find(self.text)
            return None if at < 0 else (at, at + len(self.text))
        found = self.pattern.search(text)
        return None if found is None else found.span()

    def count(self, text: str) -> int:
        """How many non-overlapping matches ``text`` holds."""
        if self.pattern is None:
            return text.count(self.text)
        return sum(1 for _ in self.pattern.finditer(text))

    def matches(self, text: str) -> Iterator[tuple[int, int]]:
        """Every match's (start, end), left to right, not overlapping."""
        if self.pattern is None:
            at = text.find(self.text)
            while at >= 0:
                yield at, at + len(self.text)
                at = text.find(self.text, at + len(self.text))
        else:
            for found in self.pattern.finditer(text):
                yield found.span()


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
    """The match with ``width`` characters either side, on one line, ``…`` where cut."""
    lo, hi = max(0, start - width), min(len(text), end + width)
    body = " ".join(text[lo:hi].split())
    return ("…" if lo > 0 else "") + body + ("…" if hi < len(text) else "")


@dataclass
class _Messages:
    """Every distinct message text of the rollout once, and per call which texts its messages are.

    A request repeats the conversation so far; searching each distinct text once and mapping the
    matches back to calls is what keeps a 1,000-call rollout's search well under a second.
    """

    texts: list[str]  # distinct message texts
    per_call: list[np.ndarray]  # per call: the index in ``texts`` of each of its messages
    roles: list[list[str]]  # per call: each message's role


STEP = 50  # calls between two calls of a build's ``between`` hook


class SearchIndex:
    """A rollout's text, prepared once for many searches (messages now, decoded spans on demand)."""

    def __init__(self, rollout: Rollout, decoder: Decoder | None = None) -> None:
        self.rollout = rollout
        self.decoder = decoder
        self._messages: _Messages | None = None
        self._responses: list[str] | None = None
        self._spans: dict[str, list[tuple[str, np.ndarray]]] = {}

    def messages(self, between: Callable[[], None] | None = None) -> _Messages:
        """The distinct message texts and which of them each call's request holds. ``between``,
        when given, is called every :data:`STEP` calls while they are built (a background build
        pauses there while a page runs)."""
        if self._messages is None:
            ids: dict[str, int] = {}
            per_call, roles = [], []
            for k, call in enumerate(self.rollout.calls):
                if between is not None and k % STEP == 0:
                    between()
                messages = call.request_messages or ()
                per_call.append(
                    np.fromiter(
                        (ids.setdefault(message_text(m), len(ids)) for m in messages),
                        dtype=np.int64,
                        count=len(messages),
                    )
                )
                roles.append([str(m.get("role", "")) if isinstance(m, dict) else "" for m in messages])
            self._messages = _Messages(list(ids), per_call, roles)
        return self._messages

    def responses(self) -> list[str]:
        """Per call, its response message's text (empty without one)."""
        if self._responses is None:
            self._responses = [
                message_text(c.response_message) if c.response_message is not None else "" for c in self.rollout.calls
            ]
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
        """Per call: the decoded span and the end offset of each token's text in it (``between``:
        as for :meth:`messages`)."""
        if where not in self._spans:
            if self.decoder is None:
                raise SearchError("token search needs a decoder")
            built = []
            for i, call in enumerate(self.rollout.calls):
                if between is not None and i % STEP == 0:
                    between()
                ids: np.ndarray | None = call.sampled_ids
                if where == CONTEXT:
                    ids = call.prompt_ids[self.rollout.context_start(i) :] if call.prompt_ids is not None else None
                if ids is None or not ids.shape[0]:
                    built.append(("", np.empty(0, dtype=np.int64)))
                    continue
                pieces = self.decoder.pieces(ids)
                ends = np.cumsum(np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces)))
                built.append(("".join(pieces), ends))
            self._spans[where] = built
        return self._spans[where]


def _message_hits(index: SearchIndex, query: Query) -> Iterator[Hit]:
    calls = index.rollout.calls
    sid = index.rollout.session_id
    messages = index.messages()
    found: dict[int, tuple[int, int]] = {}
    for k, text in enumerate(messages.texts):
        span = query.first(text)
        if span is not None:
            found[k] = span
    if not found:
        return
    matched = np.zeros(len(messages.texts), dtype=bool)
    matched[list(found)] = True
    counts = np.zeros(len(messages.texts), dtype=np.int64)
    for k in found:
        counts[k] = query.count(messages.texts[k])
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


def _response_hits(index: SearchIndex, query: Query) -> Iterator[Hit]:
    for i, text in enumerate(index.responses()):
        found = query.first(text) if text else None
        if found is not None:
            call = index.rollout.calls[i]
            yield Hit(
                index.rollout.session_id, call.node_id, i, RESPONSE, found[0], query.count(text), snippet(text, *found)
            )


def _span_hits(index: SearchIndex, query: Query, where: str) -> Iterator[Hit]:
    rollout = index.rollout
    for i, (text, ends) in enumerate(index.span(where)):
        found = query.first(text) if text else None
        if found is None:
            continue
        token = int(np.searchsorted(ends, found[0], side="right"))
        if where == CONTEXT:
            token += rollout.context_start(i)
        yield Hit(
            rollout.session_id,
            rollout.calls[i].node_id,
            i,
            where,
            found[0],
            query.count(text),
            snippet(text, *found),
            token_index=token,
        )


def search(index: SearchIndex, query: Query, wheres: tuple[str, ...] = WHERES) -> list[Hit]:
    """Every hit in the rollout, by call in arrival order, then by ``where`` in :data:`WHERES` order.

    ``sampled`` and ``context`` are searched only when the index has a decoder.
    """
    hits: list[Hit] = []
    if MESSAGE in wheres:
        hits += _message_hits(index, query)
    if RESPONSE in wheres:
        hits += _response_hits(index, query)
    if index.decoder is not None:
        for where in (SAMPLED, CONTEXT):
            if where in wheres:
                hits += _span_hits(index, query, where)
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
