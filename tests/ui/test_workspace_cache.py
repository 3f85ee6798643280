"""The server's shared trace cache: bounded in bytes, one build per key, uploads freed with their
session, builds off the caller's thread (views/state/workspace_cache.py)."""

from __future__ import annotations

import threading
import time

import pytest

from rollout_graph.ingest.files.sources import Source
from rollout_graph.ingest.load.calls import load_sources
from rollout_graph.ui.state.workspace_cache import Activity, WorkspaceCache, estimate_bytes, when_quiet
from tests.support.builders import Turn, jsonl, vllm_chat
from tests.support.waiting import wait_until


def test_two_visitors_asking_at_once_share_one_build():
    cache: WorkspaceCache[str] = WorkspaceCache(max_bytes=10**9)
    started = threading.Event()
    release = threading.Event()

    def build(report):
        started.set()
        report("half")
        release.wait(10)
        return "parsed"

    results, progress = [], []

    def visitor():
        results.append(cache.get_or_build("k", build, lambda v: 10, progress.append, poll=0.01))

    threads = [threading.Thread(target=visitor) for _ in range(3)]
    for t in threads:
        t.start()
    assert started.wait(5)
    # every visitor has joined the one build: each saw its progress
    wait_until(lambda: len(progress) == 3, timeout=10, what="three visitors waiting on one build")
    release.set()
    for t in threads:
        t.join(10)
    assert results == ["parsed"] * 3
    assert cache.builds == 1
    assert "half" in progress  # the waiting visitors saw the builder's progress


def test_a_failed_build_raises_in_every_waiting_caller_and_is_not_cached():
    cache: WorkspaceCache[str] = WorkspaceCache(max_bytes=10**9)

    def build(report):
        raise ValueError("bad trace")

    with pytest.raises(ValueError, match="bad trace"):
        cache.get_or_build("k", build, lambda v: 1)
    assert cache.keys() == []
    assert cache.get_or_build("k", lambda report: "ok", lambda v: 1) == "ok"


def test_least_recently_used_entries_are_evicted_past_the_byte_budget():
    cache: WorkspaceCache[str] = WorkspaceCache(max_bytes=250)
    for key in ("a", "b"):
        cache.get_or_build(key, lambda report, key=key: key, lambda v: 100)
    assert cache.get("a") == "a"  # a is now more recent than b
    cache.get_or_build("c", lambda report: "c", lambda v: 100)
    assert cache.keys() == ["a", "c"]
    assert cache.total_bytes == 200
    cache.get_or_build("huge", lambda report: "huge", lambda v: 10_000)  # the newest always stays
    assert cache.keys() == ["huge"]


def test_uploads_are_freed_when_their_sessions_end():
    cache: WorkspaceCache[str] = WorkspaceCache(max_bytes=10**9)
    cache.get_or_build("shared", lambda report: "s", lambda v: 1)
    cache.get_or_build("up", lambda report: "u", lambda v: 1, owner="session-1")
    assert cache.get("up", owner="session-2") == "u"
    alive = {"session-2"}
    assert cache.release_dead(alive.__contains__) == []
    alive.clear()
    assert cache.release_dead(alive.__contains__) == ["up"]
    assert cache.keys() == ["shared"]


def test_builds_run_off_the_calling_thread_in_a_bounded_pool():
    cache: WorkspaceCache[str] = WorkspaceCache(max_bytes=10**9, workers=2)
    threads = []
    running, peak = [0], [0]
    lock = threading.Lock()
    gate = threading.Event()  # every build is held until all five are submitted

    def build(report):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        threads.append(threading.current_thread().name)
        gate.wait(30)
        with lock:
            running[0] -= 1
        return "v"

    callers = [
        threading.Thread(target=lambda k=k: cache.get_or_build(k, build, lambda v: 1, poll=0.01)) for k in "abcde"
    ]
    for t in callers:
        t.start()
    wait_until(lambda: cache.builds == 5 and running[0] == 2, what="five builds submitted, two running")
    # the pool is full: the other three wait in its queue, none on a thread of its own
    assert sum(job.future.running() for job in list(cache._jobs.values())) == 2
    gate.set()
    for t in callers:
        t.join(10)
    assert all(name.startswith("rg-heavy") for name in threads)
    assert peak[0] == 2 and len(threads) == 5


def test_size_estimate_grows_with_the_trace():
    small = load_sources([Source.from_bytes("a.jsonl", jsonl([vllm_chat(Turn("c0", [1] * 10, [2]))]))])
    big = load_sources([Source.from_bytes("a.jsonl", jsonl([vllm_chat(Turn("c0", [1] * 100_000, [2]))]))])
    assert estimate_bytes(big) - estimate_bytes(small) >= 100_000 * 4


