"""The record types every loader produces and every analysis consumes.

A :class:`Call` is one model call as the capture proxy saw it. Token ids live in numpy arrays
(int32 where the ids fit) because a rollout's prompts repeat the whole context on every call and
reach tens of millions of tokens. A loaded prompt is usually a read-only view of an id arena its
parent's prompt shares (rollout_graph.ingest.shortcuts.id_arrays): copy an array before writing into it.
Message dicts and tool lists repeated across calls may be one shared object
(rollout_graph.core.messages.share_repeats): never write into a loaded call's messages.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, overload

import numpy as np

from rollout_graph.core.types import FATAL as FATAL
from rollout_graph.core.types import INFO as INFO
from rollout_graph.core.types import LEVELS as LEVELS
from rollout_graph.core.types import WARN as WARN
from rollout_graph.core.types import Level, NearMissKind

EMPTY_IDS = np.empty(0, dtype=np.int32)


def short(value: object, limit: int = 40, quoted: bool = True) -> str:
    """``repr(value)`` cut to ``limit`` characters (with an ellipsis): reprs stay one short line
    whatever a trace put in its ids and texts (controls stay escaped). ``quoted=False`` drops a
    string's quotes."""
    text = repr(value)
    if not quoted and isinstance(value, str):
        text = text[1:-1]
    return text if len(text) <= limit else text[: limit - 1] + "…"


def node_path(nodes: list[int], shown: int = 4) -> str:
    """Arrival indices as ``#0 -> #1 -> … -> #9``: the first and last few when there are many."""
    if len(nodes) <= shown + 1:
        return " -> ".join(f"#{n}" for n in nodes)
    head = " -> ".join(f"#{n}" for n in nodes[: shown - 1])
    return f"{head} -> … -> #{nodes[-1]}"


