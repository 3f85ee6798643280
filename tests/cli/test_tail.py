"""`rollout-graph tail` and the live reader: records appended over time from a thread, a child
before its parent (adopted), a partial last line, a new file in a folder, a truncated file, and
the final parents equal to what `inspect` says once the files are complete."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from rollout_graph.ingest.load.files import load_paths
from rollout_graph.live.events import EventLog, event_text
from rollout_graph.live.reading import FileFollower
from rollout_graph.live.trace import LiveTrace
from rollout_graph.pipeline import analyse
from tests.support.builders import Turn, assert_same_load, jsonl, vllm_chat
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]

# A chain c0 -> c1 -> c2, a retry of c1 (c1b, discarded), and c3 rewritten (a new root).
C0 = Turn("c0", [1, 2, 3], [4, 5])
C1 = Turn("c1", [1, 2, 3, 4, 5, 6], [7, 8, 9, 10])
C1B = Turn("c1b", [1, 2, 3, 4, 5, 6], [11])
C2 = Turn("c2", [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12], [13])
C3 = Turn("c3", [1, 2, 3, 4, 5, 6, 7, 8, 99, 14], [15])  # c1's reply cut after two tokens


def line(turn: Turn) -> bytes:
    return jsonl([vllm_chat(turn)])


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)
        f.flush()


def inspect_parents(*paths: Path) -> dict[tuple[str, str], str | None]:
    loaded = load_paths(list(paths))
    out = {}
    for sid, session in loaded.sessions.items():
        rollout = analyse(session)
        for i, call in enumerate(rollout.calls):
            parent = rollout.topology.parents[i]
            out[(sid, call.node_id)] = None if parent is None else rollout.calls[parent].node_id
    return out


def last_parents(events: list[dict]) -> dict[tuple[str, str], str | None]:
    out = {}
    for e in events:
        if e["event"] in ("call", "adopted", "relinked"):
            out[(e["session_id"], e["node_id"])] = e["parent_id"]
    return out


# -- the reader -------------------------------------------------------------------------------------


def test_a_partial_last_line_waits_for_its_newline(tmp_path):
    path = tmp_path / "t.jsonl"
    whole = line(C0)
    path.write_bytes(whole[:40])
    follower = FileFollower(path)
    first = follower.read()
    assert first.values == [] and first.pending == 40
    append(path, whole[40:])
    second = follower.read()
    assert [v.line for v in second.values] == [1] and second.values[0].error is None
    assert second.pending == 0


def test_a_complete_last_line_without_newline_is_read_and_its_newline_skipped(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(line(C0).rstrip(b"\n"))
    follower = FileFollower(path)
    assert [v.line for v in follower.read().values] == [1]
    append(path, b"\n" + line(C1))
    assert [v.line for v in follower.read().values] == [2]


def test_a_truncated_file_is_read_again_from_the_start(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(line(C0) + line(C1))
    trace = LiveTrace([path])
    trace.poll()
    assert trace.loaded.loaded == 2
    path.write_bytes(line(C2))
    update = trace.poll()
    assert [(n.kind, n.dropped) for n in update.notices] == [("truncated", 2)]
    assert trace.loaded.loaded == 1 and trace.loaded.records == 1
    assert [c.node_id for c in trace.rollout("s1").calls] == ["c2"]


def test_a_replaced_file_is_read_again(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(line(C0))
    trace = LiveTrace([path])
    trace.poll()
    fresh = tmp_path / "new.jsonl"
    fresh.write_bytes(line(C1) + line(C2) + line(C0))
    os.replace(fresh, path)
    update = trace.poll()
    assert [n.kind for n in update.notices] == ["replaced"]
    assert sorted(c.node_id for c in trace.rollout("s1").calls) == ["c0", "c1", "c2"]


def test_compressed_files_and_documents_are_read_whole(tmp_path):
    gz = tmp_path / "t.jsonl.gz"
    gz.write_bytes(gzip.compress(line(C0) + line(C1)))
    doc = tmp_path / "doc.json"
    doc.write_text(json.dumps([vllm_chat(Turn("d0", [5], [6], session="d"))], indent=2))
    trace = LiveTrace([tmp_path])
    trace.poll()
    assert trace.loaded.loaded == 3 and not trace.loaded.skipped
    gz.write_bytes(gzip.compress(line(C0) + line(C1) + line(C2)))
    update = trace.poll()
    assert [n.kind for n in update.notices] == ["changed"]
    assert trace.loaded.loaded == 4


def test_bad_lines_are_reported_once_with_file_and_line(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(line(C0) + b"{oops\n")
    trace = LiveTrace([path])
    update = trace.poll()
    assert [(s.line, s.reason[:8]) for s in update.skipped] == [(2, "not JSON")]
    append(path, line(C1))
    assert trace.poll().skipped == []
    assert trace.loaded.records == 3 and trace.loaded.loaded == 2


# -- events -----------------------------------------------------------------------------------------


def test_a_child_before_its_parent_is_adopted_and_ends_like_inspect(tmp_path):
    path = tmp_path / "t.jsonl"
    trace = LiveTrace([path])
    log = EventLog()
    events = []
    for turn in (C2, C0, C3, C1B, C1):  # c2 arrives before c1, its parent
        append(path, line(turn))
        events += log.events(trace, trace.poll())
    assert not [e for e in events if e["event"] in ("discarded", "undiscarded")]  # verdicts wait for the end
    events += log.finish(trace)
    kinds = [(e["event"], e.get("node_id")) for e in events if e["event"] != "file"]
    assert ("adopted", "c2") in kinds
    adoptions = [(e["parent_id"], e["previous_parent_id"]) for e in events if e["event"] == "adopted"]
    assert adoptions == [("c0", None), ("c1", "c0")]
    assert ("discarded", "c1b") in kinds
    assert last_parents(events) == inspect_parents(path)
    texts = [event_text(e) for e in events]
    assert any("adopted by c1" in t for t in texts)


def test_a_rewritten_history_root_is_explained(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(line(Turn("a", [1, 2, 3], [4, 5, 6, 7])) + line(Turn("r", [1, 2, 3, 4, 5, 9, 10, 11], [12])))
    trace = LiveTrace([path])
    events = EventLog().events(trace, trace.poll())
    root = next(e for e in events if e.get("node_id") == "r")
    assert root["parent_id"] is None
    assert root["near_miss"]["kind"] == "rewritten_continuation"
    assert "new root · broken replay (rewritten): r replays a's reply cut at token 5 (2 of 4 sampled tokens kept)" in (
        event_text(root)
    )


def test_big_leading_files_are_read_by_the_batch_loader_then_followed_from_their_end(tmp_path, monkeypatch):
    """The first look reads the leading plain files like ``inspect`` (every core, the persistent
    cache); a compressed file and what follows it are read line by line on top. The state equals a
    batch load at every step, and lines appended later are numbered from where the files ended."""
    import rollout_graph.live.trace as live_trace

    monkeypatch.setattr(live_trace, "BATCH_MIN_BYTES", 0)
    batch_read = []
    real = live_trace.LiveTrace._read_leading_files

    def spy(self, update):
        before = len(update.added)
        real(self, update)
        batch_read.append(len(update.added) - before)

    monkeypatch.setattr(live_trace.LiveTrace, "_read_leading_files", spy)
    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "a.jsonl").write_bytes(line(C2) + b"\n" + line(C0) + b"{broken\n" + line(C1))  # c2 before its parent
    (folder / "b.jsonl").write_bytes(jsonl([vllm_chat(Turn("x0", [50, 51], [52])), {"not": "a call"}]))
    (folder / "c.jsonl.gz").write_bytes(gzip.compress(line(C1B)))
    (folder / "d.jsonl").write_bytes(line(C3))
    trace = LiveTrace([folder])
    trace.poll()
    assert batch_read == [3 + 1]  # a.jsonl and b.jsonl; c.jsonl.gz and d.jsonl line by line
    assert_same_load(trace.snapshot(), load_paths([folder]))
    assert {(sid, c.node_id): p for sid in trace.session_ids for c, p in _parents(trace.rollout(sid))} == (
        inspect_parents(folder)
    )
    # appended later: new calls link like a batch load of the grown files; a bad line gets its number
    append(folder / "a.jsonl", b"[1, 2\n" + line(Turn("c4", [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 13], [14])))
    update = trace.poll()
    assert [c.node_id for c in update.added] == ["c4"]
    assert [(s.line, s.file) for s in update.skipped] == [(6, str(folder / "a.jsonl"))]
    # skipped lines are listed as they were read (the appended one last); otherwise the same load
    now, batch = trace.snapshot(), load_paths([folder])
    assert sorted(now.skipped, key=_where) == sorted(batch.skipped, key=_where)
    now.skipped = batch.skipped
    assert_same_load(now, batch)
    assert {(sid, c.node_id): p for sid in trace.session_ids for c, p in _parents(trace.rollout(sid))} == (
        inspect_parents(folder)
    )
    assert batch_read == [4]  # only the first look


def test_calls_read_by_the_batch_loader_are_linked_incrementally_only_once_a_call_is_appended(tmp_path, monkeypatch):
    import rollout_graph.live.trace as live_trace

    monkeypatch.setattr(live_trace, "BATCH_MIN_BYTES", 0)
    path = tmp_path / "t.jsonl"
    path.write_bytes(line(C2) + line(C0) + line(C1B))  # c2 before its parent c1, which comes later
    trace = LiveTrace([path])
    trace.poll()
    (session,) = trace._sessions.values()
    assert len(session.seed) == 3  # not linked one by one yet: the first look links in one batch
    assert {c.node_id: p for c, p in _parents(trace.rollout(*trace.session_ids))} == {
        node: parent for (_, node), parent in inspect_parents(path).items()
    }
    append(path, line(C1) + line(C3))  # c1 adopts c2; c3 is a near miss of c1's reply
    assert [c.node_id for c in trace.poll().added] == ["c1", "c3"]
    assert not session.seed  # the appended calls needed the incremental linker: seeded first
    assert {c.node_id: p for c, p in _parents(trace.rollout(*trace.session_ids))} == {
        node: parent for (_, node), parent in inspect_parents(path).items()
    }
    assert_same_load(trace.snapshot(), load_paths([path]))


def test_a_file_whose_last_line_is_unfinished_is_followed_line_by_line(tmp_path, monkeypatch):
    import rollout_graph.live.trace as live_trace

    monkeypatch.setattr(live_trace, "BATCH_MIN_BYTES", 0)
    path = tmp_path / "t.jsonl"
    path.write_bytes(line(C0) + line(C1)[:-10])
    trace = LiveTrace([path])
    update = trace.poll()
    assert [c.node_id for c in update.added] == ["c0"] and trace.pending_bytes()
    append(path, line(C1)[-10:])
    assert [c.node_id for c in trace.poll().added] == ["c1"]
    assert_same_load(trace.snapshot(), load_paths([path]))


def _where(skipped):
    return skipped.file, skipped.line


def _parents(rollout):
    for i, call in enumerate(rollout.calls):
        parent = rollout.topology.parents[i]
        yield call, None if parent is None else rollout.calls[parent].node_id


# -- the command ------------------------------------------------------------------------------------


def tail_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "rollout_graph", "tail", "--interval", "0.1", *args]


def run_while_writing(args: list[str], steps, timeout: float = 60) -> tuple[list[dict], str]:
    """Start `tail --json`; once it printed its first event, run the writer steps, each a pair
    (write, what tail prints once it read the write: a predicate on the events so far), and
    collect every event until it exits on idle. No step waits a fixed time."""
    proc = subprocess.Popen(tail_command(*args), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines: list[bytes] = []
    started = threading.Event()

    def reader():
        for raw in proc.stdout:
            lines.append(raw)
            started.set()

    def events() -> list[dict]:
        return [json.loads(x) for x in list(lines)]

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        assert started.wait(timeout), "tail printed nothing"
        for k, (write, seen) in enumerate(steps):
            write()
            wait_until(lambda seen=seen: seen(events()), timeout=timeout, what=f"tail to read step {k}")
        proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
        thread.join()
    err = proc.stderr.read().decode()
    assert proc.returncode == 0, err
    return events(), err


def _called(node: str, session: str = "s1"):
    return lambda events: any(
        e["event"] == "call" and e["node_id"] == node and e["session_id"] == session for e in events
    )


@pytest.mark.slow
def test_tail_follows_appends_partial_lines_and_new_files(tmp_path):
    folder = tmp_path / "capture"
    folder.mkdir()
    first = folder / "a.jsonl"
    first.write_bytes(line(C2))  # the child first
    half = line(C1)
    other = Turn("x0", [7, 7], [8], session="other")
    steps = [
        (lambda: append(first, line(C0)), _called("c0")),
        # a partial line (nothing reported, nothing skipped), then a new file in the folder: the look
        # that finds the new file reads the first file's partial line too
        (lambda: append(first, half[:30]), lambda events: True),
        (lambda: (folder / "b.jsonl").write_bytes(line(other)), _called("x0", "other")),
        (lambda: append(first, half[30:]), _called("c1")),
        (lambda: append(first, line(C1B)), _called("c1b")),
    ]
    events, err = run_while_writing(["--json", "--until-idle", "1.5", str(folder)], steps)
    assert "Traceback" not in err
    assert not [e for e in events if e["event"] == "skipped"]
    assert {"event": "file", "file": str(folder / "b.jsonl"), "status": "new"} in events
    adoptions = [e for e in events if e["event"] == "adopted" and e["node_id"] == "c2"]
    assert [a["parent_id"] for a in adoptions] == ["c0", "c1"]
    assert last_parents(events) == inspect_parents(folder)
    assert any(e["event"] == "call" and e["session_id"] == "other" for e in events)


# Once in a whole-suite run (2026-12-07, tests/cli after the browser tests) tail had not ended 20 s
# after its Ctrl-C; 13 runs alone, 8 of them with both cores busy, ended at once. Two more tries
# until the cause is found; a tail that never ends on Ctrl-C still fails all three.
@pytest.mark.flaky(reruns=2)
@pytest.mark.slow
def test_tail_text_and_ctrl_c(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(line(C0) + line(C1))
    proc = subprocess.Popen(tail_command(str(path)), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    printed: list[bytes] = []

    def read() -> None:
        for raw in proc.stdout:
            printed.append(raw)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        wait_until(lambda: b"[s1] c1" in b"".join(printed), timeout=30, what="tail to print the calls")
        append(path, line(C1B) + line(C2)[:25])  # the look that prints c1b has read the partial line too
        wait_until(lambda: b"[s1] c1b" in b"".join(printed), timeout=30, what="tail to read the partial line")
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
        reader.join(10)
    text = b"".join(printed).decode()
    err = proc.stderr.read()
    assert proc.returncode == 0
    assert "Traceback" not in err.decode()
    assert "[s1] c1  ← c0 by tokens (+1 context, 4 sampled tokens)" in text
    assert "25 bytes of an unfinished last line" in text
    assert "· the follow ended: no call is discarded" in text  # c1b and c1 are both leaves: none continued


def test_tail_needs_existing_paths(tmp_path):
    done = subprocess.run(tail_command(str(tmp_path / "nope.jsonl")), cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.startswith("rollout-graph: cannot read")


@pytest.mark.slow
def test_sigterm_ends_the_follow_with_the_verdicts(tmp_path):
    """SIGTERM (a supervisor stopping tail) ends the follow like Ctrl-C: the discarded calls of
    the trace as it is then, in inspect's words, and exit code 0."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(line(C0) + line(C1) + line(C1B) + line(C2))  # c1b: a retry of c1, which c2 continued
    proc = subprocess.Popen(tail_command(str(path)), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    printed: list[bytes] = []
    reader = threading.Thread(target=lambda: printed.extend(proc.stdout))
    reader.start()
    try:
        wait_until(lambda: b"[s1] c2" in b"".join(printed), timeout=30, what="tail to print the calls")
        assert b"discarded" not in b"".join(printed)  # no verdict while following
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
        reader.join(10)
    text = b"".join(printed).decode()
    assert proc.returncode == 0, proc.stderr.read().decode()
    assert "· the follow ended: 1 discarded call" in text
    assert "[s1] c1b  discarded: c1 continued (retry: " in text
