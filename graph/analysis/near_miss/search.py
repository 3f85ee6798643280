"""The near-miss pass: which calls need explaining, which earlier calls could explain each, and
which one does.

:func:`near_misses` is the pass (rollout_graph.pipeline calls it once per rollout). It explains
every root after the first, every later branch of a fork (a discarded call among them) and every
call whose request replays an earlier reply with other ids, each against the plausible EARLIER
calls only (causality: a near miss never names a call that arrived after it, or that started
after it when both starts are recorded):

- another choice of the same request (``n`` > 1);
- the earlier call whose reply's tool call carries this call's prompt (a subagent it spawned);
- the latest earlier call with the identical prompt;
- the earlier call whose reply the request replays as text (:func:`text_replays`);
- the earlier call sharing the longest prefix of ids (a root), or the last call of the branch
  before (a later branch of a fork);
- the latest earlier call whose reply the request carries (the conversation it continues).

Each is decided by the table (decision.py, on evidence.py's facts); the strongest decision wins,
then the candidate whose conversation the call carries most, the longest shared prefix, the
latest. The first candidates are the strong ones: when one of them decides, the rest are not read.
A compaction is named against the last call of the conversation it compacted.

:func:`replacements` is the other direction, for calls that look dropped: the LATER call that
re-sent, replayed, rejected, compacted or resumed each (``Rollout.replaced_by``).
"""

from __future__ import annotations

import bisect
import functools
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from rollout_graph.analysis.decode import Decoder
from rollout_graph.analysis.near_miss.decision import ATTEMPT, Decision, decide
from rollout_graph.analysis.near_miss.evidence import Pair
from rollout_graph.analysis.near_miss.ids import (
    _best_candidates,
    _breaks_inside_reply,
    _Ends,
    _first_item,
    _last_before,
    _prompt,
    _prompt_groups,
    _Replies,
    common_prefix,
    replay_alignment,
    same_text,
)
from rollout_graph.analysis.near_miss.texts import (
    PASTED_MIN_CHARS,
    SYSTEM_ROLES,
    _inside,
    _last_assistant,
    _raw_arguments,
    _reasoning,
    _reply_key,
    _SystemGrams,
    _user_texts,
    reply_turn,
    spawn_arguments,
    system_text,
    turns,
)
from rollout_graph.core.ids import same_ids
from rollout_graph.core.messages import content_text
from rollout_graph.core.records import Call, NearMiss
from rollout_graph.core.types import (
    BROKEN_REPLAYS,
    COMPACTION,
    PARALLEL_SAMPLE,
    REJECTED,
    REPLY_CARRIED,
    RESUMED,
    RETOKENIZED,
    RETRY,
    REWRITTEN,
    SIDE_CALL,
    SPAWNED,
    NearMissKind,
)

REPLY_CANDIDATES = 4  # earlier calls with the same reply compared with a replay (the latest ones)
STOP_TAIL = 2  # a replay that changed at most this many final sampled ids of a stopped reply cut its stop string
COMPACTED_WALKED = 64  # calls of a conversation looked at, from its last, for the ones not discarded
COMPACTED_TRIED = 4  # the last calls of a compacted conversation tried as the call it compacted
PASTED_SOURCES = 8  # earlier text replies looked for inside a later call's long user messages (the latest ones)
PASTED_USER_CHARS = 80  # a user message this long may hold a pasted conversation
REQUEST_TWINS = 8  # identical-prompt twins looked at for another choice of one request
USED_WALKED = 32  # calls after a summary call looked at for its reply, used
TEXTS_WALKED = 256  # earlier calls looked at for text replies (a summary, a pasted conversation's end)
SUMMARIES = 16  # earlier text replies looked for inside a compaction's new messages (the latest ones)
CONVERSATION_STRENGTH = 45  # decided from the messages: the conversation as it stood may explain it better
REPLAY_STRENGTH = 70  # a candidate decided this strongly is not compared with the weak ones
SPAWNERS = 8  # earlier replies with long tool-call arguments looked inside for a prompt (the latest ones)
# a later call that re-sent, replayed, rejected, compacted or resumed an earlier one replaced it
REPLACING: tuple[NearMissKind, ...] = (PARALLEL_SAMPLE, RETRY, *BROKEN_REPLAYS, REJECTED, COMPACTION, RESUMED)


