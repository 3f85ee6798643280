"""The two-part read (graph/ingest/load/two_parts.py): this process parses a big plain file's first part
while one forked helper parses the rest. It must give exactly what the one-process reader gives,
whatever the split, and leave no process behind."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rollout_graph.cli import main
from rollout_graph.core.records import messages_left_in_file
from rollout_graph.ingest.files.sources import Source
from rollout_graph.ingest.limits import Limits
from rollout_graph.ingest.load import cpu_window, file_probes, transfer, two_parts
from rollout_graph.ingest.load.calls import load_sources
from rollout_graph.ingest.load.files import read_files
from rollout_graph.ingest.load.progress import LoadProgress
from rollout_graph.ingest.shortcuts import id_arrays
from rollout_graph.ingest.shortcuts.messages import leave_messages_in_file
from tests.support.builders import Turn, assert_same_load, vllm_chat

REPO = Path(__file__).resolve().parents[2]
SINGLE_THREADED = two_parts._single_threaded  # the real rule, before the fixture below replaces it


def _record(
    i: int, prompt: list[int], session: str = "s1", call_id: str | None = None, big: bool = False, unique: bool = False
) -> bytes:
    sampled = [100 + i + k for k in range(40)]  # 40 entries: the content array is cut and deferred
    # big: request messages over messages._MIN_BYTES, so a load that leaves them in the file does
    messages = [{"role": "user", "content": "x" * (i % 9)}]
    if big:
        messages = [{"role": "system", "content": f"rules {i if unique else i % 3} " + "r" * 2500}, *messages]
    turn = Turn(call_id or f"c{i}", list(prompt), sampled, messages=messages)
    turn.session = session
    return orjson.dumps(vllm_chat(turn))


ODD = [
    b'{"request": {}, "broken',  # not JSON
    b"",  # blank
    b"   \t",  # blank with spaces
    b'["not an object"]',
    b"42",
    b'{"session_id": "a", "session_id": "b", "call_id": "x"}',  # an identity key twice
    b'{"no": "shape"}',
]


def _trace(path: Path, kinds: list[int], tail: bytes = b"\n", big: bool = False, unique: bool = False) -> Path:
    """Good records (growing prompts, repeated call ids, two sessions) mixed with odd lines
    (``big``: every third with request messages long enough to be left in the file)."""
    lines: list[bytes] = []
    prompt = [1, 2, 3]
    for i, kind in enumerate(kinds):
        if kind < len(ODD):
            lines.append(ODD[kind])
            continue
        session = "s2" if kind % 5 == 0 else "s1"
        lines.append(
            _record(i, prompt, session, f"c{i % 7}", big and i % 3 != 1, unique)
        )  # duplicate ids across the split
        prompt = prompt + [100 + i] * 30 + [9]
    path.write_bytes(b"\n".join(lines) + tail)
    return path


@pytest.fixture(autouse=True)
def _no_other_thread(monkeypatch):
    """Threads other tests of this session left running must not switch the two-part read off
    here (the command line runs none); the test of that rule uses the real count."""
    monkeypatch.setattr(two_parts, "_single_threaded", lambda: True)


def _two_parts(monkeypatch, path: Path, share: float, limits: Limits | None = None, helper_fails: bool = False):
    monkeypatch.setattr(two_parts, "TWO_PART_HEAD_SHARE", {"plain": share})
    split = two_parts._two_part_split(str(path), path.stat().st_size, limits or Limits(), forced=True)
    ran: list[int] = []
    received: list[bool] = []
    real, real_events = two_parts.load_two_parts, two_parts._Helper.events

    def counted(*args, **kwargs):
        ran.append(args[1])
        return real(*args, **kwargs)

    def events(self):
        got = real_events(self)
        received.append(got is not None)
        return got

    monkeypatch.setattr(two_parts, "load_two_parts", counted)
    monkeypatch.setattr(two_parts._Helper, "events", events)
    loaded = read_files([path], workers=2, limits=limits)
    monkeypatch.setattr(two_parts, "load_two_parts", real)
    monkeypatch.setattr(two_parts._Helper, "events", real_events)
    assert ran == ([] if split is None else [split])  # the two-part read ran exactly where it splits
    # the helper's part came from the helper (not read again here after it failed), unless made to fail
    assert received == ([] if split is None else [not helper_fails])
    return split, loaded


def _same(fast, slow) -> None:
    assert_same_load(fast, slow)  # reads every deferred alternative back from the file at its offset
    assert fast.pending == slow.pending


def test_two_parts_equal_one_process(tmp_path, monkeypatch):
    kinds = [9] * 10 + [0, 1, 9, 9, 3, 9, 5, 9, 2, 9, 9, 4, 6, 9, 9] + [9, 10] * 8
    trace = _trace(tmp_path / "t.jsonl", kinds)
    slow = load_sources([Source.from_path(trace)])
    for share in (0.1, 0.3, 0.5, 0.7, 0.9):
        split, fast = _two_parts(monkeypatch, trace, share)
        assert split is not None and 0 < split < trace.stat().st_size
        _same(fast, slow)
    renamed = [c.node_id for s in slow.sessions.values() for c in s.calls if "~" in c.node_id]
    assert renamed  # duplicate ids were renamed on both sides of the split


def test_the_helper_leaves_alternatives_in_the_file_and_prompts_in_one_arena(tmp_path, monkeypatch):
    trace = _trace(tmp_path / "t.jsonl", [9] * 30)
    _, fast = _two_parts(monkeypatch, trace, 0.3)
    calls = fast.sessions["s1"].calls
    tail = calls[len(calls) // 2 :]
    assert all(c.top_k is not None and c.top_k.pending for c in tail)  # deferred, not decoded
    bases = {id(c.prompt_ids.base) for c in tail[1:]}
    assert len(bases) == 1  # the helper's prompts are views of one rebuilt arena
    assert all(not c.prompt_ids.flags.writeable for c in tail)
    assert id_arrays.held_bytes(c.prompt_ids for c in tail) < sum(c.prompt_ids.nbytes for c in tail)
    slow = load_sources([Source.from_path(trace)])
    _same(fast, slow)


def test_pending_and_over_long_lines_on_the_helper_side(tmp_path, monkeypatch):
    trace = _trace(tmp_path / "t.jsonl", [9] * 20, tail=b"\n" + b"x" * 5000 + b"\n" + b'{"request": {"model"')
    limits = Limits(max_line_bytes=4000)
    slow = load_sources([Source.from_path(trace)], limits=limits)
    assert slow.pending and any("max_line_bytes" in s.reason for s in slow.skipped)
    _, fast = _two_parts(monkeypatch, trace, 0.5, limits)
    _same(fast, slow)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    kinds=st.lists(st.integers(0, 12), min_size=4, max_size=40),
    share=st.floats(0.02, 0.98),
    newline_at_end=st.booleans(),
    big=st.booleans(),
    leave=st.booleans(),
)
def test_any_split_of_any_trace_equals_one_process(
    tmp_path_factory, monkeypatch, kinds, share, newline_at_end, big, leave
):
    folder = tmp_path_factory.mktemp("two")
    trace = _trace(folder / "t.jsonl", kinds, tail=b"\n" if newline_at_end else b"", big=big)
    with leave_messages_in_file() if leave else contextlib.nullcontext():
        split, fast = _two_parts(monkeypatch, trace, share)
        assume(split is not None)  # a split exists: the two-part read ran
        slow = load_sources([Source.from_path(trace)])
    _same(fast, slow)


def _left(load, first: int = 1, last: int = 1 << 62) -> list[bool]:
    """Which calls of lines ``first`` to ``last`` hold their request messages as a span of the file."""
    calls = sorted((c for s in load.sessions.values() for c in s.calls), key=lambda c: c.line)
    return [messages_left_in_file(c) is not None for c in calls if first <= c.line <= last]


def test_the_helper_leaves_request_messages_in_the_file_as_one_process_does(tmp_path, monkeypatch):
    trace = _trace(tmp_path / "t.jsonl", [9] * 30, big=True)
    with leave_messages_in_file():
        split, fast = _two_parts(monkeypatch, trace, 0.4)
        slow = load_sources([Source.from_path(trace)])
    assert split is not None
    at = file_probes.lines_before(str(trace), split)  # the helper's first line
    assert any(_left(slow)) and _left(fast, last=at - 1) == _left(slow, last=at - 1)  # this process's part
    # The helper's part: its own arrays left in the file too (one the one-process load reused from a
    # line before the split, the helper never saw, it parses and leaves in the file: the same values)
    assert all(f or not s for f, s in zip(_left(fast, at), _left(slow, at), strict=True)) and any(_left(fast, at))
    _same(fast, slow)  # the messages read back from the file are the one-process load's
    _, held = _two_parts(monkeypatch, trace, 0.4)  # not asked to leave them: every call holds its list
    assert not any(_left(held))
    _same(held, slow)


def test_the_helper_sends_where_messages_are_not_their_text(tmp_path):
    from rollout_graph.ingest.shortcuts.messages import MessagesSpan

    trace = _trace(tmp_path / "t.jsonl", [9] * 12, big=True, unique=True)  # no array repeats another's start
    before = set(id_arrays.ARENAS.keys())
    with leave_messages_in_file():
        events = two_parts._tail_events(str(trace), str(trace), 0, 1, Limits())
    arenas = {k: a for k, a in list(id_arrays.ARENAS.items()) if k not in before}
    back, sent = _through_the_pipe(events, arenas, *transfer.extents(arenas, events))
    assert b"rrrrrrrrrr" not in sent  # no request text crossed, only where it is
    spans = [span for _, kind, (_, left) in back if kind == "v" for span in left or [] if span is not None]
    assert spans and all(type(span) is MessagesSpan for span in spans)
    assert all(span.messages()[0]["content"].endswith("r" * 2500) for span in spans)


def test_a_helper_that_dies_is_replaced_by_reading_its_part_here(tmp_path, monkeypatch):
    trace = _trace(tmp_path / "t.jsonl", [9] * 20)
    me = os.getpid()
    real = two_parts._tail_events

    def dying(*args, **kwargs):
        if os.getpid() != me:
            os._exit(7)  # the helper dies before it writes anything
        return real(*args, **kwargs)

    monkeypatch.setattr(two_parts, "_tail_events", dying)
    _, fast = _two_parts(monkeypatch, trace, 0.5, helper_fails=True)
    _same(fast, load_sources([Source.from_path(trace)]))


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().split(b") ", 1)[1][:1] != b"Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the helper is forked on Linux only")
def test_the_helper_is_reaped_when_the_load_returns(tmp_path, monkeypatch):
    trace = _trace(tmp_path / "t.jsonl", [9] * 20)
    pids: list[int] = []
    real = two_parts._Helper.__init__

    def recording(self, *args, **kwargs):
        real(self, *args, **kwargs)
        pids.append(self.pid)

    monkeypatch.setattr(two_parts._Helper, "__init__", recording)
    _two_parts(monkeypatch, trace, 0.5)
    assert len(pids) == 1
    with pytest.raises(ChildProcessError):
        os.waitpid(pids[0], os.WNOHANG)  # already waited for: no zombie, no process


RUN_AND_RECORD = """
import sys
record, trace, hang = sys.argv[1], sys.argv[2], len(sys.argv) > 3
from rollout_graph.ingest.load import two_parts
two_parts.TWO_PART_MIN_BYTES = 0
two_parts.TWO_PART_MIN_FREE_CORES = 0
real = two_parts._Helper.__init__
def recording(self, *a, **k):
    real(self, *a, **k)
    with open(record, "a") as f:
        f.write(f"{self.pid}\\n")
    if hang:  # hang in the parent's own part, to be killed there
        import time
        time.sleep(60)
