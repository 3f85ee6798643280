"""The cold command-line path (issue 24) and the limits on the parallel reader (issue 28 item 12):
the pool only where it wins, every limit held by the workers as by the sequential loader."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import orjson
import pytest

from rollout_graph.ingest import parallel, reading
from rollout_graph.ingest.limits import MB, Limits
from rollout_graph.ingest.loading import load_paths
from rollout_graph.ingest.reading import Source, read_values
from tests.builders import Turn, assert_same_load, vllm_chat


def _trace_with_a_long_line(path: Path, long_bytes: int, n: int = 120) -> Path:
    """Good records around one line of ``long_bytes`` (valid JSON: a long message)."""
    lines = []
    prompt = [1, 2, 3]
    for i in range(n):
        sampled = [100 + i, 7]
        text = "y" * long_bytes if i == n // 2 else "x" * 2000
        lines.append(
            orjson.dumps(vllm_chat(Turn(f"c{i}", list(prompt), sampled, messages=[{"role": "user", "content": text}])))
        )
        prompt = prompt + sampled + [9]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def _peak(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_worker_never_holds_a_line_over_the_line_limit(tmp_path):
    trace = _trace_with_a_long_line(tmp_path / "t.jsonl", 48 * MB)
    limits = Limits(max_line_bytes=1 * MB)
    ranges = parallel.split_ranges(trace, chunk=trace.stat().st_size // 4, max_line_bytes=limits.max_line_bytes)
    assert len(ranges) >= 2
    outcomes = []

    def workers() -> None:
        for start, end, first in ranges:
            task = parallel._Task(str(trace), str(trace), start, end, first, "t", limits)
            outcomes.append(parallel._parse_range(task))

    def sequential() -> None:
        for _ in read_values(Source.from_path(trace), limits):
            pass

    worker_peak, sequential_peak = _peak(workers), _peak(sequential)
    # The range holding the 48 MB line is read in chunks like a whole file (a few 8 MB chunks at
    # most) and the line dropped once it is over the limit; reading the range whole held all of it.
    assert worker_peak < 32 * MB, f"peak {worker_peak / MB:.1f} MB"
    assert worker_peak <= sequential_peak + 2 * MB
    errors = [e for o in outcomes for _, e, _ in o.events if e]
    assert any("line longer than" in e and "max_line_bytes" in e for e in errors)


def test_parallel_load_with_a_line_limit_equals_sequential(tmp_path, monkeypatch):
    trace = _trace_with_a_long_line(tmp_path / "t.jsonl", 3 * MB)
    limits = Limits(max_line_bytes=1 * MB)
    monkeypatch.setattr(parallel, "CHUNK_BYTES", trace.stat().st_size // 5)
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 0)
    fast = parallel.load_files_parallel([trace], workers=2, limits=limits)
    slow = load_paths([trace], limits=limits)
    assert_same_load(fast, slow)
    assert len(slow.skipped) == 1 and "max_line_bytes" in slow.skipped[0].reason


def test_a_memory_limit_is_checked_by_the_process_that_reads(tmp_path, monkeypatch):
    trace = _trace_with_a_long_line(tmp_path / "t.jsonl", 1000, n=450)
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "CHUNK_BYTES", trace.stat().st_size // 5)

    def no_pool(workers):
        raise AssertionError("a memory-capped load must not be spread over workers")

    monkeypatch.setattr(parallel, "_pool", no_pool)
    limits = Limits(max_memory_bytes=1 * MB)  # below any interpreter: the cap is hit at once
    fast = parallel.load_files_parallel([trace], workers=2, limits=limits)
    slow = load_paths([trace], limits=limits)
    # The same records loaded and the same skip (its text names the resident memory of the moment).
    assert (fast.records, fast.loaded, [s.line for s in fast.skipped]) == (
        slow.records,
        slow.loaded,
        [s.line for s in slow.skipped],
    )
    assert [s.reason.split(" is above")[0].rsplit(" ", 2)[0] for s in fast.skipped] == [
        s.reason.split(" is above")[0].rsplit(" ", 2)[0] for s in slow.skipped
    ]
    assert any("max_memory_bytes" in s.reason for s in fast.skipped)
    assert fast.loaded < 450


@pytest.mark.parametrize(
    ("total", "free", "limits", "expected"),
    [
        (10 * MB, 8.0, None, 1),  # too small to amortise the pool
        (500 * MB, 2.0, None, 1),  # two free cores: measured to lose
        (500 * MB, 1.2, None, 1),  # one core busy
        (500 * MB, 4.0, None, 4),
        (500 * MB, 3.6, None, 3),
        (500 * MB, 8.0, Limits(max_memory_bytes=4096 * MB), 1),  # a memory cap: read where it is checked
    ],
)
def test_the_pool_is_planned_from_size_and_free_cores(monkeypatch, total, free, limits, expected):
    monkeypatch.setattr(parallel, "free_cores", lambda: free)
    assert parallel.planned_workers(total, limits) == expected


def test_free_cores_counts_the_other_running_processes(monkeypatch):
    monkeypatch.setattr(parallel, "workers_available", lambda: 4)
    monkeypatch.setattr(parallel.os, "getloadavg", lambda: (2.5, 0.0, 0.0))
    assert parallel.free_cores() == pytest.approx(2.5)
    monkeypatch.setattr(parallel.os, "getloadavg", lambda: (9.0, 0.0, 0.0))
    assert parallel.free_cores() == 0.0


def test_a_planned_sequential_load_never_starts_the_pool(tmp_path, monkeypatch):
    trace = _trace_with_a_long_line(tmp_path / "t.jsonl", 1000, n=60)
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "free_cores", lambda: 2.0)

    def no_pool(workers):
        raise AssertionError("the pool was started")

    monkeypatch.setattr(parallel, "_pool", no_pool)
    assert_same_load(parallel.load_files_parallel([trace]), load_paths([trace]))


def test_a_one_core_load_reports_the_bytes_read_as_it_goes(tmp_path, monkeypatch):
    trace = _trace_with_a_long_line(tmp_path / "t.jsonl", 1000, n=900)
    other = _trace_with_a_long_line(tmp_path / "u.jsonl", 1000, n=10)
    monkeypatch.setattr(parallel, "free_cores", lambda: 2.0)
    monkeypatch.setattr(reading, "_CHUNK", 256 << 10)  # several reads per file
    seen: list[parallel.LoadProgress] = []
    loaded = parallel.load_files_parallel([trace, other], progress=seen.append)
    size = trace.stat().st_size
    total = size + other.stat().st_size
    assert loaded.loaded == 910
    during = [p for p in seen if p.files_done == 0 and p.records]
    assert during and all(0 < p.bytes_done <= size for p in during)  # within the first file, never 0
    assert [p.bytes_done for p in seen] == sorted(p.bytes_done for p in seen)
    assert seen[-1].bytes_done == seen[-1].bytes_total == total