# -- replays found from the text: the request carries an earlier call's reply ---------------------


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
                found[i] = NearMiss(i, e, e, i, shared, kept, "sampled", kind, checked, evidence, "replayed reply",
                                    (("reply_replayed", evidence),))  # fmt: skip
        reply = _reply_key(call.response_message) if call.prompt_ids is not None and call.n_sampled else None
        if reply is not None:
            by_reply.setdefault(reply, []).append(i)
            replies.add(i)
    return found


# -- the pass ----------------------------------------------------------------------------------


class _Lazy:
    """Indexes over the calls' replies, built the first time the pass needs each (most rollouts
    never do): replies by turn (the conversation a request carries), spawning tool-call arguments
    (a subagent's prompt), text replies (a compaction's summary), each reply read once."""

    def __init__(self, calls: list[Call]) -> None:
        self.calls = calls
        self._replies: dict[tuple, list[int]] | None = None
        self._spawns: tuple[dict[str, list[int]], list[int]] | None = None
        self._text_of: dict[int, str] = {}

    def replies(self) -> dict[tuple, list[int]]:
        if self._replies is None:
            self._replies = {}
            for i, call in enumerate(self.calls):
                if call.prompt_ids is not None and isinstance(call.response_message, dict):
                    turn = reply_turn(call)
                    if turn is not None:
                        self._replies.setdefault(turn, []).append(i)
        return self._replies

    def spawns(self) -> tuple[dict[str, list[int]], list[int]]:
        """(argument text -> calls whose reply's tool call carries it, calls with such arguments)."""
        if self._spawns is None:
            by_text: dict[str, list[int]] = {}
            spawners: list[int] = []
            for i, call in enumerate(self.calls):
                reply = call.response_message
                if call.prompt_ids is None or not isinstance(reply, dict) or not reply.get("tool_calls"):
                    if not (isinstance(reply, dict) and isinstance(reply.get("content"), list)):
                        continue
                found = spawn_arguments(reply)
                if found:
                    spawners.append(i)
                    for _, text in found:
                        by_text.setdefault(text, []).append(i)
            self._spawns = (by_text, spawners)
        return self._spawns

    def reply_text(self, i: int) -> str:
        """The call's reply when it is text only (no tool call), else ``""`` (computed once)."""
        text = self._text_of.get(i)
        if text is None:
            call = self.calls[i]
            turn = reply_turn(call) if isinstance(call.response_message, dict) else None
            text = self._text_of[i] = turn[1] if turn is not None and not turn[2] else ""
        return text

    def texts_before(self, later: int, most: int) -> list[int]:
        """The last ``most`` calls before ``later`` whose reply is text only, at least
        ``PASTED_MIN_CHARS`` long (a summary may be one), newest first; at most ``TEXTS_WALKED``
        calls are looked at."""
        out: list[int] = []
        for i in range(later - 1, max(-1, later - 1 - TEXTS_WALKED), -1):
            if len(self.reply_text(i)) >= PASTED_MIN_CHARS:
                out.append(i)
                if len(out) == most:
                    break
        return out


@dataclass(slots=True)
class _Request:
    """What the pass reads of an explained call's request messages, read once (a loader may have
    left them in the file: each read parses them again): none recorded, the system text, the first
    non-system message, whether an assistant message is among them, how many non-system messages,
    and the user messages' texts."""

    messages: bool
    system: str | None
    opening: str
    assistant: bool
    n_turns: int
    users: list[str]

    @classmethod
    def of(cls, call: Call) -> _Request:
        messages = [m for m in call.request_messages or () if isinstance(m, dict)]
        system = system_text(call) if messages else None
        rest = [m for m in messages if m.get("role") not in SYSTEM_ROLES]
        opening = content_text(rest[0].get("content")).strip() if rest else ""
        users = [content_text(m.get("content")) for m in rest if m.get("role") == "user"]
        assistant = any(m.get("role") == "assistant" for m in rest)
        return cls(bool(messages), system, opening, assistant, len(rest), users)


