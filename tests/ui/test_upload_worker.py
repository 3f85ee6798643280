"""Uploads load in a capped child process (rollout_graph.worker, views/state/upload_worker.py):
the same analysis as in process, a wall-clock budget, cancellation, an address-space cap, and a
result that comes back without pickle."""

from __future__ import annotations

import os
import pickle
import subprocess
import threading
import time
from pathlib import Path

import orjson
import pytest

from rollout_graph.analysis.decode import decoder_for
from rollout_graph.ingest.files.sources import Source
from rollout_graph.ingest.limits import Limits
from rollout_graph.ingest.load.calls import load_sources
from rollout_graph.ingest.load.trace_files import trace_files
from rollout_graph.pipeline import analyse
from rollout_graph.resources import SAMPLES
from rollout_graph.worker import Budget, LoadCancelled, LoadTimedOut, load_in_child
from tests.support.hostile import good

FRAMEWORKS = Path(__file__).resolve().parents[1] / "fixtures" / "frameworks"


def _samples() -> list[tuple[str, bytes]]:
    return [(p.name, p.read_bytes()) for p in trace_files(SAMPLES)]


def _many_sessions(n: int) -> bytes:
    record = orjson.dumps({**good("CALLID", [1, 2, 3], [4]), "session_id": "SESSID"})
    return b"\n".join(record.replace(b"CALLID", b"c%d" % i).replace(b"SESSID", b"s%d" % i) for i in range(n)) + b"\n"


@pytest.fixture
def child_pids(monkeypatch):
    """The pids of the child processes load_in_child starts."""
    pids: list[int] = []
    real = subprocess.Popen

    class Recording(real):  # type: ignore[misc, valid-type]
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            pids.append(self.pid)

    monkeypatch.setattr(subprocess, "Popen", Recording)
    return pids


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _shape(rollout) -> dict:
    topo = rollout.topology
    return {
        "stats": rollout.stats,
        "findings": [f.as_dict() for f in rollout.findings],
        "parents": topo.parents,
        "discarded": topo.discarded,
        "unfinished": topo.unfinished,
        "sequences": [repr(s) for s in rollout.sequences],
        "roles": rollout.node_roles,
        "trainable": [bool(t) for t in rollout.trainable],
        "linked_by": rollout.linked_by,
        "near_misses": {k: repr(m) for k, m in rollout.near_misses.items()},
        "tokenizer": rollout.tokenizer,
        "signals": None if rollout.signals is None else (len(rollout.signals.findings), rollout.signals.summary()),
        "tokens": [rollout.tokens(s).input_ids.tolist() for s in rollout.sequences],
    }


def _prime_rl() -> list[tuple[str, bytes]]:
    folder = FRAMEWORKS / "prime-rl"
    return [(str(p.relative_to(folder)), p.read_bytes()) for p in trace_files(folder)]


@pytest.mark.parametrize(("files", "carries"), [(_samples, "near_misses"), (_prime_rl, "signals")])
def test_the_child_delivers_what_an_in_process_load_gives_and_nothing_is_unpickled(files, carries, monkeypatch):
    named = files()
    loaded = load_sources([Source.from_bytes(n, d) for n, d in named])
    expected = {sid: _shape(analyse(s, decoder=decoder_for(s.calls, []))) for sid, s in loaded.sessions.items()}

    def refuse(*args, **kwargs):
        raise AssertionError("the server unpickled something")

    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(pickle, "load", refuse)
    done = load_in_child(named)
    assert done.loaded is not None and done.rollouts is not None
    assert done.loaded.records == loaded.records and done.loaded.loaded == loaded.loaded
    assert [str(s) for s in done.loaded.skipped] == [str(s) for s in loaded.skipped]
    assert {sid: _shape(r) for sid, r in done.rollouts.items()} == expected
    assert any(s[carries] for s in expected.values())
    assert done.peak_bytes is not None and done.peak_bytes < 1 << 30


def test_a_load_over_its_time_budget_is_killed_with_a_named_message(child_pids):
    start = time.monotonic()
    with pytest.raises(LoadTimedOut) as caught:
        load_in_child([("many.jsonl", _many_sessions(20_000))], budget=Budget(seconds=2), label="This upload")
    assert time.monotonic() - start < 10
    message = str(caught.value)
    assert "This upload took longer than 2 s to analyse" in message
    assert "ROLLOUT_GRAPH_MAX_LOAD_SECONDS" in message and "--max-load-seconds" in message
    assert "rollout-graph audit" in message and "rollout-graph inspect" in message
    assert child_pids and all(_gone(pid) for pid in child_pids)


def test_a_load_whose_visitor_left_is_killed_at_once(child_pids):
    left = threading.Event()
    threading.Timer(1.5, left.set).start()
    start = time.monotonic()
    with pytest.raises(LoadCancelled, match="browser session ended"):
        load_in_child([("many.jsonl", _many_sessions(20_000))], alive=lambda: not left.is_set())
    assert time.monotonic() - start < 6
    assert child_pids and all(_gone(pid) for pid in child_pids)


def test_progress_comes_from_the_child_stage_by_stage():
    seen: list[dict] = []
    load_in_child([("some.jsonl", _many_sessions(300))], progress=seen.append, poll=0.02)
    assert seen and seen[-1]["stage"] == "analysing" and seen[-1]["sessions_done"] == 300


