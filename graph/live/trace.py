"""Traces that grow while they are looked at: files (and folders, for new files) followed by
offset, calls linked incrementally, rollouts re-analysed only where something changed.

The state after each :meth:`LiveTrace.poll` equals what a batch load of the same bytes gives
(``inspect``): the same records, skipped lines, sessions and parents, because each line goes
through the batch per-line parser and loader (:func:`rollout_graph.ingest.load.calls.add_value`) and the
incremental linker equals batch linking in batch order: files in the order the paths were given
(a folder's files sorted), lines in file order. Only a last line still being written differs: it
waits (pending) instead of being a bad record.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rollout_graph.core.records import Call, LoadResult, SessionInput, Skipped
from rollout_graph.core.rollout import Rollout
from rollout_graph.ingest.files.sources import path_text
from rollout_graph.ingest.load.calls import add_value
from rollout_graph.ingest.load.trace_files import rollout_name, trace_files
from rollout_graph.live.linking import IncrementalLinker
from rollout_graph.live.reading import FileFollower, whole_lines
from rollout_graph.pipeline import analyse

# The first look at files this big in total reads them like ``inspect`` does (on every core, from
# the persistent cache when they were read before) instead of line by line; they are followed from
# their end. The result is the same (the batch loader is what following equals).
BATCH_MIN_BYTES = 16 << 20

NEW = "new"
REMOVED = "removed"


@dataclass(frozen=True, slots=True)
class Notice:
    """Something that happened to a file: ``new``, ``removed``, ``truncated``, ``replaced`` or
    ``changed`` (the last three: read again from the start, its earlier calls dropped)."""

    file: str
    kind: str
    dropped: int = 0  # calls dropped by a restart


@dataclass(slots=True)
class Update:
    """What one poll changed."""

    added: list[Call] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    notices: list[Notice] = field(default_factory=list)
    sessions: set[str] = field(default_factory=set)  # sessions whose calls or links changed

    @property
    def changed(self) -> bool:
        """Anything new at all (a pending partial line is not)."""
        return bool(self.added or self.skipped or self.notices or self.sessions)


class _Session:
    """One session's calls: an incremental linker, and the calls the batch loader read first
    (``seed``), which join the linker only when something needs it (a call appended, a file
    dropped): until then the rollout is linked in one batch, which is faster and equal."""

    def __init__(self) -> None:
        self._linker = IncrementalLinker()
        self.seed: list[tuple[Call, Any]] = []
        self.version = 0
        self.rollout: tuple[int, Rollout] | None = None

    @property
    def linker(self) -> IncrementalLinker:
        if self.seed:
            seed, self.seed = self.seed, []
            for call, key in seed:
                self._linker.add(call, key=key)
        return self._linker

    @linker.setter
    def linker(self, value: IncrementalLinker) -> None:
        self._linker, self.seed = value, []


class LiveTrace:
    """The followed paths' current content, loaded and linked; :meth:`poll` reads what is new."""

    def __init__(
        self,
        paths: list[str] | list[Path],
        store_delay: float = 0.0,
        defer_store: Callable[[str, LoadResult], None] | None = None,
        use_cache: bool = True,
        cache_folder: Path | None = None,
    ) -> None:
        """``store_delay``: when the first look reads the files with the batch loader, how long to
        wait before writing the persistent cache entry; ``defer_store``: who writes it instead, and
        when (``rollout_graph.ingest.load.files.load_files``); ``use_cache`` False reads and caches
        nothing (``--no-cache``), ``cache_folder`` is the cache's folder (``--cache-dir``)."""
        self.paths = [Path(p) for p in paths]
        self.use_cache, self.cache_folder = use_cache, cache_folder
        self.store_delay = store_delay
        self.defer_store = defer_store
        self._ahead: threading.Thread | None = None  # the first poll, started early (read_ahead)
        self._ahead_result: tuple[Update | None, BaseException | None] = (None, None)
        self._held: tuple[str, LoadResult] | None = None  # a cache entry waiting for a writer
        self._store_lock = threading.Lock()
        self.loaded = LoadResult()
        self.polls = 0
        self.pending: dict[str, int] = {}  # file -> bytes of an unfinished last line
        self.newest: dict[str, str] = {}  # session -> node id of the call read last
        self._followers: dict[tuple[int, str], FileFollower] = {}
        self._missing: set[str] = set()
        self._sessions: dict[str, _Session] = {}
        self._shared_text: dict[str, str] = {}

    # -- reading ----------------------------------------------------------------------------------

    def read_ahead(self) -> None:
        """Start the first poll now, on a thread, and analyse every rollout it reads: a server calls
        this when it starts, so the first visitor finds the trace read (or partly read) instead of
        starting the read. The next :meth:`poll` waits for it and returns its update. A cache entry
        the read makes waits (:meth:`hand_store_to`) until someone will write it; with nobody, it
        is not written."""
        if self._ahead is not None or self.polls:
            return

        def first() -> None:
            try:
                update = self._poll()
                for sid in self.session_ids:
                    self.rollout(sid)  # analysed now: the first page asks for every rollout
                self._ahead_result = (update, None)
            except BaseException as exc:  # noqa: BLE001 - handed to the poll that waits for it
                self._ahead_result = (None, exc)

        self._ahead = threading.Thread(target=first, name="rg-read-ahead", daemon=True)
        self._ahead.start()

    @property
    def first_read_done(self) -> bool:
        """Whether the first read (and the analysis of every rollout it read) has ended: the next
        :meth:`poll` returns at once with what was read."""
        ahead = self._ahead
        return not ahead.is_alive() if ahead is not None else self.polls > 0

    def hand_store_to(self, writer: Callable[[str, LoadResult], None]) -> None:
        """Who writes the persistent cache entry of the first read from now on; an entry already
        waiting is handed over at once."""
        with self._store_lock:
            self.defer_store = writer
            held, self._held = self._held, None
        if held is not None:
            writer(*held)

    def _store_later(self, key: str, result: LoadResult) -> None:
        with self._store_lock:
            writer = self.defer_store
            if writer is None:
                self._held = (key, result)
                return
        writer(key, result)

    def poll(self) -> Update:
        """Look for new files and new bytes; load, link and return what changed."""
        ahead = self._ahead
        if ahead is not None:  # the first poll was started early: its update is this one
            ahead.join()
            self._ahead = None
            update, error = self._ahead_result
            self._ahead_result = (None, None)
            if error is not None:
                raise error
            assert update is not None
            return update
        return self._poll()

    def _poll(self) -> Update:
        self.polls += 1
        update = Update()
        self._discover(update)
        if self.polls == 1:
            self._read_leading_files(update)
        for (arg, name), follower in self._ordered():
            read = follower.read()
            shown = path_text(name)  # what reports carry: a name that is not UTF-8, escaped
            if read.missing:
                if name not in self._missing:
                    self._missing.add(name)
                    update.notices.append(Notice(shown, REMOVED))
                continue
            self._missing.discard(name)
            if read.reset is not None:
                update.notices.append(Notice(shown, read.reset, self._drop_file(shown, update)))
            self.pending[shown] = read.pending
            default_session = rollout_name(shown)
            parts = Path(name).parts
            for raw in read.values:
                before = len(self.loaded.skipped)
                calls = add_value(self.loaded, raw, shown, default_session, self._shared_text)
                update.skipped.extend(self.loaded.skipped[before:])
                for k, call in enumerate(calls):
                    session = self._session(call.session_id)
                    session.linker.add(call, key=(arg, parts, raw.line, k))
                    session.version += 1
                    update.sessions.add(call.session_id)
                    self.newest[call.session_id] = call.node_id
                update.added.extend(calls)
        for sid in update.sessions:
            if sid in self.loaded.sessions and not self._sessions[sid].seed:  # seeded calls are in order
                self.loaded.sessions[sid].calls = self._sessions[sid].linker.links()[0]
        return update

    def _ordered(self) -> list[tuple[tuple[int, str], FileFollower]]:
        """The followed files in batch order: paths as given, a folder's files sorted."""
        return sorted(self._followers.items(), key=lambda kv: (kv[0][0], Path(kv[0][1]).parts))

    def _read_leading_files(self, update: Update) -> None:
        """First poll: the leading plain JSON-lines files (every line complete), when big, are read
        by the batch loader, which parses on every core and keeps a persistent cache; following
        starts at their end. Files after the first that cannot be read that way are followed line
        by line, on top, exactly as before; if a file changes during the read, the result is dropped
        and everything is read line by line."""
        lead: list[tuple[int, str, FileFollower, tuple[int, tuple[int, int], int]]] = []
        for (arg, name), follower in self._ordered():
            found = whole_lines(follower.path)
            if found is None:
                break
            lead.append((arg, name, follower, found))
        if not lead or sum(found[0] for *_, found in lead) < BATCH_MIN_BYTES:
            return
        from rollout_graph.ingest.load.files import load_files

        early = self._ahead is not None  # read ahead: the entry waits for whoever will write it
        result = load_files(
            [f.path for _, _, f, _ in lead],
            background_store=True,
            store_delay=self.store_delay,
            use_cache=self.use_cache,
            folder=self.cache_folder,
            defer_store=self._store_later if early else self.defer_store,
        )
        if any(whole_lines(f.path) != found for _, _, f, found in lead) or set(result.files) != {
            n for _, n, _, _ in lead
        }:
            return
        position = {name: (arg, Path(name).parts) for arg, name, _, _ in lead}
        self.loaded.sessions = result.sessions
        self.loaded.records, self.loaded.loaded = result.records, result.loaded
        self.loaded.skipped = list(result.skipped)
        update.skipped.extend(result.skipped)
        for sid, inputs in result.sessions.items():
            session = self._session(sid)
            seen: dict[tuple[str, int], int] = {}
            for call in inputs.calls:
                k = seen.get((call.source, call.line), 0)
                seen[(call.source, call.line)] = k + 1
                arg, parts = position[call.source]
                session.seed.append((call, (arg, parts, call.line, k)))
            session.version += 1
            update.sessions.add(sid)
            update.added.extend(inputs.calls)
            if inputs.calls:
                self.newest[sid] = inputs.calls[-1].node_id
        for _, _, follower, (size, identity, _) in lead:
            follower.adopt(size, identity)

    def _discover(self, update: Update) -> None:
        for arg, path in enumerate(self.paths):
            if not path.exists():
                continue
            for f in trace_files(path):
                if (arg, str(f)) not in self._followers:
                    self._followers[(arg, str(f))] = FileFollower(f)
                    self.loaded.files.append(str(f))
                    update.notices.append(Notice(path_text(str(f)), NEW))

    def _session(self, sid: str) -> _Session:
        session = self._sessions.get(sid)
        if session is None:
            session = self._sessions[sid] = _Session()
        return session

    def _drop_file(self, name: str, update: Update) -> int:
        """Forget every call and skipped record read from ``name`` (as shown); relink what is left."""
        skipped = [s for s in self.loaded.skipped if s.file == name]
        self.loaded.skipped = [s for s in self.loaded.skipped if s.file != name]
        self.loaded.records -= len(skipped)
        dropped = 0
        for sid, session in list(self._sessions.items()):
            linker = session.linker
            gone = [n for n in linker.order() if linker.calls[n].source == name]
            if not gone:
                continue
            dropped += len(gone)
            keep = [(linker.calls[n], linker.keys[n]) for n in linker.order() if linker.calls[n].source != name]
            fresh = IncrementalLinker()
            for call, key in keep:
                fresh.add(call, key)
            session.linker = fresh
            session.version += 1
            update.sessions.add(sid)
            inputs = self.loaded.sessions[sid]
            if keep:
                inputs.calls = [c for c, _ in keep]
                inputs.node_ids = {c.node_id for c in inputs.calls}
            else:
                del self.loaded.sessions[sid]
                del self._sessions[sid]
                self.newest.pop(sid, None)
        self.loaded.records -= dropped
        self.loaded.loaded -= dropped
        return dropped

    # -- results ----------------------------------------------------------------------------------

    @property
    def session_ids(self) -> list[str]:
        """The sessions read so far, in load order."""
        return list(self.loaded.sessions)

    def version(self, sid: str) -> int:
        """Grows whenever the session's calls or links change."""
        return self._sessions[sid].version

    def rollout(self, sid: str) -> Rollout:
        """The session analysed with its incremental links (cached until it changes)."""
        session = self._sessions[sid]
        if session.rollout is None or session.rollout[0] != session.version:
            inputs = self.loaded.sessions[sid]
            known = None  # a reopened cache entry's links, which analyse takes when they are of these calls
            if session.seed:  # only what the batch loader read: linked in one batch (or by that entry)
                calls, links, known = [call for call, _ in session.seed], None, inputs.links
            else:
                calls, links = session.linker.links()
            snapshot = SessionInput(sid, calls, inputs.document, set(inputs.node_ids), links=known)
            session.rollout = (session.version, analyse(snapshot, links=links))
        return session.rollout[1]

    def snapshot(self) -> LoadResult:
        """A copy of the load result that later polls do not change (for readers on other threads)."""
        return LoadResult(
            sessions={
                sid: SessionInput(sid, list(s.calls), s.document, set(s.node_ids))
                for sid, s in self.loaded.sessions.items()
            },
            records=self.loaded.records,
            loaded=self.loaded.loaded,
            skipped=list(self.loaded.skipped),
            files=list(self.loaded.files),
        )

    def pending_bytes(self) -> dict[str, Any]:
        """Files whose last line is still unfinished, and how many bytes wait."""
        return {name: n for name, n in self.pending.items() if n}


