"""Issue 28: odd bytes through every verb, documents that expand, and loads under caps.

The fast cases run in the default suite; the scale cases (a million small sessions, wide forks,
many retries, long documents, near-cap lines) are ``slow`` and run in a subprocess whose address
space is capped with ``resource.setrlimit(RLIMIT_AS)``, reporting their peak resident memory.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest

from rollout_graph.cli import main
from tests.builders import jsonl
from tests.hostile import AFTER, BEFORE, _raw_surrogates, good

ROOT = Path(__file__).resolve().parent.parent


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
    from rollout_graph.ingest.limits import PUBLIC, LimitExceeded, Limits
    from rollout_graph.ingest.reading import read_parquet_bounded

    path = _zeros_parquet(tmp_path / "zeros.parquet", 2_000_000)
    assert path.stat().st_size < 200_000
    with pytest.raises(LimitExceeded, match="max_parquet_rows"):
        read_parquet_bounded(path.name, path.read_bytes(), PUBLIC)
    assert read_parquet_bounded(path.name, path.read_bytes(), Limits()).num_rows == 2_000_000


def test_a_parquet_of_one_long_list_is_refused_by_its_declared_size(tmp_path):
    from rollout_graph.ingest.limits import LimitExceeded, Limits
    from rollout_graph.ingest.reading import read_parquet_bounded

    path = _one_row_long_list(tmp_path / "list.parquet", 4_000_000)
    with pytest.raises(LimitExceeded, match="max_parquet_bytes"):
        read_parquet_bounded(path.name, path.read_bytes(), Limits(max_parquet_bytes=16 << 20))


def test_a_corrupt_parquet_is_a_named_error(tmp_path):
    from rollout_graph.ingest.reading import read_parquet_bounded

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
    from tests.apptest import app, no_errors

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
