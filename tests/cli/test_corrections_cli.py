"""`--correction` through the real CLI: `inspect --json` checked against counts computed here,
independently, from the bundled signals file and the exported rows; `export` writes the weights a
trainer uses; `audit` and `compare` carry the columns; bad specs are one clear line."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rollout_graph.cli.view import add_parser as add_view
from tests.support.reference import reference_correction

ROOT = Path(__file__).resolve().parents[2]
VLLM = ROOT / "sample_traces" / "vllm"
BUNDLED = ROOT / "sample_traces" / "signals" / "samples.signals.jsonl"
SPECS = ["token_tis:cap=1.2", "token_mask:low=0.8,high=1.25", "seq_tis", "seq_mask:high=3", "geo_mask"]
PARAMS = {
    "token_tis:cap=1.2": ("token_tis", {"cap": 1.2}),
    "token_mask:low=0.8,high=1.25": ("token_mask", {"low": 0.8, "high": 1.25}),
    "seq_tis:cap=2": ("seq_tis", {"cap": 2.0}),
    "seq_mask:low=0,high=3": ("seq_mask", {"low": 0.0, "high": 3.0}),
    "geo_mask:low=0.999,high=1.001": ("geo_mask", {"low": 0.999, "high": 1.001}),
}

pytestmark = pytest.mark.slow


def run(*args):
    return subprocess.run([sys.executable, "-m", "rollout_graph", *map(str, args)], capture_output=True, text=True)


def flags():
    return [x for s in SPECS for x in ("--correction", s)]


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> list[dict]:
    out = tmp_path_factory.mktemp("rows") / "rows.jsonl"
    done = run("export", VLLM, "--signals", BUNDLED, *flags(), "--out", out)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in out.read_text().splitlines()]


def independent_d(rows: list[dict]) -> dict[str, list[list[float | None]]]:
    """Per session, each joined row's d at its loss-mask-1 positions, from the signals file itself."""
    signals = {}
    for line in BUNDLED.read_text().splitlines():
        s = json.loads(line)
        signals[(s["session_id"], s["leaf_id"])] = s
    out: dict[str, list[list[float | None]]] = defaultdict(list)
    for r in rows:
        s = signals.get((r["session_id"], r["leaf_id"]))
        if s is None or s.get("trainer_logprobs") is None:
            continue
        d = []
        for m, inference, trainer in zip(r["loss_mask"], r["logprobs"], s["trainer_logprobs"], strict=True):
            if m == 1:
                d.append(None if trainer is None or inference is None else trainer - inference)
        out[r["session_id"]].append(d)
    return out


def test_inspect_json_matches_counts_computed_from_the_signals_file(exported):
    done = run("inspect", VLLM, "--signals", BUNDLED, *flags(), "--json")
    assert done.returncode == 0, done.stderr
    sessions = {s["session_id"]: s for s in json.loads(done.stdout)["sessions"]}
    by_session = independent_d(exported)
    assert by_session  # the bundled signals cover the vllm samples
    for session_id, rows in by_session.items():
        signals = sessions[session_id]["signals"]
        got = {e["label"]: e for e in signals["corrections"]}
        assert list(got) == list(PARAMS)
        for label, (name, params) in PARAMS.items():
            want = reference_correction(name, params, rows)
            e = got[label]
            assert e["name"] == name and e["params"] == params
            for key in ("n_tokens", "n_sequences", "tokens_affected", "sequences_affected"):
                assert e[key] == want[key], (session_id, label, key)
            for key in ("share_tokens", "weight_lost", "ess"):
                if want[key] is None:  # geo_mask masks every row of list-todos: no ESS
                    assert e[key] is None, (session_id, label, key)
                else:
                    assert e[key] == pytest.approx(want[key], rel=1e-9, abs=1e-12), (session_id, label, key)
        flat = [x for r in rows for x in r if x is not None]
        assert signals["k1"] == pytest.approx(-sum(flat) / len(flat), rel=1e-9, abs=1e-12)
        assert signals["k2"] == pytest.approx(sum(x * x / 2 for x in flat) / len(flat), rel=1e-9)
        assert signals["k3"] == pytest.approx(sum(math.exp(x) - 1 - x for x in flat) / len(flat), rel=1e-9)
        ratios = [math.exp(x) for x in flat]
        assert signals["ess"] == pytest.approx(sum(ratios) ** 2 / (len(flat) * sum(r * r for r in ratios)))
        worst = signals["worst_tokens"]
        assert abs(worst[0]["d"]) == pytest.approx(max(abs(x) for x in flat))
        assert [abs(w["d"]) for w in worst] == sorted((abs(w["d"]) for w in worst), reverse=True)
    # the text report has a line per correction
    text = run("inspect", VLLM, "--signals", BUNDLED, "--correction", "token_mask:low=0.8,high=1.25")
    assert text.returncode == 0 and "correction token_mask:low=0.8,high=1.25: " in text.stdout