# Traces whose first read a server started when it started (``rollout-graph view``), by their
# paths: the app's first look takes its trace from here instead of starting the read.
_READ_AHEAD: dict[tuple[str, ...], LiveTrace] = {}
_READ_AHEAD_LOCK = threading.Lock()


def _paths_key(paths: list[str] | list[Path]) -> tuple[str, ...]:
    return tuple(str(Path(p)) for p in paths)


def read_ahead(paths: list[str] | list[Path]) -> LiveTrace:
    """Start the first read of these paths now (:meth:`LiveTrace.read_ahead`), for
    :func:`take_read_ahead` to find."""
    with _READ_AHEAD_LOCK:
        trace = _READ_AHEAD.get(_paths_key(paths))
        if trace is None:
            trace = _READ_AHEAD[_paths_key(paths)] = LiveTrace(paths)
    trace.read_ahead()
    return trace


def take_read_ahead(
    paths: list[str] | list[Path], defer_store: Callable[[str, LoadResult], None] | None = None
) -> LiveTrace | None:
    """The trace :func:`read_ahead` started for these paths (once: it is removed here), its cache
    entry handed to ``defer_store``; None when none was started."""
    with _READ_AHEAD_LOCK:
        trace = _READ_AHEAD.pop(_paths_key(paths), None)
    if trace is not None and defer_store is not None:
        trace.hand_store_to(defer_store)
    return trace
