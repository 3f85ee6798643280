"""The server's shared cache of parsed and analysed traces, bounded in bytes (no Streamlit here).

Entry points: ``WorkspaceCache`` (``get_or_build``: one build per key, the second visitor waits
for the first's; entries past the byte budget dropped least recently used; upload entries
released with their sessions), ``estimate_bytes``, ``Activity`` and ``when_quiet`` (work no page
waits for runs at low priority once no page has run for a moment).

Builds run in a small bounded thread pool, so one visitor's big or hostile upload never blocks
another's page or the health check. Where it sits: under views/state/sources.py."""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from rollout_graph.ingest.shortcuts.id_arrays import held_bytes

T = TypeVar("T")

DEFAULT_MAX_BYTES = 3 << 30
HEAVY_WORKERS = 2
_PER_CALL_OVERHEAD = 4096  # Python objects of a call and its analysis beyond the token arrays


def max_bytes_from_env() -> int:
    """``ROLLOUT_GRAPH_APP_CACHE_MB`` (megabytes), else 3 GB."""
    try:
        return int(float(os.environ["ROLLOUT_GRAPH_APP_CACHE_MB"]) * 1e6)
    except (KeyError, ValueError):
        return DEFAULT_MAX_BYTES


def estimate_bytes(loaded: Any) -> int:
    """Resident size of a LoadResult, estimated from its arrays and distinct message texts."""
    total = 0
    texts: set[int] = set()
    # prompts that share their parent's ids (views of one arena, or of a reopened cache entry's
    # buffer) count what they hold together
    total += held_bytes(
        (call.prompt_ids for session in loaded.sessions.values() for call in session.calls), any_buffer=True
    )
    for session in loaded.sessions.values():
        for call in session.calls:
            total += _PER_CALL_OVERHEAD
            for arr in (call.sampled_ids, call.sampled_logprobs):
                total += 0 if arr is None else int(arr.nbytes)
            if call.top_k is not None and not call.top_k.pending:  # deferred ones stay in the file
                total += int(call.top_k.ids.nbytes + call.top_k.logprobs.nbytes)
            for message in call.request_messages or ():
                content = message.get("content")
                total += 64
                if isinstance(content, str) and id(content) not in texts:
                    texts.add(id(content))
                    total += len(content) + 49
    # the analysis (token parents, spans, roles) is about as big as the id arrays again
    return int(total * 1.5)


@dataclass
class Job(Generic[T]):
    """One build in flight: its future and the latest progress it reported."""

    future: Future[T]
    progress: Any = None
    waiting: int = 0


@dataclass
class _Entry(Generic[T]):
    value: T
    size: int
    owners: set[str] | None = None  # browser sessions (uploads only); None: shared by all


