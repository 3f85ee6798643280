"""A rollout's search index, built on a background thread once the first page is drawn, so the
first search answers as fast as the next (docs/performance.md "Keys and the first search").

Entry points: ``prepare(index, session_id, activity)`` and ``PreparedIndex`` (``searching()``: a
search waits for a build under way, or builds what it reads itself). The build runs at low
priority after no page has run for ``QUIET`` seconds and pauses while any page runs; built in
the background or by the search, the index and its hits are the same.

Where it sits: used by views/panels/find.py; the index is rollout_graph.analysis.search.SearchIndex."""

from __future__ import annotations

import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

from rollout_graph.analysis.search import SearchIndex
from rollout_graph.ui.state.workspace_cache import QUIET_SECONDS, Activity, lower_priority

# seconds without a page run before the build starts: as for the cache entry's write, the browser
# is still drawing a 5,000-call first paint for a while after the page run ended, and a build then
# competes with it for the machine's cores
QUIET = QUIET_SECONDS
MAX_WAIT = 600.0  # the background thread waits at most this long for a quiet moment
MAX_PAUSE = 30.0  # one pause of the build lasts at most this long (a page that runs on never starves it)
POLL = 0.02  # seconds between two looks at the page runs while the build pauses


class PreparedIndex:
    """One rollout's :class:`SearchIndex`; :func:`prepare` builds it in the background."""

    def __init__(self, index: SearchIndex) -> None:
        self.index = index
        self._lock = threading.Lock()  # held by the build and by each search
        self._waiting = 0  # searches waiting for the build: while any, it no longer pauses
        self._count_lock = threading.Lock()
        self.done = threading.Event()  # the background build has finished (tests, benchmarks)

    def build(self, activity: Activity) -> None:
        """Build every part of the index, pausing every few calls while a page runs (unless a
        search is waiting for it)."""

        def between() -> None:
            deadline = time.monotonic() + MAX_PAUSE
            while activity.active and not self._waiting and time.monotonic() < deadline:
                time.sleep(POLL)

        try:
            with self._lock:
                self.index.prepare(between)
        finally:
            self.done.set()

    @contextmanager
    def searching(self) -> Iterator[SearchIndex]:
        """The index for one search (waits for a build under way, which then runs at full speed)."""
        with self._count_lock:
            self._waiting += 1
        try:
            with self._lock:
                yield self.index
        finally:
            with self._count_lock:
                self._waiting -= 1


# The indexes waiting for their background build, newest last, one per rollout id: a followed
# trace's rollout is a new one with each new call, and only its newest index is worth building. By
# weak reference: an index the app's cache has dropped is not built.
_PENDING: OrderedDict[str, weakref.ref[PreparedIndex]] = OrderedDict()
_STARTED: weakref.WeakSet[PreparedIndex] = weakref.WeakSet()
_COND = threading.Condition()
_WORKER: list[threading.Thread] = []


def prepare(prepared: PreparedIndex, session_id: str, activity: Activity, quiet: float = QUIET) -> None:
    """Have ``prepared`` built on the background thread once no page has run for ``quiet`` seconds
    (at most once per index; the newest first)."""
    with _COND:
        if prepared in _STARTED:
            return
        _STARTED.add(prepared)
        _PENDING.pop(session_id, None)
        _PENDING[session_id] = weakref.ref(prepared)
        if not _WORKER:
            worker = threading.Thread(target=_work, args=(activity, quiet), name="rg-search-index", daemon=True)
            _WORKER.append(worker)
            worker.start()
        _COND.notify_all()


def _work(activity: Activity, quiet: float) -> None:
    lower_priority()
    while True:
        with _COND:
            while not _PENDING:
                _COND.wait()
        activity.wait_quiet(quiet, MAX_WAIT)
        with _COND:
            if not _PENDING:
                continue
            _, ref = _PENDING.popitem(last=True)
        prepared = ref()
        if prepared is not None and not prepared.done.is_set():
            try:
                prepared.build(activity)
            except Exception:  # noqa: BLE001 - the first search builds it and reports what failed
                pass
            del prepared
