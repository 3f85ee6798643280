"""Issue 28: odd bytes through every verb, documents that expand, and loads under caps.

The fast cases run in the default suite; the scale cases (a million small sessions, wide forks,
many retries, long documents, near-cap lines) are ``slow`` and run in a subprocess whose address
space is capped with ``resource.setrlimit(RLIMIT_AS)``, reporting their peak resident memory.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import orjson
import pyarrow.parquet as pq
import pytest

from rollout_graph.cli import main
from rollout_graph.ingest.load.files import load_paths
from tests.support.builders import jsonl
from tests.support.hostile import AFTER, BEFORE, _raw_surrogates, good
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]


def _surrogate_file(path: Path, where: str) -> Path:
    path.write_bytes(jsonl([BEFORE]) + _raw_surrogates(where) + b"\n" + jsonl([AFTER]))
    return path


@pytest.mark.parametrize("where", ["content", "key", "session"])
def test_raw_surrogate_bytes_survive_every_verb(where, tmp_path, capsysbinary):
    path = _surrogate_file(tmp_path / "odd.jsonl", where)
    assert main(["inspect", str(path), "--json"]) == 0
    payload = orjson.loads(capsysbinary.readouterr().out)
    nodes = {n["node_id"] for s in payload["sessions"] for n in s["nodes"]}
    assert {"before", "after", "bad"} <= nodes
    assert payload["load"]["skipped"] == []
    if where == "session":  # the lone surrogates became U+FFFD, not dropped silently
        assert "s1\ufffdx\ufffd" in {s["session_id"] for s in payload["sessions"]}

    assert main(["search", "hello", str(path), "--json"]) == 0
    found = orjson.loads(capsysbinary.readouterr().out)
    assert found is not None

    assert main(["tail", str(path), "--json", "--until-idle", "0.2", "--interval", "0.05"]) == 0
    tailed = [orjson.loads(line) for line in capsysbinary.readouterr().out.splitlines() if line.strip()]
    assert tailed

    table = tmp_path / "rows.parquet"
    assert main(["export", str(path), "--out", str(table)]) == 0
    rows = pq.read_table(table).to_pylist()
    assert {"before", "after"} <= {n for r in rows for n in r["node_ids"]}

    graphml = tmp_path / "g.graphml"
    assert main(["export", str(path), "--out", str(graphml), "--format", "graphml"]) == 0
    assert graphml.read_text(encoding="utf-8")


def test_an_audit_of_a_folder_keeps_every_good_file_beside_one_with_surrogate_bytes(tmp_path, capsysbinary):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(3):
        (corpus / f"good{i}.jsonl").write_bytes(jsonl([{**good(f"g{i}", [1, 2], [3]), "session_id": f"s{i}"}]))
    _surrogate_file(corpus / "odd.jsonl", "session")
    out = tmp_path / "audit.parquet"
    assert main(["audit", str(corpus), "--out", str(out), "--workers", "1"]) == 0
    rows = pq.read_table(out).to_pylist()
    assert {Path(r["source_file"]).name for r in rows} == {"good0.jsonl", "good1.jsonl", "good2.jsonl", "odd.jsonl"}
    assert all(r["error"] is None for r in rows), rows


# --- Parquet bombs: refused from the footer, before any page is decoded ------------------------


def _zeros_parquet(path: Path, rows: int) -> Path:
    """A few KB of run-length encoded zeros that decode to ``8 * rows`` bytes."""
    import numpy as np
    import pyarrow as pa

    table = pa.table({"session_id": pa.array(np.zeros(rows, dtype=np.int64)).dictionary_encode()})
    pq.write_table(table, path, compression="zstd")
    return path


def _one_row_long_list(path: Path, values: int) -> Path:
    """One row whose list column holds ``values`` zeros: the row count alone says nothing."""
    import numpy as np
    import pyarrow as pa

    flat = pa.array(np.zeros(values, dtype=np.float64))
    column = pa.ListArray.from_arrays(pa.array([0, values], type=pa.int32()), flat)
    table = pa.table({"session_id": ["s1"], "leaf_id": ["n1"], "trainer_logprobs": column})
    pq.write_table(table, path, compression="zstd")
    return path


def test_a_parquet_of_many_zero_rows_is_refused_from_its_footer(tmp_path):
    from rollout_graph.ingest.files.parquet import read_parquet_bounded
    from rollout_graph.ingest.limits import PUBLIC, LimitExceeded, Limits

    path = _zeros_parquet(tmp_path / "zeros.parquet", 2_000_000)
    assert path.stat().st_size < 200_000
    with pytest.raises(LimitExceeded, match="max_parquet_rows"):
        read_parquet_bounded(path.name, path.read_bytes(), PUBLIC)
    assert read_parquet_bounded(path.name, path.read_bytes(), Limits()).num_rows == 2_000_000


def test_a_parquet_of_one_long_list_is_refused_by_its_declared_size(tmp_path):
    from rollout_graph.ingest.files.parquet import read_parquet_bounded
    from rollout_graph.ingest.limits import LimitExceeded, Limits

    path = _one_row_long_list(tmp_path / "list.parquet", 4_000_000)
    with pytest.raises(LimitExceeded, match="max_parquet_bytes"):
        read_parquet_bounded(path.name, path.read_bytes(), Limits(max_parquet_bytes=16 << 20))


def test_a_corrupt_parquet_is_a_named_error(tmp_path):
    from rollout_graph.ingest.files.parquet import read_parquet_bounded

    with pytest.raises(ValueError, match="not a readable Parquet file"):
        read_parquet_bounded("x.parquet", b"PAR1" + b"\x00" * 100 + b"PAR1")


def test_signals_parquet_and_jsonl_are_read_under_the_limits(tmp_path, capsys, monkeypatch):
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(jsonl([BEFORE, AFTER]))
    bomb = _zeros_parquet(tmp_path / "bomb.signals.parquet", 300_000)
    monkeypatch.setenv("ROLLOUT_GRAPH_PUBLIC", "1")  # what `view --public` sets: the app's limits
    assert main(["inspect", str(trace), "--signals", str(bomb)]) == 2
    err = capsys.readouterr().err
    assert "max_parquet_rows" in err and "Traceback" not in err
    # JSONL signals honour max_line_bytes (the public 64 MB here, lowered by the environment)
    long_line = tmp_path / "long.signals.jsonl"
    row = {"session_id": "s1", "leaf_id": "after", "reward": 1.0, "note": "x" * 5000}
    long_line.write_text(json.dumps(row) + "\n" + json.dumps({**row, "note": "ok"}) + "\n")
    monkeypatch.setenv("ROLLOUT_GRAPH_MAX_LINE_BYTES", "1K")
    from rollout_graph.signals.reading import read_signals

    read = read_signals(long_line)
    assert len(read.rows) == 1 and "max_line_bytes" in read.skipped[0].reason


@pytest.mark.slow
def test_a_ten_million_row_signals_parquet_is_refused_under_a_memory_cap(tmp_path):
    bomb = _zeros_parquet(tmp_path / "bomb.signals.parquet", 10_000_000)
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(jsonl([BEFORE, AFTER]))
    done, peak = capped_run(["inspect", str(trace), "--signals", str(bomb)], 2 << 30)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "max_parquet_rows" in done.stderr and "Traceback" not in done.stderr
    assert peak < 400 << 20, f"peak {peak >> 20} MB"


def capped_run(args: list[str], address_space: int, env: dict | None = None, timeout: float = 300):
    """The CLI in a subprocess under RLIMIT_AS; returns (completed process, peak RSS in bytes)."""
    code = (
        "import resource, sys\n"
        f"resource.setrlimit(resource.RLIMIT_AS, ({address_space}, {address_space}))\n"
        "from rollout_graph.cli import main\n"
        "rc = main(sys.argv[1:])\n"
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1]\n"
        "print('peak_rss_kb=' + hwm, file=sys.stderr)\n"
        "sys.exit(rc)\n"
    )
    import os

    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
    peak = int(done.stderr.rsplit("peak_rss_kb=", 1)[1].split()[0]) * 1024 if "peak_rss_kb=" in done.stderr else 0
    return done, peak


def test_the_corpus_page_refuses_a_parquet_bomb_by_name(tmp_path, monkeypatch):
    from tests.support.apptest import app, no_errors

    folder = tmp_path / "runs"
    folder.mkdir()
    (folder / "t.jsonl").write_bytes(jsonl([BEFORE, AFTER]))
    _zeros_parquet(folder / "audit.parquet", 2_000_000)
    monkeypatch.setenv("ROLLOUT_GRAPH_PUBLIC", "1")
    at = app(monkeypatch, folder)
    at.switch_page("views/screens/corpus.py").run()
    at.radio[0].set_value("Parquet files in the command-line folders").run()
    no_errors(at)
    errors = [e.value for e in at.error]
    assert any("max" in e and "parquet" in e and "rows" in e for e in errors), errors


# --- audit rows say what was skipped ------------------------------------------------------------


def _failed(call_id: str, session: str) -> dict:
    return {
        "call_id": call_id,
        "session_id": session,
        "request": {"model": "m", "messages": [{"role": "user", "content": "x"}]},
        "response": {"error": {"message": "boom"}},
        "error": "upstream HTTP 500",
    }


def test_audit_rows_count_failed_calls_and_keep_sessions_made_only_of_failures(tmp_path):
    from rollout_graph.reports import audit

    records = [{**good(f"ok{i}", [1, 2], [3 + i]), "session_id": "mixed"} for i in range(5)]
    records += [_failed(f"f{i}", "mixed") for i in range(300)]
    records += [_failed(f"g{i}", "only-failures") for i in range(28)]
    path = tmp_path / "calls.jsonl"
    path.write_bytes(jsonl(records) + b"{not json\n")
    rows = {r["session_id"]: r for r in audit.audit_file(str(path))}
    assert set(rows) == {"mixed", "only-failures"}
    assert rows["mixed"]["error"] is None and rows["mixed"]["n_failed_calls"] == 300
    assert rows["only-failures"]["n_failed_calls"] == 28 and "all 28" in rows["only-failures"]["error"]
    for row in rows.values():
        assert row["file_skipped_records"] == 329
        assert row["file_skip_reasons"][0] == "328 x call failed: upstream HTTP 500"
        assert any(r.startswith("1 x not JSON") for r in row["file_skip_reasons"])
    out = tmp_path / "audit.parquet"
    audit.write_parquet(list(rows.values()), out)
    assert pq.read_table(out).column("file_skipped_records").to_pylist() == [329, 329]


def test_an_audit_row_names_a_memory_error(tmp_path, monkeypatch):
    from rollout_graph.reports import audit

    path = tmp_path / "t.jsonl"
    path.write_bytes(jsonl([BEFORE, AFTER]))

    def exhausted(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(audit, "analyse", exhausted)
    [row] = audit.audit_file(str(path))
    assert "MemoryError" in row["error"]


# --- exports: keys, modes, leftovers; the cache after an in-place rewrite -------------------------


def test_graphml_keys_never_collide_across_sessions():
    from rollout_graph.reports.graphml import node_key

    assert node_key("a/b", "c") != node_key("a", "b/c")
    assert node_key("a%2Fb", "c") != node_key("a/b", "c")
    assert node_key("s1", "n1") == "s1/n1"


def test_graphml_of_colliding_names_keeps_every_node(tmp_path, capsys):
    import networkx as nx

    trace = tmp_path / "t.jsonl"
    trace.write_bytes(
        jsonl([{**good("b/c", [1, 2], [3]), "session_id": "a"}, {**good("c", [5, 6], [7]), "session_id": "a/b"}])
    )
    out = tmp_path / "g.graphml"
    assert main(["export", str(trace), "--out", str(out), "--format", "graphml"]) == 0
    graph = nx.read_graphml(out)
    assert graph.number_of_nodes() == 2


def test_exports_get_the_umask_mode_and_clean_what_a_killed_run_left(tmp_path):
    import os

    from rollout_graph.reports.output import atomic_path

    out = tmp_path / "rows.jsonl"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    leftover = tmp_path / f".rows.jsonl.{int(dead.stdout)}.abc123.partial"
    leftover.write_text("half")
    old_unnamed = tmp_path / ".rows.jsonl.xyz.tmp"
    old_unnamed.write_text("half")
    os.utime(old_unnamed, (1, 1))
    mine = tmp_path / f".rows.jsonl.{os.getpid()}.zzz.partial"  # a run still going: kept
    mine.write_text("in progress")
    other = tmp_path / ".other.jsonl.1.partial"
    other.write_text("not ours")
    previous = os.umask(0o027)
    try:
        with atomic_path(out) as tmp:
            tmp.write_text("rows\n")
    finally:
        os.umask(previous)
    assert out.read_text() == "rows\n" and (out.stat().st_mode & 0o777) == 0o640
    assert not leftover.exists() and not old_unnamed.exists() and mine.exists() and other.exists()


def test_the_cache_sees_an_in_place_rewrite_that_keeps_size_and_mtime(tmp_path, capsys, monkeypatch):
    import os

    monkeypatch.setenv("ROLLOUT_GRAPH_CACHE", str(tmp_path / "cache"))
    trace = tmp_path / "t.jsonl"
    first = jsonl([good("before", [1, 2, 3], [4, 5])])
    trace.write_bytes(first)
    stamp = trace.stat()
    assert main(["inspect", str(trace), "--json"]) == 0
    ids = {n["node_id"] for s in orjson.loads(capsys.readouterr().out)["sessions"] for n in s["nodes"]}
    second = jsonl([good("beforX", [1, 2, 3], [4, 5])])
    assert len(second) == len(first)
    with open(trace, "r+b") as f:  # in place: same inode, same size, mtime put back
        f.write(second)
    os.utime(trace, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert main(["inspect", str(trace), "--json"]) == 0
    again = {n["node_id"] for s in orjson.loads(capsys.readouterr().out)["sessions"] for n in s["nodes"]}
    assert ids == {"before"} and again == {"beforX"}


# --- a million small sessions: refused early, pointing at audit -----------------------------------


def _one_call_sessions(path: Path, n: int, compress: bool = False) -> Path:
    """``n`` one-call sessions (about 360 bytes each), written on the fly."""
    record = orjson.dumps({**good("CALLID", [1, 2, 3], [4]), "session_id": "SESSID"})
    with gzip.open(path, "wb", compresslevel=1) if compress else open(path, "wb") as f:
        for start in range(0, n, 10_000):
            block = (
                record.replace(b"CALLID", b"c%d" % i).replace(b"SESSID", b"s%d" % i)
                for i in range(start, min(n, start + 10_000))
            )
            f.write(b"\n".join(block) + b"\n")
    return path


def test_a_file_of_more_rollouts_than_max_sessions_is_refused_early_pointing_at_audit(tmp_path, capsys):
    path = _one_call_sessions(tmp_path / "many.jsonl", 5000)
    assert main(["inspect", str(path), "--json", "--max-sessions", "1000"]) == 0
    load = orjson.loads(capsys.readouterr().out)["load"]
    assert load["records"] == load["loaded"] + len(load["skipped"]) and load["loaded"] < 1000
    reason = load["skipped"][-1]["reason"]
    assert "max_sessions" in reason and "--max-sessions" in reason and "rollout-graph audit" in reason
    assert "projected" in reason


def test_a_compressed_file_is_stopped_at_the_real_count(tmp_path, capsys):
    path = _one_call_sessions(tmp_path / "many.jsonl.gz", 1500, compress=True)
    assert main(["inspect", str(path), "--json", "--max-sessions", "1000"]) == 0
    load = orjson.loads(capsys.readouterr().out)["load"]
    assert 1000 <= load["loaded"] <= 1200 and "max_sessions" in load["skipped"][-1]["reason"]
    assert main(["inspect", str(path), "--json", "--max-sessions", "2000"]) == 0
    assert orjson.loads(capsys.readouterr().out)["load"]["loaded"] == 1500


@pytest.mark.slow
def test_a_million_one_call_sessions_are_refused_early_under_a_2_gb_cap(tmp_path):
    path = _one_call_sessions(tmp_path / "million.jsonl", 1_000_000)
    done, peak = capped_run(["inspect", str(path), "--json"], 2 << 30, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    load = orjson.loads(done.stdout)["load"]
    assert "max_sessions" in load["skipped"][-1]["reason"] and load["loaded"] < 1000
    assert peak < 400 << 20, f"peak {peak >> 20} MB"


# --- the scale corpus under caps (slow): wide forks, many retries, long documents, near-cap lines ---


def _wide_fork(path: Path, n: int) -> Path:
    prompt = list(range(1, 33))
    records = [good("root", prompt, [100, 101])]
    records += [good(f"k{i}", [*prompt, 100, 101, 200 + i], [7]) for i in range(n)]
    path.write_bytes(jsonl(records))
    return path


def _many_retries(path: Path, n: int) -> Path:
    prompt = list(range(1, 33))
    records = [good("root", prompt, [100, 101])]
    records += [good(f"r{i}", [*prompt, 100, 101, 300], [8 + i % 7]) for i in range(n)]
    path.write_bytes(jsonl(records))
    return path


def _near_cap_lines(path: Path, n: int, size: int) -> Path:
    """``n`` records each just under ``size`` bytes (text padding), then one just over."""
    lines = []
    for i in range(n + 1):
        record = good(f"c{i}", [1, 2, 3], [4 + i])
        record["session_id"] = "s1"
        base = len(orjson.dumps(record))
        pad = size - base - (1 if i < n else -64)
        record["request"]["messages"][0]["content"] = "y" * pad
        lines.append(orjson.dumps(record))
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


SCALE = [
    ("wide_fork_2000", lambda p: _wide_fork(p, 2000), [], 2000),
    ("many_retries_2000", lambda p: _many_retries(p, 2000), [], 2000),
    ("near_cap_lines", lambda p: _near_cap_lines(p, 6, 4 << 20), ["--max-line-bytes", "4M"], 6),
]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "write", "flags", "calls"), SCALE, ids=[s[0] for s in SCALE])
def test_the_scale_corpus_loads_under_a_cap(name, write, flags, calls, tmp_path):
    path = write(tmp_path / f"{name}.jsonl")
    done, peak = capped_run(["inspect", str(path), "--json", *flags], 3 << 30, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    load = orjson.loads(done.stdout)["load"]
    assert load["records"] == load["loaded"] + len(load["skipped"])
    assert load["loaded"] >= calls
    if name == "near_cap_lines":
        assert len(load["skipped"]) == 1 and "max_line_bytes" in load["skipped"][0]["reason"]
    assert peak < 1 << 30, f"{name}: peak {peak >> 20} MB"


def test_the_app_draws_the_dag_of_a_trace_with_surrogate_bytes(tmp_path, monkeypatch):
    from tests.support.apptest import app, no_errors

    folder = tmp_path / "odd"
    folder.mkdir()
    _surrogate_file(folder / "odd.jsonl", "session")
    _surrogate_file(folder / "content.jsonl", "content")
    at = app(monkeypatch, folder, session="s1\ufffdx\ufffd")
    no_errors(at)
    assert at.get("plotly_chart"), "no DAG drawn"
    assert not [e.value for e in at.error]


def test_the_parallel_reader_leaves_a_load_that_may_pass_max_sessions_to_the_sequential_one(tmp_path):
    from rollout_graph.ingest.limits import Limits
    from rollout_graph.ingest.load.files import read_files as load_files_parallel
    from rollout_graph.ingest.load.pool import PARALLEL_MIN_BYTES

    record = good("CALLID", [1, 2, 3], [4])
    record["request"]["messages"][0]["content"] = "z" * 10_000  # big enough for the pool
    template = orjson.dumps({**record, "session_id": "SESSID"})
    path = tmp_path / "many.jsonl"
    path.write_bytes(
        b"\n".join(template.replace(b"CALLID", b"c%d" % i).replace(b"SESSID", b"s%d" % i) for i in range(3000)) + b"\n"
    )
    assert path.stat().st_size > PARALLEL_MIN_BYTES
    loaded = load_files_parallel([path], workers=2, limits=Limits(max_sessions=1000))
    assert loaded.loaded < 1000 and "max_sessions" in loaded.skipped[-1].reason


def test_an_upload_named_after_a_server_file_is_never_opened_for_the_projection(tmp_path):
    from rollout_graph.ingest.files.sources import Source
    from rollout_graph.ingest.limits import Limits
    from rollout_graph.ingest.load.calls import load_sources

    big = _one_call_sessions(tmp_path / "server.jsonl", 5000)
    upload = Source.from_bytes(str(big), _one_call_sessions(tmp_path / "small.jsonl", 1200).read_bytes())
    loaded = load_sources([upload], limits=Limits(max_sessions=1000))
    assert 1000 <= loaded.loaded <= 1200  # stopped by the real count, not by the server file's size
    assert "projected" not in loaded.skipped[-1].reason


# --- the capture proxy on a real full disk, and SIGKILLed with a big record queued (slow) ---


@contextlib.contextmanager
def _tmpfs(folder: Path, size: str):
    """A tmpfs of ``size`` mounted at ``folder`` (root only: the test skips when it cannot mount)."""
    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode(errors='replace').strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


@contextlib.contextmanager
def _capture_process(upstream: str, out: Path, err_path: Path):
    """A real ``rollout-graph capture`` process (stderr to ``err_path``); yields (port, process)."""
    from tests.support.fake_upstream import capture_command

    port, command = capture_command(upstream, out)
    with open(err_path, "wb") as err:
        process = subprocess.Popen(command, stderr=err, env={**os.environ, "PYTHONUNBUFFERED": "1"}, cwd=ROOT)
    try:

        def serving() -> bool:
            assert process.poll() is None, "capture exited before it served"
            try:
                httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=1)
            except httpx.HTTPError:
                return False
            return True

        wait_until(serving, timeout=30, what="the capture proxy to start")
        yield port, process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _call(port: int, text: str, timeout: float = 60) -> httpx.Response:
    body = {"model": "m", "messages": [{"role": "user", "content": text}], "max_tokens": 4}
    return httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=timeout)


def _lines(path: Path) -> list[dict]:
    data = path.read_bytes()
    assert data == b"" or data.endswith(b"\n"), "the capture file ends in a half line"
    return [orjson.loads(line) for line in data.splitlines()]


@pytest.mark.slow
def test_capture_on_a_real_full_tmpfs_reports_each_lost_call_keeps_whole_lines_and_recovers(tmp_path):
    from tests.support.fake_upstream import running_upstream

    with _tmpfs(tmp_path / "disk", "1m") as disk, running_upstream() as (url, _):
        out = disk / "captures"
        err_path = tmp_path / "capture.err"
        with _capture_process(url, out, err_path) as (port, process):
            (path,) = out.glob("*.jsonl")
            filler = disk / "filler"
            filler.write_bytes(b"\0" * (600 << 10))  # most of the disk: the captures fill the rest
            word = "w" * 20
            answered = 0

            def settled() -> int | None:
                """Reports once every answered call is a whole line or a report (the writer is behind the answer)."""
                reports = err_path.read_text().count("was not recorded")
                return reports if len(_lines(path)) + reports == answered else None

            for i in range(40):  # ~30 KB a record (the request text, its token ids and the prompt)
                assert _call(port, f"call {i} " + " ".join([word] * 1500)).status_code == 200
                answered += 1
                wait_until(lambda: settled() is not None, timeout=10, what="the call's line or its report")
                if settled():
                    break
            assert settled() == 1, "the disk never filled"
            # reported as it happened: the proxy still runs, the line names the call and the reason
            assert process.poll() is None
            err = err_path.read_text()
            assert "No space left on device" in err and str(path) in err
            before = _lines(path)
            assert len(before) == answered - 1
            # two more calls on the full disk: each reported at once, the file stays whole
            for _ in range(2):
                assert _call(port, "full " + " ".join([word] * 1500)).status_code == 200
            wait_until(
                lambda: err_path.read_text().count("was not recorded") >= 3 or None,
                timeout=10,
                what="a report per lost call",
            )
            assert len(_lines(path)) == len(before)
            # space returns: the next calls land on clean lines
            filler.unlink()
            for i in range(3):
                assert _call(port, f"after {i}").status_code == 200
            wait_until(lambda: len(_lines(path)) == len(before) + 3 or None, timeout=10, what="the calls after")
            process.send_signal(signal.SIGTERM)
            assert process.wait(30) == 1  # calls were lost: the exit status says so
        records = _lines(path)
        as_they_happened, at_exit = err_path.read_text().split("stopped; ")
        lost = as_they_happened.count("was not recorded")
        assert "was not recorded" in at_exit  # the exit summary repeats them
        assert lost == 3 and len(records) == answered + 2 + 3 - lost
        assert [r["request"]["messages"][0]["content"] for r in records[-3:]] == [f"after {i}" for i in range(3)]
        assert at_exit.startswith(f"{len(records)} call(s) recorded")


@pytest.mark.slow
def test_a_sigkilled_proxy_keeps_the_calls_that_completed_beside_a_big_record(tmp_path):
    """Small calls all the time, one 40 MB call, and a SIGKILL the moment the big call is answered
    (its ~100 MB record is queued or being written then): the small calls answered before the kill
    are on disk but for a bounded few, the ones answered while that one record was written
    (docs/limits.md)."""
    from tests.support.fake_upstream import running_upstream

    with running_upstream() as (url, _):
        out = tmp_path / "captures"
        err_path = tmp_path / "capture.err"
        with _capture_process(url, out, err_path) as (port, process):
            (path,) = out.glob("*.jsonl")
            answered: list[int] = []
            stop = threading.Event()

            def small_calls() -> None:
                i = 0
                while not stop.is_set():
                    try:
                        if _call(port, f"small {i}", timeout=10).status_code == 200 and not stop.is_set():
                            answered.append(i)
                    except httpx.HTTPError:
                        return
                    i += 1

            thread = threading.Thread(target=small_calls)
            thread.start()
            wait_until(lambda: len(answered) >= 5 or None, timeout=20, what="small calls")
            big = _call(port, " ".join(["big"] * (10 << 20)), timeout=120)
            stop.set()
            process.send_signal(signal.SIGKILL)
            process.wait(10)
            thread.join(30)
            assert big.status_code == 200
        data = path.read_bytes()
        whole, _, torn = data.rpartition(b"\n")  # a SIGKILL mid-write can leave the last line torn
        records = [orjson.loads(line) for line in whole.splitlines()]
        loaded = load_paths([path])
        assert loaded.loaded == len(records)
        if torn:  # the reader reports it as an unfinished last line, never as a loaded call
            assert [p.line for p in loaded.pending] == [len(records) + 1], (loaded.pending, loaded.skipped)
    contents = {r["request"]["messages"][0]["content"] for r in records}
    lost = [i for i in answered if f"small {i}" not in contents]
    big_kept = any(c.startswith("big big") for c in contents)
    print(
        f"answered {len(answered)} small calls before the kill; lost {lost}; the big record kept: {big_kept}; "
        f"torn last line: {len(torn):,} bytes"
    )
    assert len(answered) >= 5
    # bounded: only the last few answered (queued behind the big record's one write) can be lost
    assert len(lost) <= 3 and all(i >= answered[-1] - 3 for i in lost), lost


# --- audit streams a file of more rollouts than max_sessions ---


def _mixed_sessions(path: Path, n: int) -> Path:
    """``n`` rollouts: most one call, every tenth two calls whose second call comes 5 rollouts later
    (interleaved), every fiftieth with a failed call too."""
    lines = []
    for i in range(n):
        lines.append({**good(f"a{i}", [1, 2, 3], [4, 5]), "session_id": f"s{i}"})
        if i % 10 == 0 and i >= 5:
            lines.append({**good(f"b{i - 5}", [1, 2, 3, 4, 5, 6], [7]), "session_id": f"s{i - 5}"})
        if i % 50 == 0:
            lines.append(_failed(f"f{i}", f"s{i}"))
    path.write_bytes(jsonl(lines))
    return path


def test_audit_streams_a_file_of_more_rollouts_than_max_sessions_with_the_rows_of_a_whole_load(tmp_path):
    from rollout_graph.ingest.limits import Limits
    from rollout_graph.reports import audit

    path = str(_mixed_sessions(tmp_path / "many.jsonl", 3000))
    whole = audit.audit_file(path, Limits(max_sessions=1_000_000))
    streamed = audit.audit_file(path, Limits(max_sessions=100))
    assert len(whole) == 3000 and not any(r["error"] for r in whole)
    assert sorted(streamed, key=lambda r: r["session_id"]) == sorted(whole, key=lambda r: r["session_id"])
    assert {r["n_turns"] for r in whole} == {1, 2} and sum(r["n_failed_calls"] for r in whole) == 60
    assert whole[0]["file_skipped_records"] == 60


def test_a_streamed_audit_stops_a_file_whose_rollouts_stay_open_past_max_sessions(tmp_path):
    from rollout_graph.ingest.limits import Limits
    from rollout_graph.reports import audit

    records = [{**good(f"a{i}", [1, 2, 3], [4]), "session_id": f"s{i}"} for i in range(400)]
    records += [{**good(f"b{i}", [1, 2, 3, 4, 9], [5]), "session_id": f"s{i}"} for i in range(400)]
    path = tmp_path / "open.jsonl"
    path.write_bytes(jsonl(records))
    rows = audit.audit_file(str(path), Limits(max_sessions=100))
    reasons = rows[0]["file_skip_reasons"]
    assert any("open at once" in r and "max_sessions" in r for r in reasons), reasons
