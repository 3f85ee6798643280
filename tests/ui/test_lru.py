"""The UI's one bounded, thread-safe LRU cache (views/state/lru.py)."""

from __future__ import annotations

import threading

import pytest

from rollout_graph.ui.state.lru import LRU


def test_the_least_recently_used_entry_leaves_first():
    cache: LRU[str, int] = LRU(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # a is now the most recent
    cache.put("c", 3)
    assert "b" not in cache and list(cache) == ["a", "c"]
    assert cache.get("b") is None
    assert cache.pop("a") == 1 and len(cache) == 1
    assert repr(cache) == "LRU(1 of 2 entries)"
    with pytest.raises(ValueError):
        LRU(0)


def test_get_or_create_runs_the_constructor_once_per_key_across_threads():
    cache: LRU[str, object] = LRU(4)
    made: list[object] = []
    barrier = threading.Barrier(8)

    def create() -> object:
        made.append(object())
        return made[-1]

    results: list[object] = []

    def worker() -> None:
        barrier.wait()
        results.append(cache.get_or_create("k", create))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert len(made) == 1
    assert results == [made[0]] * 8


def test_get_or_compute_keeps_the_first_value_stored():
    cache: LRU[str, int] = LRU(3)
    assert cache.get_or_compute("k", lambda: 1) == 1
    assert cache.get_or_compute("k", lambda: 2) == 1  # cached: not computed again
    for i in range(3):
        cache.get_or_compute(f"other{i}", lambda i=i: i)
    assert "k" not in cache and len(cache) == 3
