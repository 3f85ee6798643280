"""``inspect --reconcile`` (JSON and text) and ``export --as`` as a user runs them (docs/cli.md),
and the audit's per-framework columns."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rollout_graph.reports.reconcile import AUDIT_COLUMNS

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
CLAUDE = SAMPLES / "harnesses" / "claude-code-continue.jsonl.gz"


def run(*args):
    return subprocess.run([sys.executable, "-m", "rollout_graph", *args], capture_output=True, text=True)


def test_inspect_json_has_a_reconcile_object_per_session():
    out = run("inspect", str(CLAUDE), "--json", "--reconcile", "trl,nemo-gym:builder=per_request,openenv", "--no-cache")
    assert out.returncode == 0, out.stderr
    (session,) = json.loads(out.stdout)["sessions"]
    found = session["reconcile"]
    assert list(found) == ["trl", "nemo-gym", "openenv"]
    trl = found["trl"]
    assert trl["params"] == {"fork_threshold_tokens": 1024, "source": "calls"}
    assert trl["summary"]["n_dropped_tokens"] == 5 and trl["summary"]["delivered_fraction"] == 0.9479
    assert {"row_id", "label", "trained", "why_not", "node_ids", "length", "n_trained", "provenance"} <= set(
        trl["rows"][0]
    )
    assert "input_ids" not in trl["rows"][0]  # --tokens fills them
    assert len(trl["calls"]) == len(session["nodes"])
    assert any("re-tokenizes" in d["sentence"] for d in trl["differences"])
    assert found["nemo-gym"]["params"] == {"builder": "per_request"}
    assert found["nemo-gym"]["notes"]["builder"] == "per_request"
    openenv = found["openenv"]
    assert [r["label"] for r in openenv["rows"]] == [s["role"] for s in session["sequences"]]


def test_inspect_json_tokens_fill_the_rows():
    out = run("inspect", str(CLAUDE), "--json", "--tokens", "--reconcile", "verifiers", "--no-cache")
    row = json.loads(out.stdout)["sessions"][0]["reconcile"]["verifiers"]["rows"][0]
    assert len(row["input_ids"]) == len(row["loss_mask"]) == len(row["token_provenance"]) == row["length"]
    assert sum(row["loss_mask"]) == row["n_masked"]


def test_inspect_text_prints_a_line_per_framework_and_the_sentences():
    out = run("inspect", str(CLAUDE), "--reconcile", "all", "--no-cache")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "what the trainers train" in text
    for name in ("TRL", "NeMo Gym", "verifiers", "OpenEnv", "NeMo-RL"):
        assert f"    {name}" in text
    assert "TRL realigns" in text and "NeMo Gym masks the whole sample" in text


def test_a_bad_spec_is_exit_2_naming_the_known_ones():
    out = run("inspect", str(CLAUDE), "--reconcile", "trl:fork=1", "--no-cache")
    assert out.returncode == 2 and "known: fork_threshold_tokens, source" in out.stderr
    out = run("inspect", str(CLAUDE), "--reconcile", "slime", "--no-cache")
    assert out.returncode == 2 and "unknown framework 'slime'" in out.stderr


def test_export_as_writes_the_framework_rows(tmp_path):
    out = run(
        "export", str(CLAUDE), "--as", "trl:fork_threshold_tokens=0", "--out", str(tmp_path / "trl.jsonl"), "--no-cache"
    )
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in (tmp_path / "trl.jsonl").read_text().splitlines()]
    assert [r["row_id"] for r in rows] == ["row-0", "row-1", "row-2"]  # forked at each drift
    assert all(r["framework"] == "trl" and r["trained"] for r in rows)
    out = run("export", str(CLAUDE), "--as", "openenv", "--out", str(tmp_path / "o.parquet"), "--no-cache")
    table = pq.read_table(tmp_path / "o.parquet").to_pylist()
    assert [r["label"] for r in table] == ["agent", "discarded", "agent"]
    assert [r["trained"] for r in table] == [True, False, True]
    out = run("export", str(CLAUDE), "--as", "trl", "--format", "trace-entries", "--out", str(tmp_path / "x.jsonl"))
    assert out.returncode == 2 and "--as writes that trainer's rows" in out.stderr


def test_audit_has_the_columns_per_framework(tmp_path):
    out = run("audit", str(CLAUDE), "--out", str(tmp_path / "a.parquet"), "--workers", "1")
    assert out.returncode == 0, out.stderr
    (row,) = pq.read_table(tmp_path / "a.parquet").to_pylist()
    assert set(AUDIT_COLUMNS) <= set(row)
    assert row["trl_delivered_fraction"] == 0.9479 and row["trl_off_policy_tokens"] == 0
    assert row["nemo_rl_off_policy_tokens"] == 48  # the bundled tokenizer gives NeMo-RL its EOS id


def test_the_lens_uses_no_retired_word():
    from tests.ui.test_daily_loop import retired_words

    out = run("inspect", str(SAMPLES), "--reconcile", "all", "--no-cache")
    assert out.returncode == 0, out.stderr
    assert retired_words(out.stdout) == []
    assert retired_words(run("export", "--help").stdout + run("inspect", "--help").stdout) == []


def test_run_json_has_the_columns_per_framework_per_step(tmp_path):
    """`rollout-graph run --json`: per step, each framework's mean delivered fraction and its
    off-policy tokens summed, the same as the lens on that step's rollouts."""
    import rollout_graph as rg
    from rollout_graph.reports.reconcile import audit_figures
    from tools import make_run

    assert make_run.main([str(tmp_path / "run"), "--steps", "2", "--rollouts", "3", "--ranks", "1"]) == 0
    out = run("run", str(tmp_path / "run"), "--json", "--no-cache", "--workers", "1")
    assert out.returncode == 0, out.stderr
    steps = json.loads(out.stdout)["steps"]
    assert [s["step"] for s in steps] == [1, 2]
    for step in steps:
        path = tmp_path / "run" / "token_exports" / f"step_{step['step']}" / "rank_0.jsonl"
        figures = [audit_figures(r, str(path)) for r in rg.load(path).values()]
        assert len(figures) == step["n_rollouts"] == 3
        for col in AUDIT_COLUMNS:
            values = [f[col] for f in figures if f[col] is not None]
            if col.endswith("_fraction"):
                expected = sum(values) / len(values) if values else None
                assert step[col] == (None if expected is None else pytest.approx(expected)), col
            else:
                assert step[col] == (sum(values) if values else None), col