@dataclass
class WorkspaceCache(Generic[T]):
    """An LRU of built values, bounded by their estimated size, with one build per key."""

    max_bytes: int = field(default_factory=max_bytes_from_env)
    workers: int = HEAVY_WORKERS
    _entries: OrderedDict[str, _Entry[T]] = field(default_factory=OrderedDict)
    _jobs: dict[str, Job[T]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _pool: ThreadPoolExecutor | None = None
    builds: int = 0  # how many builds ran (tests: two visitors, one build)

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="rg-heavy")
        return self._pool

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        """Run heavy work (an audit, a parse) in the bounded pool."""
        with self._lock:
            return self._executor().submit(fn, *args)

    @property
    def total_bytes(self) -> int:
        with self._lock:
            return sum(e.size for e in self._entries.values())

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._entries)

    def get(self, key: str, owner: str | None = None) -> T | None:
        """The cached value (now most recently used), or None."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            if owner is not None and entry.owners is not None:
                entry.owners.add(owner)
            return entry.value

    def get_or_build(
        self,
        key: str,
        build: Callable[[Callable[[Any], None]], T],
        size: Callable[[T], int],
        on_progress: Callable[[Any], None] | None = None,
        owner: str | None = None,
        poll: float = 0.1,
    ) -> T:
        """The value under ``key``, built at most once however many callers ask at the same time.

        ``build(report)`` runs in the worker pool and may call ``report(progress)``; every caller
        waiting for it sees that progress through ``on_progress`` (called on the caller's own
        thread, where a Streamlit page may draw). ``owner`` (a browser session) makes the entry
        an upload's: it is dropped when no owner is alive. A failed build raises in every caller.
        """
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                if owner is not None and entry.owners is not None:
                    entry.owners.add(owner)
                return entry.value
            job = self._jobs.get(key)
            if job is None:
                job = self._start(key, build, size, owner)
            job.waiting += 1
        last = None
        while True:
            try:
                value = job.future.result(timeout=poll)
                break
            except TimeoutError:
                if on_progress is not None and job.progress is not None and job.progress is not last:
                    last = job.progress
                    on_progress(last)
        if owner is not None:
            with self._lock:
                entry = self._entries.get(key)
                if entry is not None and entry.owners is not None:
                    entry.owners.add(owner)
        return value

    def _start(self, key: str, build: Callable, size: Callable[[T], int], owner: str | None) -> Job[T]:
        """Under the lock: submit a build for ``key`` and register it as the job in flight."""
        job: Job[T] = Job(Future())

        def report(progress: Any) -> None:
            job.progress = progress

        def run() -> T:
            try:
                value = build(report)
                nbytes = size(value)
                with self._lock:
                    self._entries[key] = _Entry(value, nbytes, None if owner is None else {owner})
                    self._entries.move_to_end(key)
                    self._evict()
                return value
            finally:
                with self._lock:
                    self._jobs.pop(key, None)

        self.builds += 1
        job.future = self._executor().submit(run)
        self._jobs[key] = job
        return job

    def _evict(self) -> None:
        """Under the lock: drop least recently used entries while over budget (never the newest)."""
        total = sum(e.size for e in self._entries.values())
        while total > self.max_bytes and len(self._entries) > 1:
            _, entry = self._entries.popitem(last=False)
            total -= entry.size

    def release_dead(self, alive: Callable[[str], bool]) -> list[str]:
        """Drop upload entries none of whose browser sessions is alive; the keys dropped."""
        with self._lock:
            dead = [
                key
                for key, entry in self._entries.items()
                if entry.owners is not None and not any(alive(o) for o in entry.owners)
            ]
            for key in dead:
                del self._entries[key]
        return dead

    def forget(self, keys: Iterable[str]) -> None:
        """Drop these entries (tests, a visitor's explicit close)."""
        with self._lock:
            for key in keys:
                self._entries.pop(key, None)


class Activity:
    """The page runs in progress on this server (whole pages and fragments), so that background
    work can wait for a quiet moment and pause while a visitor waits for a page."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._active = 0
        self._last_end = time.monotonic()
        self._waiting = 0
        self.runs = 0  # page runs begun (tests)

    @contextmanager
    def run(self) -> Iterator[None]:
        """Around one page run (also when it stops or reruns by raising)."""
        with self._cond:
            self._active += 1
            self.runs += 1
        try:
            yield
        finally:
            with self._cond:
                self._active -= 1
                self._last_end = time.monotonic()
                self._cond.notify_all()

    @property
    def active(self) -> int:
        with self._cond:
            return self._active

    @property
    def waiting(self) -> int:
        """How many threads wait in :meth:`wait_quiet` now (background work held for the pages)."""
        with self._cond:
            return self._waiting

    def wait_quiet(self, quiet: float, timeout: float) -> bool:
        """Until no page has run for ``quiet`` seconds (True), or ``timeout`` seconds (False)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._waiting += 1
            try:
                while True:
                    now = time.monotonic()
                    if self._active == 0 and now - self._last_end >= quiet:
                        return True
                    if now >= deadline:
                        return False
                    wait = quiet - (now - self._last_end) if self._active == 0 else quiet
                    self._cond.wait(max(0.01, min(wait, deadline - now)))
            finally:
                self._waiting -= 1


# No page run for this long: the first paint is drawn (the browser draws for a while after the page
# run ends: with 1 s the write was seen starting before a 5,000-call paint was complete, under load)
QUIET_SECONDS = 3.0
MAX_PAUSE_SECONDS = 30.0  # background work waits at most this long per step for the pages (never starves)
# The cache entry's write, paused for a page run, goes on only once no page has run for this long:
# the browser is still drawing a step's result after its page run ended, and a visitor stepping
# through calls (j/k, a page run every few tenths of a second) would otherwise meet the write between
# steps (the first steps after a cold paint met it: about 2 s of CPU on 5,000 vLLM calls). The search
# index's build (search_index.py) keeps pausing only while a page runs: a search soon after would
# wait for what it has not built. Pages that keep running (a followed trace growing, its page drawn
# again every second) never leave such a moment: after PATIENCE_SECONDS of waiting for one, the
# write goes on as soon as no page runs.
RESUME_SECONDS = 1.0
PATIENCE_SECONDS = 2.0
BACKGROUND_NICE = 10  # the background thread's niceness (Linux: per thread)


def lower_priority() -> None:
    """Lower the calling thread's CPU priority (Linux schedules threads one by one); elsewhere,
    or when not allowed, nothing changes."""
    try:
        tid = threading.get_native_id()
        current = os.getpriority(os.PRIO_PROCESS, tid)
        os.setpriority(os.PRIO_PROCESS, tid, max(current, BACKGROUND_NICE))
    except (AttributeError, OSError):
        pass


def when_quiet(
    activity: Activity,
    work: Callable[[Callable[[], None]], Any],
    quiet: float = QUIET_SECONDS,
    max_pause: float = MAX_PAUSE_SECONDS,
    name: str = "rg-background",
    resume: float = RESUME_SECONDS,
    patience: float = PATIENCE_SECONDS,
) -> threading.Thread:
    """Run ``work(pause)`` on a low-priority thread once no page has run for ``quiet`` seconds;
    ``work`` calls ``pause()`` between its steps, which waits while a page runs and then until no
    page has run for ``resume`` seconds; after ``patience`` seconds without such a moment, only
    until no page runs (each wait at most ``max_pause`` seconds). The thread is not a daemon: a
    server that stops lets it finish (a cache entry is renamed into place only when complete)."""

    def pause() -> None:
        if not activity.wait_quiet(resume, patience):
            activity.wait_quiet(0.0, max_pause)

    def run() -> None:
        lower_priority()
        activity.wait_quiet(quiet, max_pause)
        work(pause)

    thread = threading.Thread(target=run, name=name)
    thread.start()
    return thread