class _Pass:
    """One rollout's near-miss pass: the calls, the exact graph, and what the candidates share."""

    def __init__(self, calls: list[Call], topology, decoder: Decoder | None) -> None:
        self.calls, self.topology, self.decoder = calls, topology, decoder
        self.parents, self.children, self.discarded = topology.parents, topology.children, topology.discarded
        self.grams = _SystemGrams()  # each distinct system text's 3-grams, computed once for the whole pass
        self.lazy = _Lazy(calls)
        size = Counter(topology.root_of)
        main = max(topology.roots, key=lambda r: (size[r], -r)) if topology.roots else None
        self._members: dict[int, list[int]] | None = None
        self._groups: dict[int, list[int]] | None = None
        self.decided: dict[int, list[tuple[int, Decision]]] = {}  # later -> every (earlier, decision) weighed
        self._openings: dict[str, list[int]] | None = None
        self._index: dict[int, int] | None = None
        self._requests: dict[int, _Request] = {}
        self.main: set[int] = set()  # the main conversation's root and the roots it re-sent (its first attempts)
        if main is not None and calls[main].prompt_ids is not None:
            size_of = calls[main].n_prompt
            self.main = {r for r in topology.roots if calls[r].n_prompt == size_of and self.twins(r, main)}
        elif main is not None:
            self.main = {main}
        self.starts = [_start(c) for c in calls]

    def twins(self, a: int, b: int) -> bool:
        """Whether calls ``a`` and ``b`` have the identical prompt ids."""
        pa, pb = self.calls[a].prompt_ids, self.calls[b].prompt_ids
        return a == b or (pa is not None and pb is not None and same_ids(pa, pb))

    # -- causality and kinship ---------------------------------------------------------------

    def before(self, e: int, later: int) -> bool:
        """Whether ``e`` may be what ``later`` nearly continued: it arrived first, and did not start
        after it (when both starts are recorded)."""
        if e >= later:
            return False
        a, b = self.starts[e], self.starts[later]
        return a is None or b is None or a <= b

    def kin(self, e: int, later: int) -> bool:
        """Whether ``e`` is an exact ancestor or descendant of ``later`` (continued exactly: no break)."""
        topology = self.topology
        if topology.root_of[e] != topology.root_of[later]:
            return False
        depth = topology.depth
        low, high = (e, later) if depth[e] > depth[later] else (later, e)
        parents = self.parents
        for _ in range(depth[low] - depth[high]):  # walk the deeper one up to the other's depth
            node = parents[low]
            if node is None:
                return False
            low = node
        return low == high

    def allowed(self, e: int, later: int) -> bool:
        return e != later and self.calls[e].prompt_ids is not None and self.before(e, later) and not self.kin(e, later)

    # -- candidates --------------------------------------------------------------------------

    def latest(self, members: list[int], later: int) -> int | None:
        """The latest of ``members`` (in arrival order) allowed for ``later``."""
        for k in range(bisect.bisect_left(members, later) - 1, -1, -1):  # (no slice: one parent's twins are many)
            if self.allowed(members[k], later):
                return members[k]
        return None

    def request(self, i: int) -> _Request:
        """The call's request as the pass reads it (once)."""
        found = self._requests.get(i)
        if found is None:
            found = self._requests[i] = _Request.of(self.calls[i])
        return found

    def later_read(self, later: int) -> tuple[str | None, list[str], int]:
        """The later request's system text, user texts and message count, read once (Pair's ``later_read``)."""
        request = self.request(later)
        return request.system, request.users, request.n_turns

    def has_messages(self, later: int) -> bool:
        """Whether the call recorded request messages (the message-read candidates need them)."""
        return self.request(later).messages

    def same_request(self, twins: list[int], later: int) -> int | None:
        """The latest of ``later``'s identical-prompt twins read from the same record (one request's
        choices have one prompt; they sit next to each other, so only the last ``REQUEST_TWINS``
        earlier twins are looked at)."""
        call = self.calls[later]
        k = bisect.bisect_left(twins, later)
        for e in reversed(twins[max(0, k - REQUEST_TWINS) : k]):
            other = self.calls[e]
            if other.line == call.line and other.source == call.source and self.allowed(e, later):
                return e
        return None

    def spawner(self, later: int) -> int | None:
        by_text, spawners = self.lazy.spawns()
        if not spawners:
            return None
        request = self.request(later)
        texts = ([request.system.strip()] if request.system and request.system.strip() else []) + [
            u.strip() for u in request.users if u.strip()
        ]  # (texts.prompt_texts, from the one read)
        best = None
        for text in texts:
            e = self.latest(by_text.get(text, []), later)
            if e is not None and (best is None or e > best):
                best = e
        if best is not None:
            return best
        k = bisect.bisect_left(spawners, later)
        for e in reversed(spawners[max(0, k - SPAWNERS) : k]):  # arguments inside a prompt, or a prompt inside them
            if self.allowed(e, later) and self.pair(e, later).spawned is not None:
                return e
        return None

    def conversation(self, later: int) -> int | None:
        """The latest earlier call whose reply the request carries as an assistant message."""
        if not self.request(later).assistant:
            return None  # (most requests that start a conversation carry no reply: not turned into turns)
        mine = [t for t in self.grams.recent(self.calls[later], turns) if t[0] == "assistant"]
        replies = self.lazy.replies()
        best = None
        for turn in reversed(mine):
            e = self.latest(replies.get(turn, []), later)
            if e is not None and (best is None or e > best):
                best = e
        return best

    def same_opening(self, later: int) -> int | None:
        """The latest earlier call whose request opens with the same first message (after the system
        text) as ``later``'s, when ``later`` carries more than that message: the conversation it goes
        on with (a summarizer's request over a compacted conversation, a resume)."""
        request = self.request(later)
        if request.n_turns < 2:
            return None
        if self._openings is None:
            self._openings = {}
            for i, call in enumerate(self.calls):
                first = _opening(call)
                if first:
                    self._openings.setdefault(first, []).append(i)
        first = request.opening
        return self.latest(self._openings.get(first, []), later) if first else None

    def pasted_source(self, later: int) -> int | None:
        """The latest of the last ``PASTED_SOURCES`` earlier text replies found inside one of the
        later call's long user messages (a conversation pasted into a prompt ends with its last reply)."""
        users = [t for t in self.request(later).users if len(t) >= PASTED_USER_CHARS]
        if not users:
            return None
        longest = max(map(len, users))
        for e in self.lazy.texts_before(later, PASTED_SOURCES):
            reply = self.lazy.reply_text(e)
            if len(reply) < longest and self.allowed(e, later) and any(_inside(reply, u) for u in users):
                return e
        return None

    def used_between(self, e: int, later: int) -> Call | None:
        """The first call after ``e`` and before ``later`` (at most ``USED_WALKED`` of them) whose user
        messages hold ``e``'s text reply: ``e``'s reply was used."""
        reply = self.lazy.reply_text(e)
        if len(reply) < PASTED_MIN_CHARS:
            return None
        for i in range(e + 1, min(later, e + 1 + USED_WALKED)):
            if any(len(u) > len(reply) and _inside(reply, u) for u in _user_texts(self.calls[i])):
                return self.calls[i]
        return None

    def same_system(self, a: int, b: int) -> bool:
        """Whether two calls' system texts are one text (both recorded)."""
        ta, tb = self.grams.recent(self.calls[a], system_text), self.grams.recent(self.calls[b], system_text)
        return ta is not None and ta == tb

    def conversation_before(self, later: int) -> int | None:
        """The latest earlier call (allowed) that belongs to a conversation: it offers tools, or it
        has a parent or children (at most ``TEXTS_WALKED`` calls looked at)."""
        for i in range(later - 1, max(-1, later - 1 - TEXTS_WALKED), -1):
            call = self.calls[i]
            if (call.tools or self.parents[i] is not None or self.children[i]) and self.allowed(i, later):
                return i
        return None

    def summaries(self, later: int) -> tuple[Call, ...]:
        """The last ``SUMMARIES`` earlier calls whose reply is text (oldest first): a summary may be one."""
        found = [e for e in self.lazy.texts_before(later, SUMMARIES) if self.before(e, later)]
        return tuple(self.calls[e] for e in reversed(found))

    # -- deciding ----------------------------------------------------------------------------

    def pair(self, e: int, later: int, shared: int | None = None, replay=None) -> Pair:
        calls = self.calls
        if shared is None:
            shared = common_prefix(calls[e], _prompt(calls[later]))
        return Pair(
            calls[e],
            calls[later],
            shared,
            decoder=self.decoder,
            continued=bool(self.children[later]),
            earlier_continued=bool(self.children[e]),
            earlier_alone=self.parents[e] is None and not self.children[e],
            main=later in self.main,
            replay=replay,
            grams=self.grams,
            context=self,
            at=(e, later),
            later_read=self.later_read(later),
        )

    def decide(self, e: int, later: int, shared: int | None = None, replay=None) -> tuple[Decision, Pair]:
        p = self.pair(e, later, shared, replay)
        return decide(p), p

    def consider_all(
        self, pairs: list[tuple[int, int, NearMiss | None]], best: dict[int, tuple[tuple, Decision, Pair, int]]
    ) -> None:
        """Decide every (earlier, later, replay found from the text) pair, grouped by the earlier
        call, and keep each later call's best: the strongest decision, then the most of the earlier
        conversation carried, the longest shared prefix, the latest earlier call."""
        seen: set[tuple[int, int]] = set()
        for e, later, replay in sorted(pairs, key=_pair_order):
            if (e, later) in seen:
                continue
            seen.add((e, later))
            facts = None if replay is None else (replay.kind, replay.text_checked, replay.evidence)
            decision, p = self.decide(e, later, None if replay is None else replay.common_prefix, facts)
            self.decided.setdefault(later, []).append((e, decision))
            rank = (decision.strength, decision.carried, p.shared, e)
            if later not in best or rank > best[later][0]:
                best[later] = (rank, decision, p, e)

    def index_of(self, call: Call) -> int:
        """The arrival index of one of the pass's calls."""
        if self._index is None:
            self._index = {id(c): i for i, c in enumerate(self.calls)}
        return self._index[id(call)]

    def compacted(self, e: int, later: int, most: int = COMPACTED_TRIED) -> list[int]:
        """The last calls before ``later`` (newest first, at most ``most``), not discarded, in the
        conversation of ``e``: its tree, and the tree of a root that re-sent its root's prompt (a
        retry of the first call). The history a compaction replaced is the conversation as it stood
        then: the first of these a compaction of (docs/semantics.md, "Compactions in the DAG")."""
        root = self.topology.root_of[e]
        found: list[int] = []
        for tree in self.resent(root):
            if tree >= later:
                break
            members = self.members(tree)
            k = bisect.bisect_left(members, later)
            taken = 0
            for i in reversed(members[max(0, k - COMPACTED_WALKED) : k]):
                if i not in self.discarded and self.allowed(i, later):
                    found.append(i)
                    taken += 1
                    if taken == most:
                        break
        return sorted(found, reverse=True)[:most]

    def members(self, root: int) -> list[int]:
        """The calls of ``root``'s tree, in arrival order."""
        if self._members is None:
            self._members = {}
            for i, r in enumerate(self.topology.root_of):
                self._members.setdefault(r, []).append(i)
        return self._members.get(root, [])

    def resent(self, root: int) -> list[int]:
        """``root`` and the later roots with its identical prompt (the trees it was re-sent as)."""
        return [r for r in self.group(root) if r >= root]

    def group(self, root: int) -> list[int]:
        """The roots with ``root``'s identical prompt, in arrival order (``root`` among them)."""
        if self._groups is None:
            buckets: dict[tuple, list[int]] = {}
            for r in self.topology.roots:
                prompt = self.calls[r].prompt_ids
                if prompt is not None:
                    key = (prompt.shape[0], prompt[:32].tobytes(), prompt[-32:].tobytes())
                    buckets.setdefault(key, []).append(r)
            self._groups = {}
            for bucket in buckets.values():
                for r in bucket:
                    if r not in self._groups:
                        same = [x for x in bucket if x == r or (x not in self._groups and self.twins(x, r))]
                        for x in same:
                            self._groups[x] = same
        return self._groups.get(root, [root])


