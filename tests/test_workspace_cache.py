"""The server's shared trace cache: bounded in bytes, one build per key, uploads freed with their
session, builds off the caller's thread (views/state/workspace_cache.py)."""

from __future__ import annotations

import threading
import time

import pytest

from rollout_graph.ingest.loading import load_sources
from rollout_graph.ingest.reading import Source
from rollout_graph.ui.state.workspace_cache import WorkspaceCache, estimate_bytes
from tests.builders import Turn, jsonl, vllm_chat
from tests.waiting import wait_until


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

    def build(report):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        threads.append(threading.current_thread().name)
        time.sleep(0.2)
        with lock:
            running[0] -= 1
        return "v"

    callers = [
        threading.Thread(target=lambda k=k: cache.get_or_build(k, build, lambda v: 1, poll=0.01)) for k in "abcde"
    ]
    for t in callers:
        t.start()
    for t in callers:
        t.join(10)
    assert all(name.startswith("rg-heavy") for name in threads)
    assert peak[0] <= 2


def test_size_estimate_grows_with_the_trace():
    small = load_sources([Source.from_bytes("a.jsonl", jsonl([vllm_chat(Turn("c0", [1] * 10, [2]))]))])
    big = load_sources([Source.from_bytes("a.jsonl", jsonl([vllm_chat(Turn("c0", [1] * 100_000, [2]))]))])
    assert estimate_bytes(big) - estimate_bytes(small) >= 100_000 * 4
