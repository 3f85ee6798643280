"""Corpus audit: one row per rollout, unreadable files as error rows, the same rows from every engine."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rollout_graph.ingest.load.files import load_paths
from rollout_graph.pipeline import analyse
from rollout_graph.reports import audit
from tests.support.builders import TOOLS, Turn, jsonl, vllm_chat, write

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    (root / "nested").mkdir()
    (root / "nested" / "main.jsonl").write_bytes((SAMPLES / "vllm" / "agent-rollouts.jsonl").read_bytes())
    (root / "doc.json").write_bytes((SAMPLES / "openenv" / "fix-config-bug.json").read_bytes())
    small = [
        vllm_chat(Turn("a", [1, 2], [3], tools=TOOLS, session="tiny")),
        vllm_chat(Turn("b", [1, 2, 3, 4], [5], tools=TOOLS, session="tiny")),
    ]
    (root / "tiny.jsonl.gz").write_bytes(gzip.compress(jsonl(small)))
    (root / "broken.jsonl").write_text("not json\n")
    return root


def test_rows_match_the_analysis(corpus):
    rows = audit.audit_file(str(corpus / "nested" / "main.jsonl"))
    rollout = analyse(load_paths([corpus / "nested" / "main.jsonl"]).sessions["fix-config-bug"])
    row = next(r for r in rows if r["session_id"] == "fix-config-bug")
    assert {k: row[k] for k in ("n_turns", "n_roots", "n_leaves", "n_forks", "n_discarded", "n_sequences")} == {
        k: rollout.stats[k] for k in ("n_turns", "n_roots", "n_leaves", "n_forks", "n_discarded", "n_sequences")
    }
    assert row["rows_agent"] + row["rows_auxiliary"] + row["rows_discarded"] == row["n_sequences"]
    assert row["n_trainable_tokens"] == 3230 and row["discarded_sampled_tokens"] > 0
    assert row["models"] == ["HuggingFaceTB/SmolLM2-135M-Instruct"] and row["harness"] == "scripted-agent/0.1"
    assert "discarded_turns" in row["finding_codes"] and row["n_fatal"] == 0
    assert row["min_trainable_logprob"] <= row["mean_trainable_logprob"] < 0
    assert set(row) == set(audit.COLUMNS)


def test_unreadable_files_become_error_rows(corpus, tmp_path):
    assert audit.audit_file(str(corpus / "broken.jsonl"))[0]["error"] == "no rollouts (1 records skipped)"
    missing = audit.audit_file(str(tmp_path / "missing.jsonl"))[0]
    assert missing["error"].startswith("cannot read file") and missing["session_id"] is None


def test_inputs_are_files_directories_and_globs(corpus):
    everything = audit.expand_inputs([str(corpus)])
    assert sorted(p.name for p in everything) == ["broken.jsonl", "doc.json", "main.jsonl", "tiny.jsonl.gz"]
    assert [p.name for p in audit.expand_inputs([str(corpus / "**" / "*.jsonl"), str(corpus / "nested")])] == [
        "broken.jsonl",
        "main.jsonl",
    ]


def test_engines_write_the_same_rows(corpus):
    files = audit.expand_inputs([str(corpus)])
    one = audit.run_local(files, workers=1)
    two = audit.run_local(files, workers=2)
    assert one == two and len(one) == 5
    pytest.importorskip("ray")
    assert audit.run_ray(files, workers=2) == one


def test_cli_writes_parquet_with_a_progress_bar(corpus, tmp_path):
    out = tmp_path / "audit.parquet"
    done = subprocess.run(
        [sys.executable, "-m", "rollout_graph", "audit", str(corpus), "--out", str(out), "--workers", "2"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert (
        "4/4 files" in done.stderr
        and "5 rollouts from 4 files" in done.stderr
        and "(1 files could not be read)" in done.stderr
    )
    table = pq.read_table(out)
    assert table.column_names == list(audit.COLUMNS)
    rows = table.to_pylist()
    assert sorted(r["session_id"] or "" for r in rows) == [
        "",
        "fix-config-bug",
        "fix-config-bug.openenv",
        "list-todos",
        "tiny",
    ]
    tiny = next(r for r in rows if r["session_id"] == "tiny")
    assert tiny["n_turns"] == 2 and tiny["finding_codes"] == [] and tiny["models"] == ["m"]


def test_cli_without_inputs_exits_2(tmp_path):
    write(tmp_path / "notes.txt", [])
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "rollout_graph",
            "audit",
            str(tmp_path / "*.jsonl"),
            "--out",
            str(tmp_path / "a.parquet"),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "no trace files" in done.stderr


def test_filters_are_pure_and_combine(corpus):
    import pandas as pd

    from rollout_graph.ui.panels.corpus import filter_rows

    frame = pd.DataFrame(audit.run_local(audit.expand_inputs([str(corpus)]), workers=1), columns=list(audit.COLUMNS))
    everything = (0, 10**9)
    assert len(filter_rows(frame, [], [], [], False, everything)) == 5
    assert set(filter_rows(frame, ["scripted-agent/0.1"], [], [], False, everything)["session_id"]) == {
        "fix-config-bug",
        "list-todos",
    }
    assert set(filter_rows(frame, [], ["m"], [], False, everything)["session_id"]) == {"tiny"}
    assert set(filter_rows(frame, [], [], ["sampling_changed"], True, everything)["session_id"]) == {
        "fix-config-bug",
        "fix-config-bug.openenv",  # OpenEnv's document records each call's sampling params too
        "list-todos",
    }
    assert set(filter_rows(frame, [], [], [], False, (3000, 4000))["session_id"]) == {
        "fix-config-bug",
        "fix-config-bug.openenv",
    }


def test_corpus_page_audits_the_bundled_samples(monkeypatch):
    from streamlit.testing.v1 import AppTest

    from tests.support.apptest import no_errors

    monkeypatch.setattr(sys, "argv", ["app.py"])
    at = AppTest.from_file(str(Path(__file__).resolve().parents[2] / "app.py"), default_timeout=120).run()
    at.switch_page("views/screens/corpus.py").run()
    no_errors(at)
    harnesses = len(list((Path(__file__).resolve().parents[2] / "sample_traces" / "harnesses").glob("*.jsonl.gz")))
    assert f"Corpus audit: {4 + harnesses} rollouts from {3 + harnesses} files" in at.markdown[0].value
    assert at.dataframe[0].value.shape[0] == 4 + harnesses
    at.multiselect[2].select("sampling_changed").run()
    assert sorted(at.dataframe[0].value["session_id"]) == [
        "fix-config-bug",
        "fix-config-bug.eval",
        "fix-config-bug.openenv",  # OpenEnv's document records each call's sampling params too
        "list-todos",
    ]
