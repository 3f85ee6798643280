"""The cold command-line path (issue 24) and the limits on the parallel reader (issue 28 item 12):
the pool only where it wins, every limit held by the workers as by the sequential loader."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import orjson
import pytest

from rollout_graph.ingest.files import chunks
from rollout_graph.ingest.files.sources import Source
from rollout_graph.ingest.limits import MB, Limits
from rollout_graph.ingest.load import cpu_window, pool
from rollout_graph.ingest.load.calls import load_sources
from rollout_graph.ingest.load.files import load_files, load_paths, read_files
from rollout_graph.ingest.load.progress import LoadProgress
from rollout_graph.ingest.values.read import read_values
from tests.support.builders import Turn, assert_same_load, vllm_chat


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
    ranges = pool.split_ranges(trace, chunk=trace.stat().st_size // 4, max_line_bytes=limits.max_line_bytes)
    assert len(ranges) >= 2
    outcomes = []

    def workers() -> None:
        for start, end, first in ranges:
            task = pool.Task(str(trace), str(trace), start, end, first, "t", limits)
            outcomes.append(pool._parse_range(task))

    def sequential() -> None:
        for _ in read_values(Source.from_path(trace), limits):
            pass

    worker_peak, sequential_peak = _peak(workers), _peak(sequential)
    # The range holding the 48 MB line is read in chunks like a whole file (a few 1 MB chunks at
    # most) and the line dropped once it is over the limit; reading the range whole held all of it.
    assert worker_peak < 32 * MB, f"peak {worker_peak / MB:.1f} MB"
    assert worker_peak <= sequential_peak + 2 * MB
    errors = [e for o in outcomes for _, e, _ in o.events if e]
    assert any("line longer than" in e and "max_line_bytes" in e for e in errors)


def test_parallel_load_with_a_line_limit_equals_sequential(tmp_path, monkeypatch):
    trace = _trace_with_a_long_line(tmp_path / "t.jsonl", 3 * MB)
    limits = Limits(max_line_bytes=1 * MB)
    monkeypatch.setattr(pool, "CHUNK_BYTES", trace.stat().st_size // 5)
    monkeypatch.setattr(pool, "PARALLEL_MIN_BYTES", 0)
    fast = read_files([trace], workers=2, limits=limits)
    slow = load_paths([trace], limits=limits)
    assert_same_load(fast, slow)
    assert len(slow.skipped) == 1 and "max_line_bytes" in slow.skipped[0].reason


def test_a_memory_limit_is_checked_by_the_process_that_reads(tmp_path, monkeypatch):
    trace = _trace_with_a_long_line(tmp_path / "t.jsonl", 1000, n=450)
    monkeypatch.setattr(pool, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(pool, "CHUNK_BYTES", trace.stat().st_size // 5)

    def no_pool(workers):
        raise AssertionError("a memory-capped load must not be spread over workers")

    monkeypatch.setattr(pool, "_pool", no_pool)
    limits = Limits(max_memory_bytes=1 * MB)  # below any interpreter: the cap is hit at once
    fast = read_files([trace], workers=2, limits=limits)
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
    monkeypatch.setattr(cpu_window, "free_cores", lambda: free)
    assert pool.planned_workers(total, limits) == expected


def test_free_cores_counts_the_other_running_processes(monkeypatch):
    monkeypatch.setattr(cpu_window, "workers_available", lambda: 4)
    monkeypatch.setattr(cpu_window.os, "getloadavg", lambda: (2.5, 0.0, 0.0))
    assert cpu_window.free_cores() == pytest.approx(2.5)
    monkeypatch.setattr(cpu_window.os, "getloadavg", lambda: (9.0, 0.0, 0.0))
    assert cpu_window.free_cores() == 0.0


def test_a_planned_sequential_load_never_starts_the_pool(tmp_path, monkeypatch):
    trace = _trace_with_a_long_line(tmp_path / "t.jsonl", 1000, n=60)
    monkeypatch.setattr(pool, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(cpu_window, "free_cores", lambda: 2.0)

    def no_pool(workers):
        raise AssertionError("the pool was started")

    monkeypatch.setattr(pool, "_pool", no_pool)
    assert_same_load(read_files([trace]), load_paths([trace]))


def test_a_one_core_load_reports_the_bytes_read_as_it_goes(tmp_path, monkeypatch):
    trace = _trace_with_a_long_line(tmp_path / "t.jsonl", 1000, n=900)
    other = _trace_with_a_long_line(tmp_path / "u.jsonl", 1000, n=10)
    monkeypatch.setattr(cpu_window, "free_cores", lambda: 2.0)
    monkeypatch.setattr(chunks, "CHUNK", 256 << 10)  # several reads per file
    seen: list[LoadProgress] = []
    loaded = read_files([trace, other], progress=seen.append)
    size = trace.stat().st_size
    total = size + other.stat().st_size
    assert loaded.loaded == 910
    during = [p for p in seen if p.files_done == 0 and p.records]
    assert during and all(0 < p.bytes_done <= size for p in during)  # within the first file, never 0
    assert [p.bytes_done for p in seen] == sorted(p.bytes_done for p in seen)
    assert seen[-1].bytes_done == seen[-1].bytes_total == total


# ------------------------------------------------------------------------------------------------
# Top-k alternatives left in the file until read (graph/ingest/shortcuts/logprob_entries.py, docs/performance.md)


def _vllm_lines(n: int = 30, sampled: int = 60, choices: int = 1) -> list[bytes]:
    """Compact vLLM chat lines (as vLLM writes them) whose content arrays are long enough to be cut."""
    lines = []
    prompt = [1, 2, 3]
    for i in range(n):
        ids = [1000 + i * sampled + k for k in range(sampled)]
        record = vllm_chat(Turn(f"c{i}", list(prompt), ids))
        if choices > 1:
            first = record["response"]["choices"][0]
            record["response"]["choices"] = [dict(first, index=j) for j in range(choices)]
        lines.append(orjson.dumps(record))
        prompt = prompt + ids + [9]
    return lines


def _calls(result):
    return [c for s in result.sessions.values() for c in s.calls]


def test_alternatives_stay_in_the_file_until_read_and_equal_the_eager_ones(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\n".join(_vllm_lines()) + b"\n")
    lazy = load_paths([path])
    eager = load_sources([Source.from_bytes(str(path), path.read_bytes())])  # an upload: decoded at once
    assert all(c.top_k is not None and c.top_k.pending for c in _calls(lazy))
    assert not any(c.top_k.pending for c in _calls(eager))
    assert "not read yet" in repr(_calls(lazy)[0].top_k)
    assert_same_load(lazy, eager)  # reads every deferred top-k
    assert not any(c.top_k.pending for c in _calls(lazy))
    assert _calls(lazy)[0].top_k.ids.shape == (60, 2)


def test_the_summary_never_reads_the_alternatives(tmp_path):
    from rollout_graph.analysis.decode import decoder_for
    from rollout_graph.pipeline import analyse
    from rollout_graph.reports.contract import inspect_json

    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\n".join(_vllm_lines()) + b"\n")
    loaded = load_paths([path])
    rollouts = [analyse(s, decoder=decoder_for(s.calls)) for s in loaded.sessions.values()]
    payload = orjson.dumps(inspect_json(loaded, rollouts, with_tokens=False), option=orjson.OPT_SERIALIZE_NUMPY)
    assert all(c.top_k.pending for c in _calls(loaded))
    eager = load_sources([Source.from_bytes(str(path), path.read_bytes())])
    eager_rollouts = [analyse(s, decoder=decoder_for(s.calls)) for s in eager.sessions.values()]
    assert payload == orjson.dumps(
        inspect_json(eager, eager_rollouts, with_tokens=False), option=orjson.OPT_SERIALIZE_NUMPY
    )


def test_several_choices_and_spaced_json_take_the_skim_and_agree(tmp_path):
    path = tmp_path / "t.jsonl"
    spaced = [orjson.dumps(orjson.loads(line)).replace(b'":', b'": ') for line in _vllm_lines(5)]
    path.write_bytes(b"\n".join(_vllm_lines(5, choices=2) + spaced) + b"\n")
    lazy = load_paths([path])
    eager = load_sources([Source.from_bytes(str(path), path.read_bytes())])
    calls = _calls(lazy)
    assert len(calls) == 15
    assert all(c.top_k.pending for c in calls[:10])  # both choices of a line: deferred via the skim
    assert_same_load(lazy, eager)


def test_a_changed_or_removed_file_gives_empty_alternatives_and_says_why(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\n".join(_vllm_lines(3)) + b"\n")
    calls = _calls(load_paths([path]))
    path.write_bytes(path.read_bytes().replace(b"token_id:1001", b"token_id:7777"))  # same size, new bytes
    top = calls[0].top_k
    assert top.ids.shape == (60, 0) and top.logprobs.shape == (60, 0) and top.texts is None
    assert "changed since it was loaded" in (top.unavailable or "")
    path.unlink()
    assert "cannot read" in (calls[1].top_k.unavailable or "") and calls[1].top_k.ids.shape == (60, 0)


def test_appending_to_the_file_keeps_the_alternatives_readable(tmp_path):
    path = tmp_path / "t.jsonl"
    lines = _vllm_lines(4)
    path.write_bytes(b"\n".join(lines[:3]) + b"\n")
    calls = _calls(load_paths([path]))
    with path.open("ab") as f:  # a capture still writing
        f.write(lines[3] + b"\n")
    assert calls[2].top_k.unavailable is None and calls[2].top_k.ids.shape == (60, 2)


def test_a_deferred_top_k_survives_pickling_and_the_cache(tmp_path):
    import pickle

    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\n".join(_vllm_lines(4)) + b"\n")
    call = _calls(load_paths([path]))[1]
    copy = pickle.loads(pickle.dumps(call.top_k))
    assert copy.pending and (copy.ids == call.top_k.ids).all()
    folder = tmp_path / "cache"
    first = load_files([path], folder=folder)
    assert _calls(first)[0].top_k.pending is False  # the cache writer read them to store them
    again = load_files([path], folder=folder)
    assert_same_load(first, again)


@pytest.mark.parametrize(
    "damage",
    [
        (b'"token_id:1061","logprob":-2.0}', b'"token_id:\xff\xfe","logprob":-2.0}'),  # invalid UTF-8, skipped
        (b'"token_id:1061","logprob":-2.0}', b'"token_id:\x01","logprob":-2.0}'),  # a control character
        (b'"logprob":-2.0}]', b'"logprob":NaN}]'),  # not JSON (the stdlib reads it)
        (b'"logprob":-2.0}]', b'"logprob":-2.0},]'),  # a trailing comma
        (b'"logprob":-2.0}]', b'"logprob":1e999}]'),  # beyond a double
        (b'{"token":"token_id:1061","logprob":-2.0}', b'{"token":["x"],"logprob":true}'),  # odd types
        (b'{"token":"token_id:1061","logprob":-2.0}', b'{"token":"\\ud800","logprob":-2}'),  # a lone surrogate
    ],
)
def test_a_malformed_alternative_is_reported_as_the_eager_path_reports_it(tmp_path, damage):
    lines = _vllm_lines(3)
    old, new = damage
    assert old in lines[1]
    lines[1] = lines[1].replace(old, new, 1)
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    lazy = load_paths([path])
    eager = load_sources([Source.from_bytes(str(path), path.read_bytes())])
    assert_same_load(lazy, eager)


def test_inspect_imports_only_its_own_verb():
    import subprocess
    import sys

    code = (
        "import sys\nfrom rollout_graph import cli\ntry:\n    cli.main(['inspect', '--help'])\n"
        "except SystemExit:\n    pass\nprint(sorted(sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    for heavy in ("rollout_graph.reports.bundle", "rollout_graph.live.events", "rollout_graph.signals.join"):
        assert heavy not in out
    assert (
        "importlib.metadata"
        not in subprocess.run(
            [sys.executable, "-c", "import sys, rollout_graph.cli.inspect; print(list(sys.modules))"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