@dataclass(frozen=True, slots=True, repr=False)
class Finding:
    """One graded observation. ``node_id`` names the call; ``leaf_id`` names a sequence."""

    level: Level
    code: str
    detail: str
    node_id: str | None = None
    leaf_id: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The finding as JSON (leaf id only when set)."""
        out: dict[str, Any] = {"level": self.level, "code": self.code, "node_id": self.node_id}
        if self.leaf_id is not None:
            out["leaf_id"] = self.leaf_id
        out["detail"] = self.detail
        return out

    def __repr__(self) -> str:
        where = f" at {short(self.node_id)}" if self.node_id is not None else ""
        where += f" (row {short(self.leaf_id)})" if self.leaf_id is not None else ""
        return f"Finding({self.level} {short(self.code, 30, quoted=False)}{where}: {short(self.detail, 60)})"


_T = TypeVar("_T")


class _ReadFirst(Generic[_T]):
    """A :class:`TopK` attribute that reads deferred alternatives first (on get) or replaces them
    (on set: whatever was left in the file is read before, so nothing read later overwrites it)."""

    def __init__(self, doc: str) -> None:
        self.__doc__ = doc

    def __set_name__(self, owner: type, name: str) -> None:
        self._slot = f"_{name}"

    @overload
    def __get__(self, top: None, owner: type) -> _ReadFirst[_T]: ...
    @overload
    def __get__(self, top: TopK, owner: type) -> _T: ...
    def __get__(self, top: TopK | None, owner: type) -> _T | _ReadFirst[_T]:
        if top is None:
            return self
        if top._load is not None:
            top._resolve()
        value: _T = getattr(top, self._slot)
        return value

    def __set__(self, top: TopK, value: _T) -> None:
        top._resolve()
        setattr(top, self._slot, value)


class TopK:
    """Recorded alternatives per sampled position, padded to a common width.

    ``ids`` is -1 where an alternative is missing or was recorded only as text; ``texts`` keeps
    the alternatives' strings (row-major, ``n_sampled * k``) when the trace carried strings.

    A loader may leave the alternatives in the file until they are first read
    (:meth:`deferred`): the first access to ``ids``, ``logprobs`` or ``texts`` decodes them
    (docs/performance.md, "The cold path"). If they can no longer be read then (the file changed
    or went away), they are empty (``k`` = 0) and :attr:`unavailable` says why.
    """

    __slots__ = ("_ids", "_logprobs", "_texts", "_load", "_rows", "_unavailable")

    def __init__(self, ids: np.ndarray, logprobs: np.ndarray, texts: list[str] | None = None) -> None:
        self._ids = ids  # (n_sampled, k) int32 when every id fits, else int64; -1 = absent
        self._logprobs = logprobs  # (n_sampled, k) float32, NaN = absent
        self._texts = texts
        self._load: Callable[[], TopK] | None = None
        self._rows = int(ids.shape[0]) if ids.ndim else 0
        self._unavailable: str | None = None

    @classmethod
    def deferred(cls, rows: int, load: Callable[[], TopK]) -> TopK:
        """Alternatives for ``rows`` sampled positions, decoded by ``load()`` when first read.

        ``load`` must never raise: it returns empty alternatives with :attr:`unavailable` set.
        """
        top = cls(_NO_IDS, _NO_LOGPROBS)
        top._rows = rows
        top._load = load
        return top

    @property
    def pending(self) -> bool:
        """Whether the alternatives are still unread (left in the file)."""
        return self._load is not None

    @property
    def rows(self) -> int:
        """Sampled positions covered (known without reading deferred alternatives)."""
        return self._rows

    def _resolve(self) -> None:
        load = self._load
        if load is None:
            return
        top = load()
        self._ids, self._logprobs, self._texts = top.ids, top.logprobs, top.texts
        self._unavailable = top.unavailable
        self._load = None

    unavailable: _ReadFirst[str | None] = _ReadFirst(
        "Why deferred alternatives could not be read (None when they were, or never deferred)."
    )
    ids: _ReadFirst[np.ndarray] = _ReadFirst("The alternatives' ids, ``(n_sampled, k)``.")
    logprobs: _ReadFirst[np.ndarray] = _ReadFirst("Their logprobs, ``(n_sampled, k)`` float32.")
    texts: _ReadFirst[list[str] | None] = _ReadFirst("Their strings (row-major), when the trace carried strings.")

    def __getstate__(self) -> tuple[Any, ...]:
        return (self._ids, self._logprobs, self._texts, self._load, self._rows, self._unavailable)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self._ids, self._logprobs, self._texts, self._load, self._rows, self._unavailable = state

    def __repr__(self) -> str:
        if self._load is not None:
            return f"TopK({self._rows} positions, alternatives not read yet)"
        rows, width = self._ids.shape if self._ids.ndim == 2 else (len(self._ids), 0)
        return f"TopK({rows} positions x {width} alternatives{', with texts' if self._texts is not None else ''})"


_NO_IDS = np.empty((0, 0), dtype=np.int32)
_NO_LOGPROBS = np.empty((0, 0), dtype=np.float32)


class MessagesInFile:
    """A call's request messages left in its trace file by the loader, read when asked
    (``Call.request_messages`` reads them; docs/performance.md, "Request messages left in the
    file"). A one-shot command that never writes a cache (``--no-cache``) holds none of the
    message texts this way: a summary reads most of them once, a few calls again, and never
    needs them all at once.

    The messages last read are kept (:data:`KEPT_BYTES` of their JSON, the first read dropped
    first), so reading one call's messages several times in a row reads the file once.
    A subclass implements :meth:`read`: the messages exactly as the loader built them, or None
    with :attr:`unavailable` set when the file no longer holds them."""

    __slots__ = ("unavailable",)
    KEPT_BYTES = 256 << 10
    _kept: OrderedDict[int, tuple[MessagesInFile, list[dict[str, Any]] | None]] = OrderedDict()
    _kept_bytes = [0]
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.unavailable: str | None = None

    @property
    def size(self) -> int:
        """Bytes of the messages' JSON (what reading them costs)."""
        raise NotImplementedError

    def read(self) -> list[dict[str, Any]] | None:
        """The messages, read from the file now (None with ``unavailable`` set if they cannot be)."""
        raise NotImplementedError

    def messages(self) -> list[dict[str, Any]] | None:
        """The messages, from the recently read ones or the file."""
        hit = self._kept.get(id(self))  # no lock: one dict lookup, and the entry names its owner
        if hit is not None and hit[0] is self:
            return hit[1]
        value = self.read()
        if self.unavailable is not None:  # not kept: a later read may succeed
            return value
        with self._lock:
            old = self._kept.pop(id(self), None)
            if old is not None:
                self._kept_bytes[0] -= old[0].size
            self._kept[id(self)] = (self, value)
            self._kept_bytes[0] += self.size
            while self._kept_bytes[0] > self.KEPT_BYTES and len(self._kept) > 1:  # the first read first
                _, (dropped, _) = self._kept.popitem(last=False)
                self._kept_bytes[0] -= dropped.size
        return value

    @classmethod
    def forget(cls) -> None:
        """Drop every kept message list (tests; a process that loaded another trace)."""
        with cls._lock:
            cls._kept.clear()
            cls._kept_bytes[0] = 0


@dataclass(slots=True, repr=False)
class Call:
    """One model call: what the engine saw, what it sampled, and where the record came from."""

    node_id: str
    session_id: str
    source: str
    line: int
    shape: str
    prompt_ids: np.ndarray | None = None
    sampled_ids: np.ndarray = field(default_factory=lambda: EMPTY_IDS)
    sampled_logprobs: np.ndarray | None = None
    top_k: TopK | None = None
    token_texts: list[str] | None = None
    # May be held as a MessagesInFile (read on access, see below); reading always gives a list or None.
    request_messages: list[dict[str, Any]] | None = None
    response_message: dict[str, Any] | None = None
    tools: list[Any] | None = None
    requested_params: dict[str, Any] = field(default_factory=dict)
    submitted_params: dict[str, Any] | None = None
    model: str | None = None
    finish_reason: str | None = None
    timing: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, Any] | None = None
    harness: str | None = None
    # Findings discovered while reading this record (bad ids, bad logprobs, odd fields).
    issues: list[Finding] = field(default_factory=list)
    # What a rollout document claimed about this node (parent, trainable, ...), for comparison.
    claims: dict[str, Any] = field(default_factory=dict)

    # The lengths are read a few hundred thousand times by a 5,000-call analysis: ``len`` of the
    # one-dimensional arrays (their ``shape[0]``), without a property calling another.
    @property
    def n_prompt(self) -> int:
        """Number of prompt ids (0 when the record carried none)."""
        ids = self.prompt_ids
        return 0 if ids is None else len(ids)

    @property
    def n_sampled(self) -> int:
        """Number of sampled ids."""
        return len(self.sampled_ids)

    @property
    def n_end(self) -> int:
        """Length of the end ids; a call without prompt ids has no known end sequence."""
        ids = self.prompt_ids
        return 0 if ids is None else len(ids) + len(self.sampled_ids)

    @property
    def has_tools(self) -> bool:
        """Whether the request offered tools (a sign of the agent's calls): its tool list, else the
        count a rollout document gives without the list (OpenEnv's ``n_tools``)."""
        return bool(self.tools) or (self.tools is None and bool(self.claims) and bool(self.claims.get("n_tools")))

    @property
    def logprobs_aligned(self) -> bool:
        """Whether there is exactly one logprob per sampled token (required for training)."""
        lps = self.sampled_logprobs
        return lps is not None and lps.shape[0] == len(self.sampled_ids)

    def add_issue(self, level: Level, code: str, detail: str) -> None:
        """Record a finding discovered while reading this call."""
        self.issues.append(Finding(level, code, detail, node_id=self.node_id))

    def __repr__(self) -> str:
        source = self.source.replace("\\", "/").rsplit("/", 1)[-1]
        return (
            f"Call({short(self.node_id)} of {short(self.session_id)}: prompt {self.n_prompt} + sampled "
            f"{self.n_sampled} tokens, finish {short(self.finish_reason, 16)}, from {short(source, 30, quoted=False)}:{self.line})"
        )


