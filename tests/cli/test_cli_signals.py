"""`--signals` on inspect, export and audit, and `rollout-graph compare`, through the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rollout_graph.ingest.load.files import load_paths
from rollout_graph.pipeline import analyse
from rollout_graph.signals.reading import read_signals

ROOT = Path(__file__).resolve().parents[2]
VLLM = ROOT / "sample_traces" / "vllm"
BUNDLED = ROOT / "sample_traces" / "signals" / "samples.signals.jsonl"

pytestmark = pytest.mark.slow


def run(*args):
    return subprocess.run([sys.executable, "-m", "rollout_graph", *map(str, args)], capture_output=True, text=True)


def c04_first_sampled(leaf_id: str) -> int | None:
    """Where fix-config-bug's call c04 starts sampling in the row to ``leaf_id`` (None: not on it)."""
    rollout = analyse(load_paths([VLLM]).sessions["fix-config-bug"])
    seq = next(s for s in rollout.sequences if rollout.calls[s.leaf].node_id == leaf_id)
    node = rollout.index_of("c04")
    if node not in seq.nodes:
        return None
    start = int(rollout.tokens(seq).turn_starts[seq.nodes.index(node)])
    return start + rollout.calls[node].n_prompt - rollout.context_start(node)


@pytest.fixture(scope="module")
def signals(tmp_path_factory) -> Path:
    """Signals for the vllm samples: trainer = inference + 0.01 on every trained token, and 1.99
    nats lower on c04's first sampled token; one row too short; one for a leaf that does not exist."""
    folder = tmp_path_factory.mktemp("signals")
    rows_file = folder / "rows.jsonl"
    assert run("export", VLLM, "--out", rows_file).returncode == 0
    out = []
    for r in map(json.loads, rows_file.read_text().splitlines()):
        trainer = [lp + 0.01 if m else None for lp, m in zip(r["logprobs"], r["loss_mask"], strict=True)]
        if r["session_id"] == "fix-config-bug" and (at := c04_first_sampled(r["leaf_id"])) is not None:
            trainer[at] -= 2.0
        out.append({"session_id": r["session_id"], "leaf_id": r["leaf_id"], "trainer_logprobs": trainer,
                    "reward": 1.0 if r["session_id"] == "fix-config-bug" else 0.0, "step": 7})  # fmt: skip
    short = next(o for o in out if o["session_id"] == "list-todos" and o["leaf_id"] == "c16")
    short["trainer_logprobs"] = short["trainer_logprobs"][:-1]
    out.append({"session_id": "list-todos", "leaf_id": "c99", "reward": 1.0})
    path = folder / "run.signals.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in out))
    return path


def test_inspect_json_gains_signals_keys(signals):
    out = run("inspect", VLLM, "--json", "--signals", signals)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["signals_load"]["rows"] == 22 and doc["signals_load"]["skipped"] == []
    sessions = {s["session_id"]: s for s in doc["sessions"]}
    main = sessions["fix-config-bug"]
    sig = main["signals"]
    assert sig["reward"] == 1.0 and sig["n_rows"] == 11 and sig["n_rows_ignored"] == 0
    assert sig["n_tokens"] == main["stats"]["n_trainable_tokens"] + 0  # every trained position compared
    assert sig["max_abs_diff"] == pytest.approx(1.99, abs=1e-6)
    assert sig["ratio_outside_share"] > 0 and sig["kl_k3"] > 0 and sig["n_mismatch_calls"] == 1
    (mismatch,) = [f for f in main["findings"] if f["code"] == "logprob_mismatch"]
    assert mismatch["level"] == "WARN" and mismatch["node_id"] == "c04"
    c04 = next(n for n in main["nodes"] if n["node_id"] == "c04")
    assert c04["signals"]["max_abs_diff"] == pytest.approx(1.99, abs=1e-6)
    todos = sessions["list-todos"]
    fatal = sorted(f["detail"] for f in todos["findings"] if f["code"] == "signals_misaligned")
    assert len(fatal) == 2 and any("c99" in d for d in fatal) and any("trainer_logprobs has" in d for d in fatal)
    assert todos["finding_counts"]["FATAL"] == 2 and todos["signals"]["n_rows_ignored"] == 2
    # a higher threshold: no mismatch finding
    quiet = json.loads(run("inspect", VLLM, "--json", "--signals", signals, "--mismatch-threshold", "3").stdout)
    assert not any(f["code"] == "logprob_mismatch" for s in quiet["sessions"] for f in s["findings"])
    # without --signals the contract is unchanged
    plain = json.loads(run("inspect", VLLM, "--json").stdout)
    assert "signals_load" not in plain and all("signals" not in s for s in plain["sessions"])


def test_inspect_text_and_bad_signals_file(signals, tmp_path):
    out = run("inspect", VLLM, "--signals", signals)
    assert out.returncode == 0
    assert "signals: 1 file(s), 22 rows, 0 skipped" in out.stdout
    assert "signals: reward 1 · rows 11 · compared 3,230 tokens" in out.stdout
    missing = run("inspect", VLLM, "--signals", tmp_path / "nope.jsonl")
    assert missing.returncode == 2 and "signals" in missing.stderr and "Traceback" not in missing.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    out = run("inspect", VLLM, "--signals", bad)
    assert out.returncode == 2 and "no signals rows" in out.stderr


