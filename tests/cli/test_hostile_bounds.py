"""Issue 41 (items 1, 5-7, 11-14, 16): visitor patterns, quadratic readers, odd steps and names, FIFOs.

The corpus cases (steps beyond 64 bits, OTel span times and conversation ids, malformed NeMo-RL
and verifiers fields, a verifiers chain) are in tests/support/hostile.py and run through every
verb by tests/cli/test_hostile.py; here are the cases that need more than one file or a process:
a catastrophic regular expression through the command line (its time and memory limits), the
server thread left free while a pattern runs, a verifiers chain's sequences shared (linear) and
its memory at 2,000 and 4,000 nodes, file names that are not UTF-8 through every verb, one bad
step in a corpus audit, and FIFOs given as --signals and --notes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import orjson
import pyarrow.parquet as pq
import pytest

from rollout_graph.analysis.patterns import ENV_MEMORY, ENV_SECONDS, PatternLimits
from rollout_graph.analysis.search import Query, SearchIndex, SearchLimitError, search
from rollout_graph.cli import main
from rollout_graph.ingest.load.files import load_paths
from tests.cli.test_hostile_scale import capped_run
from tests.support.builders import jsonl
from tests.support.hostile import AFTER, BEFORE, HUGE_STEP, good, nemo_row, verifiers_chain
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_traces" / "vllm"
REDOS = r"(\w+\s?)*@@@"


def _cli(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rollout_graph", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def _pattern_children() -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        ppid = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("PPid:")), None)
        if b"_pattern_child.py" in cmdline and ppid == os.getpid():
            found.append(int(pid))
    return found


# --- item 1: a visitor's regular expression -------------------------------------------------------


def test_a_catastrophic_regex_on_the_sample_exits_4_at_its_time_limit():
    started = time.monotonic()
    done = _cli("search", "--regex", REDOS, str(SAMPLE), "--no-cache", "--regex-timeout", "1")
    elapsed = time.monotonic() - started
    assert done.returncode == 4, done.stderr
    assert done.stdout == ""
    assert "took longer than 1 s and was stopped" in done.stderr and ENV_SECONDS in done.stderr
    assert "--regex-timeout" in done.stderr
    assert elapsed < 60, elapsed  # the pattern alone would take hours (exponential)


def test_the_regex_limit_comes_from_the_environment_and_a_good_pattern_still_finds_its_hits():
    done = _cli("search", "--regex", REDOS, str(SAMPLE), "--no-cache", env={ENV_SECONDS: "1"})
    assert done.returncode == 4 and "took longer than 1 s" in done.stderr, done.stderr
    good_search = _cli("search", "--regex", r"No such \w+", str(SAMPLE), "--no-cache", "--json")
    assert good_search.returncode == 0, good_search.stderr
    assert json.loads(good_search.stdout)["hits"]
    assert _cli("search", "--regex", "x", str(SAMPLE), "--regex-timeout", "0").returncode == 2


def test_a_pattern_that_needs_memory_is_stopped_at_the_childs_cap(tmp_path):
    trace = tmp_path / "long.jsonl"
    record = good("long", [1, 2, 3], [4])
    record["request"]["messages"] = [{"role": "user", "content": "ab" * 3_000_000 + "c"}]
    trace.write_bytes(jsonl([record]))
    done = _cli("search", "--regex", r"(?:(a)|b)*c", str(trace), "--no-tokens", "--no-cache", env={ENV_MEMORY: "200M"})
    assert done.returncode == 4, done.stderr
    assert "needed more than 200 MB of memory" in done.stderr and ENV_MEMORY in done.stderr


def test_an_exponential_empty_match_check_is_bounded_too():
    with pytest.raises(SearchLimitError):
        Query.compile("(?:|)" * 40 + "(?!)", regex=True, limits=PatternLimits(seconds=0.5))


def test_a_pattern_never_holds_this_process_while_it_runs():
    """The search waits on a child process: this thread keeps running (the server's health check,
    another visitor's page, the SIGTERM handler) and the child is gone once the search ends."""
    rollout = load_paths([SAMPLE]).sessions["list-todos"]
    from rollout_graph.pipeline import analyse

    index = SearchIndex(analyse(rollout))
    query = Query.compile(REDOS, regex=True, limits=PatternLimits(seconds=3))
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            search(index, query)
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            outcome.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    children = wait_until(_pattern_children, timeout=60, what="the pattern's child process")
    steps = 0
    while worker.is_alive():  # this thread runs Python while the pattern runs: the GIL is free
        steps += 1
        worker.join(0.01)
    assert steps > 1
    assert outcome and isinstance(outcome[0], SearchLimitError), outcome
    assert not any(Path(f"/proc/{pid}").exists() and pid in _pattern_children() for pid in children)


# --- item 5: verifiers traces in linear time and memory -------------------------------------------


def test_a_verifiers_chain_shares_one_sequence_and_messages(tmp_path):
    path = tmp_path / "chain.jsonl"
    path.write_bytes(jsonl([verifiers_chain(400)]))
    calls = load_paths([path]).sessions["chain"].calls
    assert len(calls) == 200
    # every prompt and sampled span is a view of one array: the ids the reader built are the
    # chain's own (linear), not a copy of the path per call (quadratic)
    bases = {id(c.prompt_ids.base) for c in calls} | {id(c.sampled_ids.base) for c in calls}
    assert len(bases) == 1
    arena = calls[-1].prompt_ids.base
    assert arena.shape[0] == 400 * 3 and not arena.flags.writeable
    last = calls[-1]
    assert np.array_equal(last.prompt_ids, arena[: last.n_prompt])
    # the messages are the same objects in every call (each node's message converted once)
    assert calls[-1].request_messages[0] is calls[0].request_messages[0]
    assert [len(c.request_messages) for c in calls] == list(range(1, 400, 2))


def test_a_branching_verifiers_trace_builds_one_sequence_per_branch(tmp_path):
    trace = verifiers_chain(6)
    trace["nodes"].append({**trace["nodes"][5], "parent": 4})  # a second answer to node 4
    path = tmp_path / "branch.jsonl"
    path.write_bytes(jsonl([trace]))
    calls = {c.node_id: c for c in load_paths([path]).sessions["chain"].calls}
    assert set(calls) == {"n1", "n3", "n5", "n6"}
    assert np.array_equal(calls["n6"].prompt_ids, calls["n5"].prompt_ids)
    assert calls["n1"].prompt_ids.base is calls["n3"].prompt_ids.base
    assert len({id(c.prompt_ids.base) for c in calls.values()}) == 2


@pytest.mark.slow
def test_a_verifiers_chain_grows_linearly_in_memory(tmp_path):
    """Issue 41 item 5: 1,000 / 2,000 / 4,000 nodes took 90 / 247 / 873 MB. Now a fraction of that:
    only the calls' lists of message references grow with the path (8 bytes each, bounded by
    max_expanded_ids)."""
    peaks = {}
    for n in (2000, 4000):
        path = tmp_path / f"chain{n}.jsonl"
        path.write_bytes(jsonl([BEFORE, verifiers_chain(n), AFTER]))
        done, peak = capped_run(["inspect", str(path), "--json", "--no-cache"], 3 << 30)
        assert done.returncode == 0, done.stderr[-2000:]
        assert orjson.loads(done.stdout)["load"]["loaded"] == 2 + n // 2
        peaks[n] = peak
    assert peaks[4000] < 200 << 20, peaks  # before: 873 MB
    assert peaks[4000] < 2.5 * peaks[2000], peaks


# --- item 6: steps beyond 64 bits never cost a corpus audit ---------------------------------------


def test_one_line_with_a_huge_step_never_kills_a_corpus_audit_or_run(tmp_path):
    corpus = tmp_path / "run"
    for step in (1, 2):
        (corpus / f"step_{step}").mkdir(parents=True)
        (corpus / f"step_{step}" / "train_data.jsonl").write_bytes(jsonl([{**nemo_row(), "step": step}]))
    (corpus / "step_2" / "odd.jsonl").write_bytes(jsonl([{**nemo_row(), "step": HUGE_STEP}]))
    (corpus / "step_99999999999999999999999").mkdir()
    (corpus / "step_99999999999999999999999" / "x.jsonl").write_bytes(jsonl([nemo_row()]))
    out = tmp_path / "audit.parquet"
    assert main(["audit", str(corpus), "--out", str(out), "--workers", "1"]) == 0
    rows = pq.read_table(out).to_pylist()
    assert len(rows) == 4 and all(r["error"] is None for r in rows), rows
    # the refused field leaves the path's step (step_2); the refused path leaves no step
    assert sorted(r["step"] for r in rows if r["step"] is not None) == [1, 2, 2]
    assert main(["run", str(corpus)]) == 0
    assert main(["inspect", str(corpus), "--json", "--no-cache"]) == 0


# --- item 7: file names that are not UTF-8 ----------------------------------------------------------


def test_file_names_that_are_not_utf8_are_shown_escaped_through_every_verb(tmp_path, capsysbinary):
    folder = tmp_path / "names"
    folder.mkdir()
    odd = os.fsencode(folder) + b"/bad\xff\xfe.jsonl"
    with open(odd, "wb") as f:
        f.write(jsonl([BEFORE, AFTER]))
    (folder / "good.jsonl").write_bytes(jsonl([{**good("g", [1], [2]), "session_id": "s2"}]))
    os.makedirs(os.fsencode(folder) + b"/step_\xff3")
    with open(os.fsencode(folder) + b"/step_\xff3/x\xe9.jsonl", "wb") as f:
        f.write(jsonl([{**good("h", [1], [2]), "session_id": "s3"}]))

    assert main(["inspect", str(folder), "--json", "--no-cache"]) == 0
    payload = orjson.loads(capsysbinary.readouterr().out)
    assert "bad\\xff\\xfe.jsonl" in " ".join(payload["load"]["files"])
    assert {"s1", "s2", "s3"} <= {s["session_id"] for s in payload["sessions"]}
    assert main(["inspect", str(folder), "--json"]) == 0  # through the parsed-trace cache too
    capsysbinary.readouterr()
    table = tmp_path / "audit.parquet"
    assert main(["audit", str(folder), "--out", str(table), "--workers", "1"]) == 0
    rows = pq.read_table(table).to_pylist()
    assert any(r["source_file"].endswith("bad\\xff\\xfe.jsonl") for r in rows) and all(r["error"] is None for r in rows)
    assert main(["run", str(folder)]) == 0
    assert main(["bundle", str(folder), "--out", str(tmp_path / "b.html")]) == 0
    assert main(["export", str(folder), "--out", str(tmp_path / "rows.parquet")]) == 0
    capsysbinary.readouterr()
    assert main(["tail", str(folder), "--json", "--until-idle", "0"]) == 0
    events = [orjson.loads(line) for line in capsysbinary.readouterr().out.splitlines() if line.strip()]
    assert any("\\xff" in str(e.get("file", "")) for e in events)


# --- item 14: FIFOs as --signals and --notes ------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["inspect", "TRACE", "--signals", "FIFO"],
        ["audit", "TRACE", "--signals", "FIFO", "--out", "OUT"],
        ["bundle", "TRACE", "--notes", "FIFO", "--out", "OUT"],
        ["export", "TRACE", "--notes", "FIFO", "--out", "OUT"],
    ],
    ids=lambda a: f"{a[0]} {a[2]}",
)
def test_a_fifo_as_signals_or_notes_is_refused_not_waited_on(args, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(jsonl([BEFORE, AFTER]))
    out = tmp_path / ("out.parquet" if args[0] == "audit" else "out.html" if args[0] == "bundle" else "out.jsonl")
    real = [{"TRACE": str(trace), "FIFO": str(fifo), "OUT": str(out)}.get(a, a) for a in args]
    done = _cli(*real, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "not a regular file (a FIFO)" in done.stderr