_MESSAGES_SLOT = Call.__dict__["request_messages"]  # the dataclass's slot for the field


def _get_messages(call: Call) -> list[dict[str, Any]] | None:
    value = _MESSAGES_SLOT.__get__(call, Call)
    if isinstance(value, MessagesInFile):
        return value.messages()
    return value  # type: ignore[no-any-return]


def _set_messages(call: Call, value: list[dict[str, Any]] | MessagesInFile | None) -> None:
    _MESSAGES_SLOT.__set__(call, value)


def leave_in_file(call: Call, left: MessagesInFile) -> None:
    """Hold the call's request messages as ``left`` (read from the file when asked)."""
    _MESSAGES_SLOT.__set__(call, left)


def messages_left_in_file(call: Call) -> MessagesInFile | None:
    """The call's request messages when they are still in the file (None when they are held)."""
    value = _MESSAGES_SLOT.__get__(call, Call)
    return value if isinstance(value, MessagesInFile) else None


# ``Call.request_messages`` reads messages left in the file; everything else (the constructor,
# equality, pickling, dataclasses.replace) goes through it and sees the list.
_MESSAGES = property(_get_messages, _set_messages, doc="The request's messages (None: the record had none).")
Call.request_messages = _MESSAGES  # type: ignore[misc,assignment]