def _pair_order(pair: tuple[int, int, NearMiss | None]) -> tuple[int, int]:
    return pair[0], pair[1]


def _opening(call: Call) -> str:
    """The text of a request's first non-system message (stripped; empty when it has none)."""
    for m in call.request_messages or ():
        if isinstance(m, dict) and m.get("role") not in SYSTEM_ROLES:
            return content_text(m.get("content")).strip()
    return ""


def _start(call: Call) -> float | None:
    value = call.timing.get("started_at")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _miss(calls: list[Call], later: int, decision: Decision, p: Pair, e: int) -> NearMiss:
    return NearMiss(later, e, e, later, p.shared, p.kept, p.where, decision.kind, decision.text_checked,
                    decision.evidence, decision.rule, decision.facts)  # fmt: skip


_F = TypeVar("_F", bound=Callable[..., Any])


def _never_fails(pass_: _F) -> _F:
    """The pass explains a trace; it must never stop one loading. An error inside it (a trace no
    test foresaw) is logged (``rollout_graph.near_miss``, naming the session and the error) and the
    rollout loads without near misses (docs/semantics.md, "Near misses")."""

    @functools.wraps(pass_)
    def guarded(calls: list[Call], *args: Any, **kwargs: Any) -> dict[int, NearMiss]:
        try:
            return pass_(calls, *args, **kwargs)
        except Exception as error:  # noqa: BLE001 (any error: the load goes on, the log says why)
            session = calls[0].session_id if calls else "?"
            logging.getLogger("rollout_graph.near_miss").warning(
                "session %s: the near-miss pass (%s) failed on its %d calls and was skipped: %s: %s",
                session, pass_.__name__, len(calls), type(error).__name__, error,
            )  # fmt: skip
            return {}

    return guarded  # type: ignore[return-value]


