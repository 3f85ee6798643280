"""The evidence for one break: what two calls' ids, messages and clocks show, read when asked.

A :class:`Pair` is an earlier call (whose end ids are compared) and a later one (whose prompt is):
each fact is a property computed the first time the decision table (decision.py) asks for it, so a
pair decided by its ids never reads its messages. Nothing here names a kind; :meth:`Pair.fact`
words one fact for the evidence a person reads (docs/semantics.md, "Why a call broke").

The facts: the ids (``shared``, ``where``, ``kept``, ``identical``, ``same_text`` with a
tokenizer), the request (``one_request``: two choices of one request, ``n`` > 1), the clocks
(``gap``), the system text (``system``: same, re-rendered or other), the tools (``tools_added``,
``tools_removed``), the earlier reply spawning this call (``spawned``: a tool call whose arguments
are this call's prompt), the earlier reply replayed as text (``replay``, from text_replays), the
earlier messages pasted into a user message (``pasted``), the history aligned turn by turn
(``history``: texts.match_history), and an earlier reply found inside a later message
(``summary_by``: a summary put in the history's place).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from rollout_graph.analysis.decode import Decoder
from rollout_graph.analysis.near_miss.ids import _prompt, same_text
from rollout_graph.analysis.near_miss.texts import (
    MESSAGE_COMPARED,
    PASTED_MIN_CHARS,
    SPAWN_MIN_CHARS,
    SYSTEM_ROLES,
    HistoryMatch,
    _inside,
    _pasted,
    _similar,
    _SystemGrams,
    match_history,
    prompt_texts,
    reply_turn,
    spawn_arguments,
    system_text,
    tool_names,
    turns,
)
from rollout_graph.core.ids import same_ids
from rollout_graph.core.records import Call
from rollout_graph.core.types import NearMissKind

T = TypeVar("T")


class cached_property(Generic[T]):  # noqa: N801 (functools' name: the same use, without its lock)
    """A fact computed once per pair, on first use: ``functools.cached_property`` without the lock
    it takes on every first read (a pass reads ~17,000 facts of ~1,600 pairs)."""

    def __init__(self, compute: Callable[[Any], T]) -> None:
        self.compute = compute
        self.name = compute.__name__
        self.__doc__ = compute.__doc__

    def __get__(self, owner: Any, kind: type | None = None) -> T:
        if owner is None:
            return self  # type: ignore[return-value]
        value = self.compute(owner)
        owner.__dict__[self.name] = value  # the instance's value shadows this (non-data) descriptor
        return value


SUMMARY_WORDS = re.compile(r"summar(?:y|ies|i[sz]e)|compact|checkpoint|condense|state.snapshot", re.IGNORECASE)
RESUME_GAP = 60.0  # seconds between two calls that mark a new invocation of the harness
SHARED_SYSTEM_TOKENS = 32  # without messages, this many shared leading ids make a compaction
RETOKENIZE_REACH = 8  # a break this close to the end of the earlier prompt may still be a retokenization


def _n(params: object) -> int:
    """The ``n`` a request asked for (1 when it says nothing readable)."""
    value = params.get("n") if isinstance(params, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


class Pair:
    """``earlier``'s end ids against ``later``'s prompt (``shared`` ids in common), and what else
    the two calls show. ``continued``: the later call has children (``earlier_continued``: the
    earlier one has: its reply was used; ``earlier_alone``: the earlier call is a root nothing
    continued, a single call of its own); ``main``: the later call is the root of
    the rollout's main conversation; ``replay``: (kind, text checked, words) when the later
    request replays the earlier reply as text (text_replays); ``grams``: the pass's system-text
    cache; ``context`` (the pass) and ``at`` (the two calls' indices): what only the pass can look up,
    the earlier calls whose reply may sit inside a later message (``summaries``: summary_by) and the
    call between the two that used the earlier reply (``used_between``: reply_used_by); ``later_read``:
    the later request's system text, user texts and message count, when the pass read them."""

    def __init__(
        self,
        earlier: Call,
        later: Call,
        shared: int,
        *,
        decoder: Decoder | None = None,
        continued: bool = False,
        earlier_continued: bool = False,
        earlier_alone: bool = False,
        main: bool = False,
        replay: tuple[NearMissKind, bool, str] | None = None,
        grams: _SystemGrams | None = None,
        context: Any = None,
        at: tuple[int, int] = (-1, -1),
        later_read: tuple[str | None, list[str], int] | None = None,
    ) -> None:
        self.earlier, self.later, self.shared = earlier, later, shared
        self.decoder, self.continued, self.main, self.replay = decoder, continued, main, replay
        self.earlier_continued, self.earlier_alone = earlier_continued, earlier_alone
        self.grams = grams or _SystemGrams()
        self.context, self.at = context, at
        self.later_read = later_read  # (system text, user texts, non-system messages) when already read

    # -- the ids -----------------------------------------------------------------------------

    @cached_property
    def where(self) -> str:
        """The break falls in the earlier call's ``prompt``, its ``sampled`` span, or ``after`` it."""
        e = self.earlier
        return "prompt" if self.shared < e.n_prompt else "sampled" if self.shared < e.n_end else "after"

    @cached_property
    def kept(self) -> float:
        """Share of the earlier call's sampled tokens kept before the break."""
        e = self.earlier
        return min(1.0, max(0.0, (self.shared - e.n_prompt) / e.n_sampled)) if e.n_sampled else 0.0

    @cached_property
    def identical(self) -> bool:
        """The identical prompt ids."""
        return same_ids(_prompt(self.earlier), _prompt(self.later))

    @cached_property
    def same_text(self) -> bool | None:
        """A tokenizer decodes the earlier end ids from the break to exactly the text the later
        prompt goes on with (None: no tokenizer; only asked near or after the earlier prompt's end)."""
        return same_text(self.decoder, self.earlier, self.later, self.shared)

    @cached_property
    def near_prompt_end(self) -> bool:
        """The break at most ``RETOKENIZE_REACH`` ids before the end of the earlier prompt, or later."""
        return self.where != "prompt" or self.earlier.n_prompt - self.shared <= RETOKENIZE_REACH

    @cached_property
    def one_request(self) -> bool:
        """Two choices of one request (``n`` > 1): one record (one line), the identical prompt, and
        the request asked for ``n`` > 1 or the loader named them as its choices (``id``, ``id#1``)."""
        e, l_ = self.earlier, self.later
        if not e.source or e.source != l_.source or e.line != l_.line or e.line <= 0 or not self.identical:
            return False
        asked = any(_n(params) > 1 for params in (l_.requested_params, l_.submitted_params))
        return asked or e.node_id.split("#", 1)[0] == l_.node_id.split("#", 1)[0] != l_.node_id

    # -- the clocks --------------------------------------------------------------------------

    @cached_property
    def gap(self) -> float | None:
        """Seconds from the earlier call's end to the later call's start (None: not recorded)."""
        end, start = self.earlier.timing.get("ended_at"), self.later.timing.get("started_at")
        if isinstance(end, bool) or isinstance(start, bool):
            return None
        if isinstance(end, (int, float)) and isinstance(start, (int, float)):
            return float(start) - float(end)
        return None

    # -- the messages ------------------------------------------------------------------------

    @cached_property
    def systems(self) -> tuple[str | None, str | None]:
        """Both system texts (None: no messages recorded)."""
        later = self.later_read[0] if self.later_read is not None else self.grams.recent(self.later, system_text)
        return self.grams.recent(self.earlier, system_text), later

    @cached_property
    def has_messages(self) -> bool:
        """Both calls recorded their request messages."""
        return self.systems[0] is not None and self.systems[1] is not None

    @cached_property
    def system(self) -> str:
        """``same``, ``re-rendered`` (one harness prompt written again: a date, a listing) or
        ``other`` (a prompt for another job); empty without messages."""
        a, b = self.systems
        if a is None or b is None:
            return ""
        if a == b:
            return "same"
        return "re-rendered" if _similar(a, b, self.grams) else "other"

    @cached_property
    def tools_added(self) -> tuple[str, ...]:
        """Tools the later call offers and the earlier did not."""
        return tuple(sorted(tool_names(self.later) - tool_names(self.earlier)))

    @cached_property
    def tools_removed(self) -> tuple[str, ...]:
        """Tools the earlier call offered and the later does not."""
        return tuple(sorted(tool_names(self.earlier) - tool_names(self.later)))

    @cached_property
    def same_tools(self) -> bool:
        """The same tool names offered."""
        return not self.tools_added and not self.tools_removed

    @cached_property
    def spawned(self) -> str | None:
        """The name of the earlier reply's tool call whose arguments are this call's prompt (its
        system text or a user message: equal, or one inside the other and at least half of it)."""
        arguments = spawn_arguments(self.earlier.response_message)
        if not arguments:
            return None
        texts = prompt_texts(self.later)
        for name, argument in arguments:
            for text in texts:
                if argument == text:
                    return name
                short, long_ = (argument, text) if len(argument) <= len(text) else (text, argument)
                if len(short) >= SPAWN_MIN_CHARS and 2 * len(short) >= len(long_) and short in long_:
                    return name
        return None

    @cached_property
    def pasted(self) -> int:
        """How many earlier messages (24+ characters) reappear inside a later user message."""
        return _pasted(self.earlier, self.later, self.grams, None if self.later_read is None else self.later_read[1])

    @cached_property
    def history(self) -> HistoryMatch:
        """The earlier conversation (its request's turns and its reply) aligned with the later request."""
        return match_history(self.grams.recent(self.earlier, turns), reply_turn(self.earlier), self.later_turns)

    @cached_property
    def later_messages(self) -> int:
        """How many non-system messages the later request holds (counted, not read as turns)."""
        if self.later_read is not None:
            return self.later_read[2]
        return sum(
            1 for m in self.later.request_messages or () if isinstance(m, dict) and m.get("role") not in SYSTEM_ROLES
        )

    @cached_property
    def later_turns(self) -> list:
        """The later request's non-system messages as turns."""
        return self.grams.recent(self.later, turns)

    @cached_property
    def reply_used_by(self) -> Call | None:
        """For an earlier single call without tools (a summary call) and a later call with the
        identical prompt: a call in between whose request holds the earlier reply (inside a user
        message): the reply was used, so the identical request is a new one, not a retry."""
        if not (self.earlier_alone and not self.earlier.has_tools and not self.later.has_tools):
            return None
        return None if self.context is None else self.context.used_between(*self.at)

    @cached_property
    def summary_asked(self) -> str | None:
        """The later request's last message, when it is a user message the earlier conversation does not
        hold that asks for a summary (its words: summarize, summary, compact, checkpoint, condense,
        state snapshot): a summarizer's instruction, quoted."""
        h, turns_ = self.history, self.later_turns
        if not turns_ or len(turns_) - 1 not in h.inserted:
            return None
        role, text, _ = turns_[-1]
        if role != "user" or not SUMMARY_WORDS.search(text[:MESSAGE_COMPARED]):
            return None
        return text

    @cached_property
    def summary_by(self) -> Call | None:
        """An earlier call whose reply (a text of 24+ characters) sits inside a message the later
        request inserted: a summary put where the history was (the latest such call)."""
        inserted = [self.later_turns[j][1] for j in self.history.inserted]
        inserted = [t for t in inserted if len(t) >= PASTED_MIN_CHARS]
        if not inserted:
            return None
        summaries = () if self.context is None else self.context.summaries(self.at[1])
        for call in reversed(summaries):
            turn = reply_turn(call)
            if turn is None or turn[2] or len(turn[1]) < PASTED_MIN_CHARS:
                continue
            if any(_inside(turn[1], text) for text in inserted):
                return call
        return None

    def carried(self) -> int:
        """How many earlier messages the later request carries, as messages or pasted into one."""
        return self.history.carried + (self.pasted if self.system != "same" else 0)
