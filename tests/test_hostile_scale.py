"""Issue 28: odd bytes through every verb, documents that expand, and loads under caps.

The fast cases run in the default suite; the scale cases (a million small sessions, wide forks,
many retries, long documents, near-cap lines) are ``slow`` and run in a subprocess whose address
space is capped with ``resource.setrlimit(RLIMIT_AS)``, reporting their peak resident memory.
"""

from __future__ import annotations

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
