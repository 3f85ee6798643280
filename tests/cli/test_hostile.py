"""The hostile-input corpus (tests/support/hostile.py) through inspect, export, explain and audit.

Every case must exit 0, balance its counts (records == loaded + skipped), keep the good records
around the bad one, and say what happened (a skipped reason, a finding or a pending line). Bombs
run in a subprocess under an address-space limit with low limits, and report their peak memory.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import stat
import subprocess
import sys
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest

from rollout_graph.cli import main
from tests.support.hostile import Case, cases
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
CASES = cases()
SMALL = [c for c in CASES if not c.bomb]
BOMBS = [c for c in CASES if c.bomb]
ADDRESS_SPACE = 3 << 30  # virtual memory a bomb run may map (imports alone map ~1 GB)
PEAK_RSS = 400 << 20  # resident memory a bomb run may reach


def written(case: Case, folder: Path) -> Path:
    path = folder / f"{case.name}{case.suffix}"
    case.write(path)
    return path


def check_contract(case: Case, payload: dict) -> None:
    load = payload["load"]
    assert load["records"] == load["loaded"] + len(load["skipped"]), load
    nodes = {n["node_id"] for s in payload["sessions"] for n in s["nodes"]}
    assert set(case.loads) <= nodes, (case.loads, nodes, load["skipped"])
    if case.skipped:
        reasons = [s["reason"] for s in load["skipped"]]
        assert any(case.skipped in r for r in reasons), reasons
    else:
        assert not [s for s in load["skipped"] if s["line"] == 0], load["skipped"]
    assert len(load.get("pending", [])) == case.pending, load.get("pending")
    if case.finding:
        codes = {f["code"] for s in payload["sessions"] for f in s["findings"]}
        assert case.finding in codes, codes


@pytest.mark.parametrize("case", SMALL, ids=lambda c: c.name)
def test_hostile_case_through_every_verb(case: Case, tmp_path, capsysbinary):
    path = written(case, tmp_path)
    assert main(["inspect", str(path), "--json", *case.flags]) == 0
    check_contract(case, orjson.loads(capsysbinary.readouterr().out))

    assert main(["inspect", str(path), *case.flags]) == 0
    text = capsysbinary.readouterr().out.decode()
    assert "\x1b" not in text and "\x07" not in text
    assert main(["explain", str(path), *case.flags]) == 0
    assert "\x1b" not in capsysbinary.readouterr().out.decode()

    rows = tmp_path / "rows.jsonl"
    assert main(["export", str(path), "--out", str(rows), *case.flags]) == 0
    exported = [json.loads(line) for line in rows.read_text().splitlines()]
    assert {"before", "after"} & {n for r in exported for n in r["node_ids"]} >= set(case.loads) & {"before", "after"}

    table = tmp_path / "audit.parquet"
    assert main(["audit", str(path), "--out", str(table), "--workers", "1", *case.flags]) == 0
    audit_rows = pq.read_table(table).to_pylist()
    assert any(r["error"] is None and r["session_id"] == "s1" for r in audit_rows), audit_rows
    capsysbinary.readouterr()


def _limited_run(args: list[str]) -> tuple[subprocess.CompletedProcess, int]:
    code = (
        "import resource, sys\n"
        f"resource.setrlimit(resource.RLIMIT_AS, ({ADDRESS_SPACE}, {ADDRESS_SPACE}))\n"
        "from rollout_graph.cli import main\n"
        "rc = main(sys.argv[1:])\n"
        # VmHWM, not ru_maxrss: Linux keeps ru_maxrss across exec (the forked test runner's size).
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1]\n"
        "print('peak_rss_kb=' + hwm, file=sys.stderr)\n"
        "sys.exit(rc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, cwd=ROOT, timeout=300)
    peak = int(done.stderr.decode().rsplit("peak_rss_kb=", 1)[1].split()[0]) * 1024
    return done, peak


@pytest.mark.slow
@pytest.mark.parametrize("case", BOMBS, ids=lambda c: c.name)
def test_bombs_stay_within_memory_and_keep_their_neighbours(case: Case, tmp_path):
    path = written(case, tmp_path)
    done, peak = _limited_run(["inspect", str(path), "--json", *case.flags])
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    check_contract(case, orjson.loads(done.stdout))
    assert peak < PEAK_RSS, f"peak RSS {peak / 2**20:.0f} MB"
    out = tmp_path / "rows.jsonl"
    done, peak = _limited_run(["export", str(path), "--out", str(out), *case.flags])
    assert done.returncode == 0 and out.exists(), done.stderr.decode()[-2000:]
    assert peak < PEAK_RSS


def test_a_fifo_is_reported_not_waited_on(tmp_path):
    fifo = tmp_path / "live.jsonl"
    os.mkfifo(fifo)
    good = tmp_path / "good.jsonl"
    cases_by_name = {c.name: c for c in CASES}
    cases_by_name["crlf_lines"].write(good)
    result = subprocess.run(
        [sys.executable, "-m", "rollout_graph", "inspect", str(tmp_path), "--json"],
        capture_output=True,
        timeout=60,
        cwd=ROOT,
    )
    assert result.returncode == 0
    load = orjson.loads(result.stdout)["load"]
    assert load["loaded"] == 2
    assert any("FIFO" in s["reason"] for s in load["skipped"]), load["skipped"]
    direct = subprocess.run(
        [sys.executable, "-m", "rollout_graph", "inspect", str(fifo)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert direct.returncode == 2 and "FIFO" in direct.stderr


def test_proc_files_and_devices_never_hang(tmp_path, capsys):
    assert main(["inspect", "/proc/self/status", "--json"]) == 2  # records, none of which loads (README)
    load = json.loads(capsys.readouterr().out)["load"]
    assert load["records"] == load["loaded"] + len(load["skipped"]) and load["loaded"] == 0
    assert main(["inspect", "/dev/zero"]) == 2
    assert "a device" in capsys.readouterr().err


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file_and_folder_are_reported(tmp_path, capsys):
    cases_by_name = {c.name: c for c in CASES}
    cases_by_name["crlf_lines"].write(tmp_path / "good.jsonl")
    locked = tmp_path / "locked.jsonl"
    locked.write_text("{}\n")
    locked.chmod(0)
    folder = tmp_path / "private"
    folder.mkdir()
    (folder / "x.jsonl").write_text("{}\n")
    folder.chmod(0)
    try:
        assert main(["inspect", str(tmp_path), "--json"]) == 0
        load = json.loads(capsys.readouterr().out)["load"]
        reasons = {Path(s["file"]).name: s["reason"] for s in load["skipped"]}
        assert "Permission denied" in reasons["locked.jsonl"] and "cannot read folder" in reasons["private"]
        assert load["loaded"] == 2
    finally:
        folder.chmod(stat.S_IRWXU)


def test_a_file_truncated_while_read_does_not_kill_the_reader(tmp_path):
    """What log rotation does: the file shrinks under the reader (a memory map would SIGBUS)."""
    from rollout_graph.ingest.files.sources import Source
    from rollout_graph.ingest.values.read import read_values
    from tests.support.builders import jsonl
    from tests.support.hostile import good

    path = tmp_path / "rotating.jsonl"
    path.write_bytes(jsonl([good(f"c{i}", list(range(2000)), [1]) for i in range(3000)]))
    values = read_values(Source.from_path(path))
    first = next(values)
    os.truncate(path, 100)
    rest = list(values)
    assert first.error is None and all(v.error is None or v.pending for v in rest)


@pytest.mark.slow
def test_a_killed_audit_worker_is_reported_and_the_audit_finishes(tmp_path):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from synthetic import write_trace

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(6):
        write_trace(corpus / f"r{i}.jsonl", 120, seed=i)
    out = tmp_path / "audit.parquet"
    process = subprocess.Popen(
        [sys.executable, "-m", "rollout_graph", "audit", str(corpus), "--out", str(out), "--workers", "2"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    children_file = Path(f"/proc/{process.pid}/task/{process.pid}/children")

    def reading_worker() -> int | None:
        """An audit worker with a trace of the corpus open."""
        assert process.poll() is None, "the audit ended before a worker was seen"
        for child in children_file.read_text().split() if children_file.exists() else []:
            fds = Path(f"/proc/{child}/fd")
            if any(str(corpus) in os.readlink(fd) for fd in fds.iterdir()):
                return int(child)
        return None

    victim = wait_until(reading_worker, timeout=60, what="an audit worker reading a file", interval=0.005)
    os.kill(victim, signal.SIGKILL)
    _, err = process.communicate(timeout=300)
    assert victim is not None, "no audit worker was seen"
    assert process.returncode == 0, err
    rows = pq.read_table(out).to_pylist()
    failed = [r for r in rows if r["error"]]
    assert len(failed) == 1 and "killed by signal 9" in failed[0]["error"], failed
    assert {Path(r["source_file"]).name for r in rows} == {f"r{i}.jsonl" for i in range(6)}
    assert "failed" in err and "killed by signal 9" in err


def test_export_and_audit_are_atomic_on_a_read_only_folder(tmp_path, capsys):
    cases_by_name = {c.name: c for c in CASES}
    trace = tmp_path / "t.jsonl"
    cases_by_name["crlf_lines"].write(trace)
    folder = tmp_path / "out"
    folder.mkdir()
    old = folder / "rows.jsonl"
    old.write_text("previous\n")
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        if os.geteuid() == 0:
            pytest.skip("root writes to read-only folders")
        assert main(["export", str(trace), "--out", str(old)]) == 3
        assert "cannot write" in capsys.readouterr().err
        assert old.read_text() == "previous\n"
        assert main(["audit", str(trace), "--out", str(folder / "a.parquet"), "--workers", "1"]) == 3
    finally:
        folder.chmod(stat.S_IRWXU)


def test_a_failed_export_leaves_no_file_and_keeps_the_old_one(tmp_path, monkeypatch, capsys):
    from rollout_graph.reports import export

    cases_by_name = {c.name: c for c in CASES}
    trace = tmp_path / "t.jsonl"
    cases_by_name["crlf_lines"].write(trace)
    out = tmp_path / "rows.jsonl"
    out.write_text("previous\n")

    def full_disk(rollout, roles=export.ALL_ROLES, drop_unfinished=False):
        yield {"session_id": "s1"}
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export, "iter_training_rows", full_disk)
    assert main(["export", str(trace), "--out", str(out)]) == 3
    assert "No space left on device" in capsys.readouterr().err
    assert out.read_text() == "previous\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_limits_come_from_the_environment(tmp_path, capsys, monkeypatch):
    case = {c.name: c for c in CASES}["ids_over_max_ids"]
    path = written(case, tmp_path)
    monkeypatch.setenv("ROLLOUT_GRAPH_MAX_IDS", "1000")
    assert main(["inspect", str(path), "--json"]) == 0
    check_contract(case, json.loads(capsys.readouterr().out))
    monkeypatch.setenv("ROLLOUT_GRAPH_MAX_IDS", "lots")
    assert main(["inspect", str(path)]) == 2
    assert "not a size" in capsys.readouterr().err


def test_resource_module_is_available():
    assert resource.RLIMIT_AS


def test_document_parent_cycles_self_parents_and_dangling_parents_become_findings():
    from rollout_graph.core.records import SessionInput
    from rollout_graph.pipeline import analyse
    from tests.support.builders import calls_from_tokens

    calls = calls_from_tokens([([1, 2], [3]), ([1, 2, 3, 4], [5]), ([9], [8]), ([7], [6]), ([5], [4])])
    claimed = {"n0": "n1", "n1": "n0", "n2": "n2", "n3": "ghost", "n4": None}
    for call in calls:
        call.claims.update(in_sequences=True, parent=claimed[call.node_id])
    rollout = analyse(SessionInput("s", calls, document={"sequences": []}))
    parents = rollout.topology.parents
    # A forest: every walk up ends at a root.
    for node in range(len(calls)):
        assert rollout.topology.path_to(node)[0] in rollout.topology.roots
    details = {f.node_id: f.detail for f in rollout.findings if f.code == "document_invalid_parent"}
    assert "cycle" in details["n0"] or "cycle" in details["n1"]
    assert "own parent" in details["n2"] and "'ghost'" in details["n3"]
    assert parents[2] is None and parents[4] is None


def test_the_memory_cap_stops_a_file_and_says_so(tmp_path, capsys):
    from tests.support.builders import jsonl
    from tests.support.hostile import good

    path = tmp_path / "many.jsonl"
    path.write_bytes(jsonl([good(f"c{i}", [1, 2, 3], [4 + i]) for i in range(450)]))
    assert main(["inspect", str(path), "--json", "--max-memory", "1K"]) == 0
    load = json.loads(capsys.readouterr().out)["load"]
    assert load["records"] == load["loaded"] + len(load["skipped"])
    assert load["loaded"] == 199 and "max_memory_bytes" in load["skipped"][-1]["reason"]


def test_the_generator_writes_every_case(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.hostile", str(tmp_path / "corpus")],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert len(list((tmp_path / "corpus").iterdir())) == len(CASES)