@_never_fails
def near_misses(
    calls: list[Call], topology, decoder: Decoder | None = None, *, run: _Pass | None = None
) -> dict[int, NearMiss]:
    """Every root after the first, every later branch of a fork and every call whose request
    replays an earlier reply with other ids, explained against the earlier calls it could have
    nearly continued; keyed by that (later) call. Never names a call that arrived after it.

    ``topology`` is the exact graph (graph/core/topology.py); ``decoder``, when it is a tokenizer,
    lets a break be recognised as a retokenization from the ids alone (with messages the text
    already shows it). ``run``: the pass's set-up when the caller already built it (:func:`near_misses_and_replacements`)."""
    run = run if run is not None else _Pass(calls, topology, decoder)
    parents, children = topology.parents, topology.children
    n_prompts = [0 if c.prompt_ids is None else c.prompt_ids.shape[0] for c in calls]
    n_ends = [0 if c.prompt_ids is None else c.prompt_ids.shape[0] + c.sampled_ids.shape[0] for c in calls]
    roots = [i for i, p in enumerate(parents) if p is None and calls[i].prompt_ids is not None]
    explained_roots = [r for r in roots[1:] if n_prompts[r]]
    branches: dict[int, int] = {}  # a later branch of a fork -> the branch before it
    for fork in topology.forks:
        ordered = sorted(children[fork])
        for k, child in enumerate(ordered[1:], 1):
            if n_prompts[child]:
                branches[child] = ordered[k - 1]
    replays = text_replays(calls, parents, decoder)
    todo = sorted({*explained_roots, *branches, *replays})
    if not todo:
        return {}
    same, siblings = _prompt_groups(calls, parents, explained_roots, n_prompts)
    root_set = set(explained_roots)
    pending_roots = [r for r in explained_roots]
    limit = max((n_prompts[r] for r in pending_roots), default=0)
    tokened = [i for i, n in enumerate(n_ends) if n > 0]
    ends = _Ends.of(calls, tokened, limit, n_ends=n_ends) if pending_roots else None
    order = np.array(ends.nodes, dtype=np.int64) if ends is not None else None
    unfinished = {m for group in topology.unfinished for m in group}
    # the strong candidates of every call first (lookups), then every pair decided grouped by its
    # earlier call (whose messages the pass's cache then reads once), then the weak candidates of
    # the calls no strong one decided
    best: dict[int, tuple[tuple, Decision, Pair, int]] = {}
    pairs: list[tuple[int, int, NearMiss | None]] = []
    for later in todo:
        twins = (same if later in root_set else siblings).members(later) if n_prompts[later] else []
        twin = run.latest(twins, later) if twins else None  # (members are in arrival order)
        request = run.same_request(twins, later) if twins else None
        replay = replays.get(later)
        spawner = run.spawner(later) if run.has_messages(later) else None
        for e in (request, spawner, twin):
            if e is not None:
                pairs.append((e, later, None))
        if replay is not None and run.allowed(replay.earlier, later):
            pairs.append((replay.earlier, later, replay))
    run.consider_all(pairs, best)
    pairs = []
    for later in todo:
        if later in best and best[later][1].strength >= REPLAY_STRENGTH:
            continue
        weak = []
        if later in root_set and ends is not None:
            weak += [c for _, c in _best_candidates(calls, later, ends, topology.root_of, order)]
        if later in branches:
            weak.append(_last_before(topology, branches[later], later))
        conversation = run.conversation(later) if run.has_messages(later) else None
        if conversation is not None:
            weak.append(conversation)
        pairs += [(e, later, None) for e in weak if run.allowed(e, later)]
    run.consider_all(pairs, best)
    # a call decided from its messages that carries part of an earlier conversation: that
    # conversation as it stood before it (of every candidate that carried some), the conversation
    # it opens as (the same first message), and a conversation pasted into a user message (the call
    # of its last reply)
    pairs = []
    for later, (_, decision, _, e) in best.items():
        if decision.strength > CONVERSATION_STRENGTH or not run.has_messages(later):
            continue  # (decided strongly, or nothing but ids to read)
        for other, considered in run.decided.get(later, ()):
            if considered.carried and considered.kind != COMPACTION:
                pairs += [(last, later, None) for last in run.compacted(other, later, 1)]
        # a single call of its own (a title, a summary): beside the conversation as it stood then
        if decision.kind == SIDE_CALL and (not decision.carried or decision.rule == "apart"):
            before = run.conversation_before(later)
            if before is not None and before != e:
                if decision.rule == "another job" and run.same_system(before, e):
                    # the same evidence against a call of the same conversation family: named beside
                    # the one that came last, its ids compared again (the kind and words stand)
                    q = run.pair(before, later)
                    best[later] = ((decision.strength, decision.carried, q.shared, before), decision, q, before)
                else:
                    pairs.append((before, later, None))
        opening = run.same_opening(later)
        if opening is not None:
            pairs.append((opening, later, None))
            pairs += [(last, later, None) for last in run.compacted(opening, later, 1)]
        pasted = any(code == "pasted" for code, _ in decision.facts)
        if pasted or decision.kind == COMPACTION or decision.rule == "apart":
            source = run.pasted_source(later)
            if source is not None and source != e:
                pairs.append((source, later, None))
    run.consider_all(pairs, best)
    found: dict[int, NearMiss] = {}
    for later in todo:
        if later not in best:
            continue
        _, decision, p, e = best[later]
        if decision.kind == COMPACTION:  # named against the conversation it compacted, as it stood
            summary = p.summary_by  # (the conversation the summary put in its place summarised, first)
            summarised = found.get(run.index_of(summary)) if summary is not None else None
            tried = [summarised.earlier] if summarised is not None and summarised.kind == SIDE_CALL else []
            for last in [*tried, *run.compacted(e, later)]:
                if last == e:
                    break
                again, q = run.decide(last, later)
                if again.kind == COMPACTION:
                    decision, p, e = again, q, last
                    break
        carried_on = any(key == REPLY_CARRIED for key, _ in decision.facts)
        if later in unfinished and later not in root_set and decision.strength < ATTEMPT and not carried_on:
            continue  # an attempt nobody continued is named only when its messages or ids show why
        found[later] = _miss(calls, later, decision, p, e)
    return found