def test_export_writes_the_weights_inspect_counted(exported):
    for r in exported:
        assert r["correction_labels"] == list(PARAMS)
        if r["trainer_logprobs"] is None:
            assert r["correction_weights"] == [None] * len(PARAMS)
            continue
        for weights in r["correction_weights"]:
            assert len(weights) == len(r["input_ids"])
            for w, m, t in zip(weights, r["loss_mask"], r["trainer_logprobs"], strict=True):
                assert (w is None) == (m == 0 or t is None)
        # token_mask: a weight is 0 exactly where the ratio is outside the band
        mask = r["correction_weights"][1]
        for w, t, lp in zip(mask, r["trainer_logprobs"], r["logprobs"], strict=True):
            if w is not None:
                ratio = math.exp(t - lp)
                assert (w == 0.0) == (ratio < 0.8 or ratio > 1.25)
                assert w == 0.0 or w == pytest.approx(ratio)


def test_audit_and_compare_carry_the_corrections(tmp_path):
    out = tmp_path / "audit.parquet"
    done = run("audit", VLLM, "--signals", BUNDLED, *flags(), "--workers", "1", "--out", out)
    assert done.returncode == 0, done.stderr
    rows = {r["session_id"]: r for r in pq.read_table(out).to_pylist()}
    fix = rows["fix-config-bug"]
    assert [e["label"] for e in fix["corrections"]] == list(PARAMS)
    assert fix["worst_abs_diff"] == pytest.approx(abs(fix["worst_tokens"][0]["d"]))
    assert fix["kl_k1"] is not None and fix["ratio_ess"] is not None
    plain = tmp_path / "plain.parquet"
    assert run("audit", VLLM, "--signals", BUNDLED, "--workers", "1", "--out", plain).returncode == 0
    assert all(r["corrections"] is None for r in pq.read_table(plain).to_pylist())
    cmp = run("compare", VLLM, VLLM, "--signals", BUNDLED, "--correction", "token_mask", "--json")
    assert cmp.returncode == 0, cmp.stderr
    side = json.loads(cmp.stdout)["a"]["signals"]
    assert [e["label"] for e in side["corrections"]] == ["token_mask:low=0.5,high=5"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--correction", "bogus"], "unknown correction 'bogus'"),
        (["--correction", "token_tis:cup=1"], "token_tis has no parameter 'cup'"),
        (["--correction", "geo_mask:low=2,high=1"], "low 2 is above high 1"),
        (["--correction", "token_tis"], "--correction needs trainer logprobs"),  # no --signals
    ],
)
def test_a_bad_correction_is_one_clear_line(args, message):
    done = run("inspect", VLLM, *args)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr


def test_view_passes_the_corrections_to_the_app():
    import argparse

    parser = argparse.ArgumentParser()
    add_view(parser.add_subparsers())
    args = parser.parse_args(["view", "--correction", "token_tis:cap=3", "--correction", "geo_mask"])
    assert [c.label for c in args.correction] == ["token_tis:cap=3", "geo_mask:low=0.999,high=1.001"]


def test_corrections_apply_to_trainer_columns_a_trace_carries(tmp_path):
    """A prime-rl token export carries trainer and inference logprobs itself: no --signals needed."""
    folder = ROOT / "tests" / "fixtures" / "frameworks" / "prime-rl"
    done = run(
        "inspect", folder, "--correction", "token_mask:low=0.9,high=1.1", "--correction", "seq_tis:cap=1", "--json"
    )
    assert done.returncode == 0, done.stderr
    sessions = {s["session_id"]: s for s in json.loads(done.stdout)["sessions"]}
    line = json.loads((folder / "token_exports/step_2/rank_1.jsonl").read_text().splitlines()[1])
    d = [
        None if t is None or i is None else t - i
        for t, i, m in zip(line["trainer_logprobs"], line["inference_logprobs"], line["loss_mask"], strict=True)
        if m
    ]
    got = {e["label"]: e for e in sessions["step_2/rank_1/seq_1"]["signals"]["corrections"]}
    for label, name, params in (
        ("token_mask:low=0.9,high=1.1", "token_mask", {"low": 0.9, "high": 1.1}),
        ("seq_tis:cap=1", "seq_tis", {"cap": 1.0}),
    ):
        want = reference_correction(name, params, [d])
        for key in ("n_tokens", "tokens_affected", "sequences_affected"):
            assert got[label][key] == want[key], (label, key)
        assert got[label]["weight_lost"] == pytest.approx(want["weight_lost"])
    out = tmp_path / "audit.parquet"
    assert run("audit", folder, "--correction", "seq_tis:cap=1", "--workers", "1", "--out", out).returncode == 0
    assert all(r["corrections"] for r in pq.read_table(out).to_pylist() if r["signals_tokens"])
