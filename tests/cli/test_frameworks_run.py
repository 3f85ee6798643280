"""The Run view's library and command line: per-rollout rows from the audit engine (cached), steps
aggregated from them, ``rollout-graph run`` text, ``--json`` and ``--step`` (docs/cli.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rollout_graph.cli import main
from rollout_graph.reports.run import rollout_rows, run_summary, step_rollouts, step_table
from tools import make_run

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "frameworks"


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("ROLLOUT_GRAPH_CACHE", str(folder))
    return folder


@pytest.fixture
def small_run(tmp_path):
    out = tmp_path / "run"
    assert make_run.main([str(out), "--steps", "6", "--rollouts", "8", "--ranks", "2"]) == 0
    return out


def test_rows_are_computed_once_then_read_from_the_cache(small_run, cache_dir):
    rows, cached = rollout_rows([str(small_run)], workers=2)
    assert not cached and len(rows) == 48
    again, cached = rollout_rows([str(small_run)])
    assert cached and again == rows
    assert list(cache_dir.glob("run-*.parquet"))
    # a new step invalidates it
    (small_run / "token_exports" / "step_7").mkdir()
    (small_run / "token_exports" / "step_7" / "rank_0.jsonl").write_text(
        (small_run / "token_exports" / "step_6" / "rank_0.jsonl").read_text().replace('"step":6', '"step":7')
    )
    rows, cached = rollout_rows([str(small_run)])
    assert not cached and len(rows) == 52 and {r["step"] for r in rows} == set(range(1, 8))


def test_steps_aggregate_the_rollouts_of_each_step(small_run, cache_dir):
    rows, _ = rollout_rows([str(small_run)])
    steps = step_table(rows)
    assert [s["step"] for s in steps] == list(range(1, 7))
    for s in steps:
        mine = [r for r in rows if r["step"] == s["step"]]
        assert s["n_rollouts"] == 8 and s["n_calls"] == sum(r["n_turns"] for r in mine)
        assert s["reward_mean"] == pytest.approx(sum(r["reward"] for r in mine) / 8)
        assert s["n_fatal"] == sum(r["n_fatal"] for r in mine)
        assert s["fidelity"] == "sequences" and s["discard_rate"] == 0.0
        assert s["mean_abs_diff"] is not None and s["kl_k3"] is not None
    worst = step_rollouts(rows, 3)
    assert len(worst) == 8 and worst[0]["n_fatal"] >= worst[-1]["n_fatal"]


def test_every_framework_fixture_lands_on_its_step(cache_dir):
    rows, _ = rollout_rows([str(FIXTURES)])
    summary = run_summary(rows)
    assert [s["step"] for s in summary["steps"]] == [0, 1, 2, 3, 4, 5]
    assert summary["n_rollouts_without_step"] == 1  # the OpenTelemetry conversation names no step
    assert {"prime-rl token export", "verifiers trace", "NeMo-RL train data", "TRL completions"} <= set(
        summary["formats"]
    )
    assert any("never unpickled" in e["error"] for e in summary["file_errors"])


def test_run_command_text_json_and_step(small_run, cache_dir, capsys):
    assert main(["run", str(small_run), "--workers", "1"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("6 steps · 48 rollouts") and "sequences" in text
    assert main(["run", str(small_run), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["n_steps"] == 6 and payload["from_cache"] is True
    assert set(payload["steps"][0]) >= {"step", "n_rollouts", "reward_mean", "discard_rate", "break_rate", "kl_k3"}
    assert main(["run", str(small_run), "--step", "2", "--json"]) == 0
    step = json.loads(capsys.readouterr().out)
    assert step["step"] == 2 and len(step["rollouts"]) == 8
    assert main(["run", str(small_run), "--step", "99"]) == 2
    assert "no rollouts at step 99 (steps: 1, 2, 3, 4, 5, 6)" in capsys.readouterr().err


def test_run_command_on_a_missing_folder_says_so(capsys):
    assert main(["run", "/nonexistent/run"]) == 2
    assert "no such file or directory" in capsys.readouterr().err


def test_a_run_folder_is_recognised_without_opening_a_file(small_run, tmp_path):
    from rollout_graph.reports.run import RUN_MIN_FILES, looks_like_run

    assert not looks_like_run([str(small_run)])  # 12 files: below RUN_MIN_FILES
    big = tmp_path / "big"
    assert make_run.main([str(big), "--steps", str(RUN_MIN_FILES), "--rollouts", "1", "--ranks", "1"]) == 0
    assert looks_like_run([str(big)])
    assert not looks_like_run([str(FIXTURES / "verl")]) and not looks_like_run(["/nonexistent"])