@_never_fails
def replacements(
    calls: list[Call],
    topology,
    misses: dict[int, NearMiss],
    decoder: Decoder | None = None,
    *,
    run: _Pass | None = None,
) -> dict[int, NearMiss]:
    """For a call that looks dropped, the LATER call that replaced it, keyed by the earlier call
    (``node == earlier``): the first later call whose near miss re-sent, replayed, rejected,
    compacted or resumed it (when it is a leaf: nothing continued it exactly); then, for a discarded
    call none names so, the sibling that continued after it, decided by the same table."""
    run = run if run is not None else _Pass(calls, topology, decoder)
    children, discarded = topology.children, topology.discarded
    out: dict[int, NearMiss] = {}
    for later, m in sorted(misses.items()):
        e = m.earlier
        if e in out or children[e] or m.kind not in REPLACING:
            continue
        out[e] = NearMiss(e, later, e, later, m.common_prefix, m.kept, m.where, m.kind, m.text_checked, m.evidence,
                          m.rule, m.facts)  # fmt: skip
    for d, s in sorted(discarded.items()):
        if d in out or s < d or calls[d].prompt_ids is None or calls[s].prompt_ids is None:
            continue  # (a discarded call that came after the sibling that continued: its own near miss says why)
        named = misses.get(s)
        if named is not None and named.earlier == d:
            out[d] = NearMiss(d, s, d, s, named.common_prefix, named.kept, named.where, named.kind,
                              named.text_checked, named.evidence, named.rule, named.facts)  # fmt: skip
            continue
        decision, p = run.decide(d, s)
        out[d] = NearMiss(d, s, d, s, p.shared, p.kept, p.where, decision.kind, decision.text_checked,
                          decision.evidence, decision.rule, decision.facts)  # fmt: skip
    return out