two_parts._Helper.__init__ = recording
from rollout_graph.cli import main
sys.argv = ["rollout-graph", "inspect", "--json", "--no-cache", trace]
main()
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the helper is forked on Linux only")
def test_no_helper_outlives_the_command(tmp_path):
    trace = _trace(tmp_path / "t.jsonl", [9] * 20)
    record = tmp_path / "pids"
    done = subprocess.run(
        [sys.executable, "-c", RUN_AND_RECORD, str(record), str(trace)],
        capture_output=True,
        timeout=120,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert isinstance(orjson.loads(done.stdout), dict)  # the command printed its whole report
    pids = [int(x) for x in record.read_text().split()]
    assert len(pids) == 1 and not _alive(pids[0])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the helper is forked on Linux only")
def test_the_helper_dies_with_a_killed_command(tmp_path):
    trace = _trace(tmp_path / "t.jsonl", [9] * 20)
    record = tmp_path / "pids"
    command = subprocess.Popen(
        [sys.executable, "-c", RUN_AND_RECORD, str(record), str(trace), "hang"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=REPO,
    )
    try:
        deadline = time.monotonic() + 60
        while not (record.exists() and record.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.05)
        helper = int(record.read_text().split()[0])
    finally:
        command.send_signal(signal.SIGKILL)
        command.wait()
    deadline = time.monotonic() + 30
    while _alive(helper) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(helper)


def test_the_cli_prints_the_same_either_way(tmp_path, monkeypatch, capsys):
    trace = _trace(tmp_path / "t.jsonl", [9] * 12 + [0, 9, 3, 9, 9])
    monkeypatch.setattr(two_parts, "TWO_PART_MIN_BYTES", 0)
    outputs = []
    helpers: list[int] = []
    real = two_parts._Helper.__init__

    def recording(self, *args, **kwargs):
        real(self, *args, **kwargs)
        helpers.append(self.pid)

    monkeypatch.setattr(two_parts._Helper, "__init__", recording)
    for free in (0.0, float("inf")):  # always two parts; never
        monkeypatch.setattr(two_parts, "TWO_PART_MIN_FREE_CORES", free)
        assert main(["inspect", "--json", "--no-cache", str(trace)]) == 0
        outputs.append(orjson.loads(capsys.readouterr().out))
    assert len(helpers) == 1  # the first command forked its helper, the second read alone
    assert outputs[0] == outputs[1]


def test_when_the_two_part_read_is_used(tmp_path, monkeypatch):
    trace = _trace(tmp_path / "t.jsonl", [9] * 12)
    size = trace.stat().st_size
    monkeypatch.setattr(two_parts, "TWO_PART_MIN_FREE_CORES", 0)
    monkeypatch.setattr(two_parts, "TWO_PART_MIN_BYTES", size + 1)
    assert two_parts.two_part_wanted([trace], Limits()) is None  # too small
    monkeypatch.setattr(two_parts, "TWO_PART_MIN_BYTES", 0)
    assert two_parts.two_part_wanted([trace], Limits()) is not None
    assert two_parts.two_part_wanted([trace, trace], Limits()) is None  # one file only
    assert two_parts.two_part_wanted([trace], Limits(max_file_bytes=size - 1)) is None  # the limit counts the whole
    gz = tmp_path / "t.jsonl.gz"
    gz.write_bytes(b"\x1f\x8b" + trace.read_bytes())
    assert two_parts.two_part_wanted([gz], Limits()) is None
    doc = tmp_path / "d.json"
    doc.write_bytes(b"{\n" + trace.read_bytes())  # the first line is no JSON value on its own
    assert two_parts.two_part_wanted([doc], Limits()) is None
    monkeypatch.setattr(two_parts, "TWO_PART_MIN_FREE_CORES", 99)
    assert two_parts.two_part_wanted([trace], Limits()) is None  # not enough free cores now
    monkeypatch.setattr(two_parts, "TWO_PART_MIN_FREE_CORES", 0)
    monkeypatch.setattr(two_parts, "_single_threaded", SINGLE_THREADED)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert two_parts.two_part_wanted([trace], Limits()) is None  # never forks a threaded process
    finally:
        stop.set()
        other.join()


def test_a_memory_capped_load_stays_in_one_process(tmp_path, monkeypatch):
    trace = _trace(tmp_path / "t.jsonl", [9] * 12)
    monkeypatch.setattr(two_parts, "TWO_PART_MIN_BYTES", 0)
    monkeypatch.setattr(two_parts, "TWO_PART_MIN_FREE_CORES", 0)
    monkeypatch.setattr(two_parts, "load_two_parts", lambda *a, **k: pytest.fail("two parts under a memory cap"))
    read_files([trace], limits=Limits(max_memory_bytes=1 << 40))


def test_free_cores_are_measured_over_the_window(monkeypatch):
    monkeypatch.setattr(cpu_window, "workers_available", lambda: 2)
    # 1 s of wall time; the machine was busy 1.6 CPU-seconds, of which 0.9 were this process's
    monkeypatch.setattr(cpu_window, "sample", lambda: (11.0, 101.6, 5.9))
    assert cpu_window.free_cores_now(since=(10.0, 100.0, 5.0)) == pytest.approx(2 - 0.7)
    # a window under 50 ms: the tasks running now (this one and one other)
    monkeypatch.setattr(cpu_window, "sample", lambda: (10.01, 100.0, 5.0))
    monkeypatch.setattr(cpu_window, "_running_others", lambda: 1.0)
    assert cpu_window.free_cores_now(since=(10.0, 100.0, 5.0)) == 1.0
    # a window of minutes (a server started long ago): its average would lag; the count of now
    monkeypatch.setattr(cpu_window, "sample", lambda: (400.0, 500.0, 6.0))
    assert cpu_window.free_cores_now(since=(10.0, 100.0, 5.0)) == 1.0
    # off Linux: the load average
    monkeypatch.setattr(cpu_window, "sample", lambda: None)
    monkeypatch.setattr(cpu_window, "_running_others", lambda: None)
    monkeypatch.setattr(cpu_window, "free_cores", lambda: 0.5)
    assert cpu_window.free_cores_now(None) == 0.5


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_free_cores_on_this_machine_are_a_number_of_cores():
    assert 0.0 <= cpu_window.free_cores_now(cpu_window.sample()) <= cpu_window.workers_available()
    assert 0.0 <= cpu_window.free_cores_now(None) <= cpu_window.workers_available()
    assert cpu_window.sample() is not None and cpu_window._running_others() is not None


def _through_the_pipe(value, arenas, extents, spans):
    import io

    buffer = io.BytesIO()
    transfer.send(buffer, value, arenas, extents, spans)
    sent = buffer.getvalue()
    return transfer.receive(io.BytesIO(sent)), sent


def test_packing_gives_the_same_arrays(tmp_path):
    arena = id_arrays.new_arena(1 << 12)
    arena[:100] = np.arange(100)
    views = [arena[0:40], arena[10:100], arena[5:5]]
    for v in views:
        v.flags.writeable = False
    other = np.arange(7, dtype=np.int64)
    value = [views, other, arena[::2][:3]]
    (back_views, back_other, strided), _ = _through_the_pipe(
        value, {id(arena): arena}, {id(arena): 100}, {id(arena): [(0, 100)]}
    )
    for a, b in zip(views, back_views, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b) and not b.flags.writeable
    assert back_views[0].base is back_views[1].base  # one arena crossed, once
    assert back_views[0].base is not arena and id(back_views[0].base) in id_arrays.ARENAS  # a fresh one, registered
    assert np.array_equal(back_other, other) and np.array_equal(strided, arena[::2][:3])


def test_only_the_spans_prompts_cover_cross_and_nothing_outside_them_is_a_view(tmp_path):
    arena = id_arrays.new_arena(1 << 12)
    arena[:3000] = np.arange(3000)
    inside = [arena[0:40], arena[20:60], arena[2000:2100]]
    outside = arena[500:510]  # no prompt covers it: it must cross as its own copy
    spans = {id(arena): [(0, 60), (2000, 2100)]}
    (back, back_outside), sent = _through_the_pipe([inside, outside], {id(arena): arena}, {id(arena): 2100}, spans)
    assert len(sent) < 2100 * 4  # the gap between the spans did not cross
    for a, b in zip(inside, back, strict=True):
        assert np.array_equal(a, b)
    assert back[0].base is back[2].base
    assert np.array_equal(back_outside, outside) and back_outside.base is not back[0].base


def test_a_stream_cut_short_is_an_error_not_a_partial_result():
    import pickle

    arena = id_arrays.new_arena(1 << 10)
    arena[:200] = np.arange(200)
    import io

    buffer = io.BytesIO()
    transfer.send(buffer, [arena[0:200]], {id(arena): arena}, {id(arena): 200}, {id(arena): [(0, 200)]})
    sent = buffer.getvalue()
    for cut in (0, 4, 12, len(sent) // 2, len(sent) - 1):
        with pytest.raises((EOFError, pickle.UnpicklingError)):
            transfer.receive(io.BytesIO(sent[:cut]))


def test_an_arena_reference_outside_its_stream_is_refused():
    import pickle

    arena = id_arrays.new_arena(1 << 10)
    import io

    buffer = io.BytesIO()
    transfer._Packer(buffer, {id(arena): [(0, 10)]}, {id(arena): 0}).dump(arena[0:5])
    with pytest.raises(pickle.UnpicklingError):
        pickle.loads(buffer.getvalue())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lines=st.lists(st.integers(0, 9000), min_size=0, max_size=60),
    window=st.sampled_from([1, 7, 4096, 1 << 16]),
    cut=st.floats(0, 1),
)
def test_lines_before_counts_every_newline(tmp_path_factory, monkeypatch, lines, window, cut):
    import mmap

    path = tmp_path_factory.mktemp("count") / "t.jsonl"
    data = b"".join(b"x" * n + b"\n" for n in lines) + b"tail"
    path.write_bytes(data)
    monkeypatch.setattr(file_probes, "COUNT_WINDOW", window)  # many blocks
    monkeypatch.setattr(mmap, "mmap", None)  # never a memory map (docs/limits.md)
    offset = int(len(data) * cut)
    assert file_probes.lines_before(str(path), offset) == data[:offset].count(b"\n") + 1


def test_progress_runs_to_the_whole_file(tmp_path, monkeypatch):
    trace = _trace(tmp_path / "t.jsonl", [9] * 30)
    monkeypatch.setattr(two_parts, "TWO_PART_HEAD_SHARE", {"plain": 0.5})
    seen: list[LoadProgress] = []
    loaded = read_files([trace], progress=seen.append, workers=2)
    assert seen[-1].bytes_done == seen[-1].bytes_total == trace.stat().st_size
    assert seen[-1].calls == loaded.loaded == 30
    assert [p.bytes_done for p in seen] == sorted(p.bytes_done for p in seen)


def test_off_by_default_until_a_quiet_run_turns_it_on(tmp_path, monkeypatch):
    trace = _trace(tmp_path / "t.jsonl", [9] * 12)
    monkeypatch.setattr(two_parts, "TWO_PART_MIN_BYTES", 0)
    assert two_parts.two_part_wanted([trace], Limits()) is None  # the default rule never forks
    assert two_parts.two_part_wanted([trace], Limits(), forced=True) is not None  # workers=2 asks


def test_what_crosses_leaves_no_garbage_for_the_collector(tmp_path):
    """A command runs without the collector: the unpickler and its memo (every object it made)
    must go by reference counting alone, not wait for a collection."""
    import gc

    trace = _trace(tmp_path / "t.jsonl", [9] * 12, big=True)
    before = set(id_arrays.ARENAS.keys())
    with leave_messages_in_file():
        events = two_parts._tail_events(str(trace), str(trace), 0, 1, Limits())
    arenas = {k: a for k, a in list(id_arrays.ARENAS.items()) if k not in before}
    extents = transfer.extents(arenas, events)
    gc.collect()
    gc.disable()
    try:
        back, _ = _through_the_pipe(events, arenas, *extents)
        assert len(back) == len(events)
        assert gc.collect() == 0  # no cycle was left behind
    finally:
        gc.enable()


def test_only_the_console_command_judges_free_cores(monkeypatch):
    """Without being asked, the two-part read is the console command's alone: it sampled the
    machine's CPU as it started, and the cores free over that window decide; a library process
    (no start sample) reads in one process."""
    monkeypatch.setattr(two_parts, "TWO_PART_MIN_FREE_CORES", 1.5)
    monkeypatch.setattr(cpu_window, "START", None)
    monkeypatch.setattr(cpu_window, "free_cores_now", lambda since=None: 2.0)
    assert not two_parts._console_judges_free_cores()
    monkeypatch.setattr(cpu_window, "START", (10.0, 100.0, 5.0))
    seen = []

    def free(since=None):
        seen.append(since)
        return free.value

    monkeypatch.setattr(cpu_window, "free_cores_now", free)
    free.value = 1.9  # a quiet machine
    assert two_parts._console_judges_free_cores()
    free.value = 1.05  # another process spinning on one core
    assert not two_parts._console_judges_free_cores()
    assert seen == [(10.0, 100.0, 5.0)] * 2  # judged over the command's own start-up
    monkeypatch.setattr(two_parts, "TWO_PART_MIN_FREE_CORES", 0)
    monkeypatch.setattr(cpu_window, "START", None)
    assert two_parts._console_judges_free_cores()  # 0: asked for, whatever the cores


def test_the_console_command_takes_its_start_sample(tmp_path, monkeypatch, capsys):
    import gc

    import rollout_graph.cli as cli

    trace = _trace(tmp_path / "t.jsonl", [9] * 3)
    marks = []
    monkeypatch.setattr(cpu_window, "mark_start", lambda: marks.append(True))
    monkeypatch.setattr(cli, "_exit_now", lambda code: None)
    from rollout_graph.cli import inspect as inspect_verb

    monkeypatch.setattr(inspect_verb, "_HELD", [])  # what the console run holds to its exit
    monkeypatch.setattr(sys, "argv", ["rollout-graph", "inspect", "--json", "--no-cache", str(trace)])
    enabled = gc.isenabled()
    try:
        assert cli.main() == 0
    finally:
        gc.unfreeze()
        if enabled:
            gc.enable()
    assert marks == [True]
    assert orjson.loads(capsys.readouterr().out)["sessions"]
    marks.clear()
    assert cli.main(["inspect", "--json", "--no-cache", str(trace)]) == 0  # a library call: no sample
    assert marks == []