def test_export_writes_the_trainer_columns(signals, tmp_path):
    out = tmp_path / "rows.parquet"
    result = run("export", VLLM, "--out", out, "--signals", signals)
    assert result.returncode == 0, result.stderr
    rows = pq.read_table(out).to_pylist()
    main = next(r for r in rows if r["session_id"] == "fix-config-bug" and r["leaf_id"] == "c17")
    assert main["reward"] == 1.0 and len(main["trainer_logprobs"]) == len(main["input_ids"])
    assert json.loads(main["signals_meta"]) == {"step": 7}
    short = next(r for r in rows if r["session_id"] == "list-todos" and r["leaf_id"] == "c16")
    assert short["trainer_logprobs"] is None and short["reward"] is None  # misaligned: ignored, not truncated
    assert any(f["code"] == "signals_misaligned" for f in short["findings"])
    # the exported rows read back as a signals file: every row aligns
    jsonl = tmp_path / "rows.signals.jsonl"
    assert run("export", VLLM, "--out", jsonl, "--signals", signals).returncode == 0
    assert len(read_signals(jsonl).rows) == 21


def test_audit_rows_gain_reward_and_mismatch(signals, tmp_path):
    out = tmp_path / "audit.parquet"
    result = run("audit", VLLM, "--out", out, "--workers", "1", "--signals", signals)
    assert result.returncode == 0, result.stderr
    rows = {r["session_id"]: r for r in pq.read_table(out).to_pylist()}
    assert rows["fix-config-bug"]["reward"] == 1.0 and rows["fix-config-bug"]["n_mismatch_calls"] == 1
    assert rows["fix-config-bug"]["max_abs_diff"] == pytest.approx(1.99, abs=1e-6)
    assert rows["list-todos"]["signals_rows"] == 9 and "signals_misaligned" in rows["list-todos"]["finding_codes"]
    plain = tmp_path / "plain.parquet"
    assert run("audit", VLLM, "--out", plain, "--workers", "1").returncode == 0
    assert all(r["reward"] is None for r in pq.read_table(plain).to_pylist())


def test_compare_json(signals):
    out = run(
        "compare", VLLM, VLLM, "--session-a", "fix-config-bug", "--session-b", "list-todos", "--json",
        "--signals", signals,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    inspect = {s["session_id"]: s for s in json.loads(run("inspect", VLLM, "--json").stdout)["sessions"]}
    assert doc["a"]["session_id"] == "fix-config-bug" and doc["b"]["session_id"] == "list-todos"
    assert (
        doc["a"]["stats"] == inspect["fix-config-bug"]["stats"] and doc["b"]["stats"] == inspect["list-todos"]["stats"]
    )
    main = doc["main"]
    assert (main["a_tokens"], main["b_tokens"]) == (1383, 870) and main["a_leaf_id"] == "c17"
    assert 0 < main["common_prefix_tokens"] < 870 and main["divergence"]["position"] == main["common_prefix_tokens"]
    assert doc["a"]["signals"]["reward"] == 1.0 and doc["b"]["signals"]["reward"] == 0.0
    assert "n_turns" in doc["differences"]["stats"] and not doc["differences"]["same_first_prompt"]
    text = run("compare", VLLM, VLLM, "--session-a", "fix-config-bug", "--session-b", "list-todos")
    assert "first divergence at position" in text.stdout
    same = json.loads(run("compare", ROOT / "sample_traces", ROOT / "sample_traces", "--session-a", "fix-config-bug",
                          "--session-b", "fix-config-bug.openenv", "--json").stdout)  # fmt: skip
    assert same["main"]["identical"] and same["differences"]["same_first_prompt"]
    unknown = run("compare", VLLM, VLLM, "--session-b", "nope")
    assert unknown.returncode == 2 and "no session 'nope'" in unknown.stderr


@pytest.mark.skipif(not BUNDLED.exists(), reason="the bundled signals file is written by tools/make_sample_signals.py")
def test_the_bundled_signals_file_aligns_with_the_samples():
    # the traces the signals were scored for (the real-harness samples came later and have none)
    scored = [ROOT / "sample_traces" / d for d in ("vllm", "openenv", "eval")]
    out = run("inspect", *scored, "--json", "--signals", BUNDLED)
    doc = json.loads(out.stdout)
    assert doc["signals_load"]["skipped"] == [] and doc["signals_load"]["n_unmatched_rows"] == 0
    for s in doc["sessions"]:
        assert s["signals"]["n_rows"] == s["stats"]["n_sequences"] and s["signals"]["n_rows_ignored"] == 0
        assert s["signals"]["n_tokens"] == s["stats"]["n_trainable_tokens"]
        assert s["signals"]["reward"] is not None
        if s["signals"]["n_tokens"]:
            # a genuine recomputation: small, non-zero differences
            assert 0 < s["signals"]["mean_abs_diff"] < 0.5


def test_view_checks_its_signals_file(tmp_path):
    out = run("view", "--signals", tmp_path / "nope.signals.jsonl")
    assert out.returncode == 2 and "no such file" in out.stderr