def near_misses_and_replacements(
    calls: list[Call], topology, decoder: Decoder | None = None
) -> tuple[dict[int, NearMiss], dict[int, NearMiss]]:
    """:func:`near_misses` and then :func:`replacements` of one rollout on one pass (its set-up and
    caches built once, not once each); each still never fails (an error in either leaves it empty)."""
    try:
        run: _Pass | None = _Pass(calls, topology, decoder)
    except Exception:  # noqa: BLE001 (each pass below builds its own, under its own guard, and logs why)
        run = None
    misses = near_misses(calls, topology, decoder, run=run)
    return misses, replacements(calls, topology, misses, decoder, run=run)


def replayed(misses: dict[int, NearMiss], kinds: tuple[str, ...] = BROKEN_REPLAYS) -> set[int]:
    """Both ends of every broken replay (the reply replayed and the call replaying it), of every
    spawned subagent (the call and the subagent its tool call started) and of every resume that
    carries the earlier reply: calls the harness carried on in text, so neither an unfinished
    attempt nor discarded by a retry."""
    return {
        end
        for m in misses.values()
        if m.kind in kinds or m.rule == SPAWNED or any(key == REPLY_CARRIED for key, _ in m.facts)
        for end in (m.earlier, m.later)
    }


def replay_chains(calls: list[Call], misses: dict[int, NearMiss]) -> list[list[int]]:
    """Re-tokenized replays linked end to end (each replaying the reply of the one before): one
    conversation each, in order, longest first."""
    after: dict[int, int] = {}
    for m in sorted(misses.values(), key=lambda m: (m.earlier, m.later)):
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


__all__ = [
    "REPLACING", "near_misses", "near_misses_and_replacements", "replacements", "replay_chains", "replayed", "text_replays", "_breaks_inside_reply",
    "_first_item",
]  # fmt: skip
