"""Exports: labelled training rows and TRL/OpenEnv trace entries, JSONL or Parquet, CLI and app."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

from rollout_graph.ingest.load.files import load_paths
from rollout_graph.pipeline import analyse
from rollout_graph.reports import export

VLLM = Path(__file__).resolve().parents[2] / "sample_traces" / "vllm"


def main_rollout():
    return analyse(load_paths([VLLM]).sessions["fix-config-bug"])


def test_rows_are_every_sequence_labelled_and_match_the_tokens():
    rollout = main_rollout()
    rows = export.training_rows(rollout)
    assert len(rows) == len(rollout.sequences)
    assert sorted({r["role"] for r in rows}) == ["agent", "auxiliary", "discarded"]
    for row, seq in zip(rows, rollout.sequences, strict=True):
        tokens = rollout.tokens(seq)
        assert row["input_ids"] == tokens.input_ids.tolist() and row["loss_mask"] == tokens.loss_mask.tolist()
        assert sum(row["loss_mask"]) == row["n_trainable"] == seq.n_trainable
        assert row["root_id"] == row["node_ids"][0] and row["leaf_id"] == row["node_ids"][-1]
    discarded = next(r for r in rows if r["role"] == "discarded")
    assert any(f["code"] == "discarded_turns" for f in discarded["findings"])
    assert [r["role"] for r in export.training_rows(rollout, ("agent",))] == ["agent"] * 3


def test_trace_entries_round_trip_through_the_loader(tmp_path):
    rollout = main_rollout()
    entries = export.trace_entries(rollout)
    assert len(entries) == sum(1 for role in rollout.node_roles if role == "agent")
    out = tmp_path / "entries.jsonl"
    export.write_records(entries, out)
    again = load_paths([out]).sessions["fix-config-bug"]
    original = {c.node_id: c for c in rollout.calls}
    for call in again.calls:
        assert call.shape == "trace-entry"
        assert call.prompt_ids.tolist() == original[call.node_id].prompt_ids.tolist()
        assert call.sampled_ids.tolist() == original[call.node_id].sampled_ids.tolist()


def test_cli_export_jsonl_parquet_and_bad_roles(tmp_path):
    def run(*args):
        return subprocess.run(
            [sys.executable, "-m", "rollout_graph", "export", str(VLLM), *args], capture_output=True, text=True
        )

    assert run("--out", str(tmp_path / "rows.jsonl")).returncode == 0
    rows = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    assert len(rows) == 11 + 10  # both sessions, every row
    assert run("--out", str(tmp_path / "rows.parquet"), "--roles", "agent", "--session", "list-todos").returncode == 0
    table = pq.read_table(tmp_path / "rows.parquet").to_pylist()
    assert {r["role"] for r in table} == {"agent"} and {r["session_id"] for r in table} == {"list-todos"}
    bad = run("--out", str(tmp_path / "x.jsonl"), "--roles", "agent,teacher")
    assert bad.returncode == 2 and "unknown roles teacher" in bad.stderr


def test_app_offers_downloads(monkeypatch):
    from tests.support.apptest import app, no_errors

    at = app(monkeypatch)
    no_errors(at)
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels == ["⬇ Training rows (JSONL)", "⬇ Trace entries (JSONL)", "⬇ Download this view as HTML"]