def test_background_work_waits_for_a_quiet_server_and_pauses_while_a_page_runs():
    activity = Activity()
    steps: list[str] = []
    started, gate = threading.Event(), threading.Event()

    def work(pause) -> None:
        steps.append("start")
        started.set()
        gate.wait(30)
        pause()  # between two batches: waits while a page runs
        steps.append("resumed")

    with activity.run():  # the page that read the trace is still running (its first paint)
        thread = when_quiet(activity, work, quiet=0.05, max_pause=60)
        wait_until(lambda: activity.waiting == 1, what="the work waiting for a quiet server")
        assert thread.is_alive() and steps == []  # nothing while the page runs
    started.wait(30)
    assert steps == ["start"]  # after the page ended and the server was quiet
    with activity.run():  # a visitor's click: the work stops at its next step
        gate.set()
        wait_until(lambda: activity.waiting == 1, what="the work paused for the page")
        assert thread.is_alive() and steps == ["start"]
    thread.join(30)
    assert steps == ["start", "resumed"] and activity.active == 0 and activity.runs == 2


def test_a_page_runs_count_even_when_it_stops_by_raising():
    activity = Activity()
    with pytest.raises(RuntimeError), activity.run():
        assert activity.active == 1
        raise RuntimeError("st.stop / st.rerun raise through the page run")
    assert activity.active == 0
    assert activity.wait_quiet(0.0, 1.0)


def test_the_app_writes_a_new_traces_cache_entry_after_the_paint_pausing_for_pages(tmp_path, monkeypatch):
    from rollout_graph.ingest.load import cache as persistent
    from rollout_graph.ingest.load.files import load_files
    from rollout_graph.ui.state import sources

    monkeypatch.setenv("ROLLOUT_GRAPH_CACHE", str(tmp_path / "cache"))
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(jsonl([vllm_chat(Turn(f"c{i}", prompt=[1, 2, i], sampled=[5, 6])) for i in range(600)]))
    key = persistent.key_for_files([trace])
    pauses: list[int] = []
    real_store = persistent.store

    def counting_store(key, loaded, folder=None, between=None):
        def counted() -> None:
            pauses.append(1)
            assert between is not None
            between()

        return real_store(key, loaded, folder, between=counted)

    monkeypatch.setattr(persistent, "store", counting_store)
    with sources.page_run():  # the page that reads the trace
        loaded = load_files([trace], workers=1, defer_store=sources.store_after_paint)
        assert key in sources.pending_stores()
        wait_until(lambda: sources.ACTIVITY.waiting, what="the cache entry's write waiting for the page")
        assert persistent.load(key) is None  # not while the page runs
    wait_until(lambda: not sources.pending_stores(), timeout=60, what="the cache entry written after the paint")
    assert sum(len(s.calls) for s in loaded.sessions.values()) == 600 and persistent.load(key) is not None
    assert pauses  # the writer offered to pause between batches of calls


def test_paused_background_work_goes_on_only_once_no_page_has_run_for_a_moment():
    """A visitor stepping through calls runs a page every few tenths of a second, and the browser
    draws each result after its run: the work waits ``resume`` seconds past the last run's end."""
    activity = Activity()
    resumed: list[float] = []
    started, gate = threading.Event(), threading.Event()

    def work(pause) -> None:
        started.set()
        gate.wait(30)
        pause()
        resumed.append(time.monotonic())

    thread = when_quiet(activity, work, quiet=0.0, max_pause=60, resume=0.5)
    assert started.wait(30)
    for _ in range(3):  # three key steps: the work does not run between them
        with activity.run():
            gate.set()
            wait_until(lambda: activity.waiting == 1, what="the work paused for the page")
            ended = time.monotonic()  # no later than the run's end as the activity records it
        assert not resumed
    thread.join(30)
    assert resumed and resumed[0] - ended >= 0.5


def test_pages_that_keep_running_do_not_hold_background_work_up_to_its_longest_pause():
    """A followed trace that grows is drawn again every second: there is never a second without a
    page run, and each pause would last ``max_pause``; after ``patience`` the work goes on as soon
    as no page runs."""
    activity = Activity()
    stop = threading.Event()

    def pages() -> None:
        while not stop.is_set():
            with activity.run():
                time.sleep(0.1)
            time.sleep(0.1)

    drawer = threading.Thread(target=pages)
    drawer.start()
    done: list[int] = []
    try:
        thread = when_quiet(
            activity,
            lambda pause: [pause() or done.append(1) for _ in range(4)],
            quiet=0.0,
            max_pause=60,
            resume=0.5,
            patience=0.3,
        )
        thread.join(30)  # four pauses of at most 60 s each would not end in time
        assert done == [1, 1, 1, 1]
    finally:
        stop.set()
        drawer.join()