@dataclass(frozen=True, slots=True, repr=False)
class Skipped:
    """A record that could not be loaded at all, and why."""

    file: str
    line: int
    reason: str

    def as_dict(self) -> dict[str, Any]:
        """The skipped record as JSON: file, line and reason."""
        return {"file": self.file, "line": self.line, "reason": self.reason}

    def __repr__(self) -> str:
        name = self.file.replace("\\", "/").rsplit("/", 1)[-1]
        return f"Skipped({short(name, quoted=False)} line {self.line}: {short(self.reason, 80)})"


@dataclass(slots=True, repr=False)
class SessionInput:
    """The calls of one rollout in arrival order, plus what a rollout document said of it."""

    session_id: str
    calls: list[Call] = field(default_factory=list)
    document: dict[str, Any] | None = None
    node_ids: set[str] = field(default_factory=set)
    # The links of ``calls`` (rollout_graph.core.linking.Links) as a reopened cache entry holds them
    # (graph/ingest/load/cache.py), so the analysis need not link again; None when not known.
    links: Any = field(default=None, compare=False)

    def __repr__(self) -> str:
        document = ", from a rollout document" if self.document is not None else ""
        return f"SessionInput({short(self.session_id)}: {len(self.calls)} calls{document})"


@dataclass(slots=True, repr=False)
class LoadResult:
    """Everything read from a set of files. ``records == loaded + len(skipped)`` always holds."""

    sessions: dict[str, SessionInput] = field(default_factory=dict)
    records: int = 0
    loaded: int = 0
    skipped: list[Skipped] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    # Last lines still being written (no newline yet, not parseable): neither loaded nor skipped.
    pending: list[Skipped] = field(default_factory=list)

    @property
    def nothing_readable(self) -> bool:
        """No trace file was found, or every one failed to open (an empty file is readable)."""
        unreadable = {s.file for s in self.skipped if s.line == 0}
        return not self.files or set(self.files) <= unreadable

    def report(self) -> dict[str, Any]:
        """The load report as JSON: records read, loaded, skipped, with reasons."""
        return {
            "records": self.records,
            "loaded": self.loaded,
            "skipped": [s.as_dict() for s in self.skipped],
            "files": list(self.files),
            "pending": [p.as_dict() for p in self.pending],
        }

    def __repr__(self) -> str:
        pending = f", {len(self.pending)} pending" if self.pending else ""
        first = f"; first: {short(self.skipped[0], 70)}" if self.skipped else ""
        return (
            f"LoadResult({len(self.files)} files, {len(self.sessions)} rollouts, {self.records} records: "
            f"{self.loaded} loaded, {len(self.skipped)} skipped{pending}{first})"
        )


@dataclass(frozen=True, slots=True)
class NearMiss:
    """One explained break: ``later``'s prompt against ``earlier``'s end ids (``earlier`` arrived
    first). Kept under ``later`` in ``Rollout.near_misses`` (``node == later``), and under
    ``earlier`` in ``Rollout.replaced_by`` when the later call replaced it (``node == earlier``)."""

    node: int  # the call this is kept under: ``later`` (its near miss) or ``earlier`` (replaced by ``later``)
    other: int  # the call at the other end
    earlier: int  # whose end ids are compared ...
    later: int  # ... with whose prompt ids
    common_prefix: int
    kept: float  # share of the earlier call's sampled tokens kept before the break
    where: str  # the break falls in the earlier call's "prompt", "sampled" span, or "after" it
    kind: NearMissKind
    text_checked: bool = False  # a tokenizer compared the decoded texts (retokenized or not)
    evidence: str = ""  # what the kind was read from, in words (docs/semantics.md, "Why a call broke")
    rule: str = ""  # the decision-table row that named the kind (docs/semantics.md)
    facts: tuple[tuple[str, str], ...] = ()  # (fact, in words): each piece of evidence the row read

    def __post_init__(self) -> None:
        facts = self.facts
        if facts.__class__ is not tuple or (facts and facts[0].__class__ is not tuple):
            object.__setattr__(self, "facts", tuple((str(f[0]), str(f[1])) for f in self.facts))  # read back from JSON