def test_the_address_space_cap_holds_in_the_child_and_the_record_is_skipped_by_name():
    record = good("big", [1, 2, 3], [4])
    record["request"]["messages"][0]["content"] = "x" * (100 << 20)
    data = orjson.dumps(record) + b"\n" + orjson.dumps(good("small", [1, 2, 3], [4])) + b"\n"
    done = load_in_child([("big.jsonl", data)], budget=Budget(seconds=60, memory_bytes=300 << 20))
    assert done.loaded is not None
    assert done.loaded.records == done.loaded.loaded + len(done.loaded.skipped)
    assert any("out of memory" in s.reason for s in done.loaded.skipped)
    unlimited = load_in_child([("big.jsonl", data)], Limits(), Budget(seconds=60, memory_bytes=None))
    assert unlimited.loaded is not None and unlimited.loaded.loaded == 2


def test_budget_from_the_environment():
    assert Budget.from_env({}) == Budget()
    assert Budget.from_env({"ROLLOUT_GRAPH_MAX_LOAD_SECONDS": "5", "ROLLOUT_GRAPH_MAX_LOAD_MEMORY": "1G"}) == Budget(
        5.0, 1 << 30
    )
    assert Budget.from_env({"ROLLOUT_GRAPH_MAX_LOAD_SECONDS": "soon", "ROLLOUT_GRAPH_MAX_LOAD_MEMORY": "0"}) == Budget(
        60.0, None
    )


def test_the_sidebar_bar_reads_the_childs_progress():
    from rollout_graph.ui.state.upload_worker import _progress, upload_label

    reading = _progress({"stage": "reading", "files_done": 0, "files_total": 2, "records": 250, "lines_total": 1000,
                         "elapsed": 3.2, "budget": 60.0})  # fmt: skip
    assert reading.bytes_done == 125 and reading.bytes_total == 1000
    assert reading.describe() == "reading file 1 of 2 · 250 records · 3 s of at most 60 s"
    compressed = _progress({"stage": "reading", "files_done": 1, "files_total": 2, "records": 9, "lines_total": None})
    assert compressed.bytes_done == 250
    analysing = _progress({"stage": "analysing", "files_done": 2, "files_total": 2, "sessions_done": 30,
                           "sessions_total": 40, "elapsed": 10, "budget": 60})  # fmt: skip
    assert analysing.bytes_done == 875 and analysing.describe() == "analysing rollout 30 of 40 · 10 s of at most 60 s"
    # file names are escaped for Markdown and at most three are named
    label = upload_label(["**bold**.jsonl", "b", "c", "d", "e"])
    assert "**bold**" not in label and label.endswith("and 2 more)")


def test_a_load_the_columnar_form_cannot_carry_comes_back_as_none_for_an_in_process_load():
    line = orjson.dumps(good("a", [1, 2, 3], [4])).replace(b'"temperature":1.0', b'"temperature":NaN', 1)
    assert b"NaN" in line
    done = load_in_child([("nan.jsonl", line + b"\n")])
    assert done.loaded is None and done.rollouts is None and done.peak_bytes
    # what the app then does: the same bytes in process (the child showed they fit the budgets)
    loaded = load_sources([Source.from_bytes("nan.jsonl", line + b"\n")])
    assert loaded.loaded == 1


def test_a_temporary_folder_that_cannot_be_written_is_a_named_refusal(monkeypatch, tmp_path):
    from rollout_graph.worker import LoadRefused

    full = tmp_path / "full"
    full.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(full))
    real = Path.write_bytes

    def no_space(self, data):
        if self.parent.name == "in":
            raise OSError(28, "No space left on device")
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", no_space)
    with pytest.raises(LoadRefused, match="No space left on device") as caught:
        load_in_child([("a.jsonl", b"{}\n")], label="This upload")
    assert str(caught.value).startswith("This upload could not be analysed")
    assert not list(full.iterdir())  # the temporary folder is removed


def test_every_hostile_case_uploaded_gives_the_load_report_of_an_in_process_load(tmp_path):
    from tests.support.hostile import write_all

    paths = write_all(tmp_path / "hostile")
    named = [(p.name, p.read_bytes()) for p in paths.values()]
    expected = load_sources([Source.from_bytes(n, d) for n, d in named])
    done = load_in_child(named)
    if done.loaded is None:  # a value the columnar form cannot carry: the app loads it in process
        pytest.skip("not transferable")
    assert done.loaded.report() == expected.report()
    assert set(done.rollouts) == set(expected.sessions)
    for sid, session in expected.sessions.items():
        assert _shape(done.rollouts[sid]) == _shape(analyse(session, decoder=decoder_for(session.calls, [])))


def test_an_upload_is_read_under_the_apps_limits_public_and_environment(monkeypatch):
    """`view --public` (ROLLOUT_GRAPH_PUBLIC=1) and ROLLOUT_GRAPH_MAX_* reach an upload's load
    (docs/limits.md): the upload is not read under the library's defaults."""
    from rollout_graph.ingest.limits import PUBLIC
    from rollout_graph.ui.state import sources

    seen = []

    def capture(named, limits, alive, report):
        seen.append(limits)
        raise sources.UploadRefused("stop here")

    class Upload:
        def __init__(self, name: str, data: bytes) -> None:
            self.name, self.size, self._data = name, len(data), data

        def getvalue(self) -> bytes:
            return self._data

    monkeypatch.setattr(sources, "load_upload", capture)
    monkeypatch.setenv("ROLLOUT_GRAPH_PUBLIC", "1")
    monkeypatch.setenv("ROLLOUT_GRAPH_MAX_SESSIONS", "7")
    with pytest.raises(sources.UploadRefused):
        sources.load_uploads([Upload("a.jsonl", _many_sessions(3))])
    assert seen and seen[0].max_sessions == 7
    assert seen[0].max_line_bytes == PUBLIC.max_line_bytes
