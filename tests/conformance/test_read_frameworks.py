"""What the trainers' own writer functions write (tests/fixtures/writers/: NeMo-RL, prime-rl,
verl and SkyRL executed from their source; verifiers and TRL from PyPI) opens exactly: every
line loads, rows come back token for token with their masks, logprobs, trainer columns and
rewards, compared with the file itself (docs/formats.md, "RL frameworks")."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rollout_graph.ingest.formats.fidelity import rollout_grade
from rollout_graph.ingest.load.files import load_paths
from rollout_graph.pipeline import analyse
from tests.conformance.writers import FIXTURES


def opened(path):
    loaded = load_paths([path])
    return {sid: analyse(s) for sid, s in loaded.sessions.items()}, loaded


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_nemo_rl_batch_of_one_lines_all_load_cut_at_their_input_length():
    folder = FIXTURES / "nemo-rl" / "logs" / "exp_001"
    by_id, loaded = opened(folder)
    train = lines(folder / "train_data_step1.jsonl")
    assert loaded.skipped == []
    assert sum(len(s.calls) for s in loaded.sessions.values()) >= len(train) + len(
        lines(folder / "val_data_step1.jsonl")
    )
    for record in train:
        assert all(isinstance(v, list) and len(v) == 1 for k, v in record.items() if k != "idx")  # as written
        r = by_id[f"exp_001/train_data_step1/sample_{record['idx']}"]
        n = record["input_lengths"][0]
        assert n < len(record["token_ids"][0])  # right-padded
        (seq,) = r.sequences
        tokens = r.tokens(seq)
        assert tokens.input_ids.tolist() == record["token_ids"][0][:n]
        assert tokens.loss_mask.tolist() == record["token_loss_mask"][0][:n]
        mask = np.array(record["token_loss_mask"][0][:n], dtype=bool)
        assert np.allclose(tokens.logprobs[mask], np.array(record["generation_logprobs"][0][:n])[mask])
        assert r.signals.reward == record["rewards"][0]
        assert r.calls[0].claims["step"] == 1 and rollout_grade(r.calls) == "sequences"
    for record in lines(folder / "val_data_step1.jsonl"):
        r = by_id[f"exp_001/val_data_step1/sample_{record['idx']}"]
        (call,) = r.calls
        log = record["content"][0]
        assert call.request_messages + [call.response_message] == log
        assert rollout_grade(r.calls) == "messages" and r.signals.reward == record["rewards"][0]


def test_prime_rl_token_export_rows_come_back_with_prime_rls_own_figures():
    folder = FIXTURES / "prime-rl" / "token_exports"
    by_id, loaded = opened(folder)
    assert loaded.skipped == []
    written = lines(folder / "step_1" / "rank_0.jsonl")
    assert len(by_id) == len(written)
    for record in written:
        r = by_id[f"step_1/rank_0/seq_{record['export_sequence_idx']}"]
        (seq,) = r.sequences
        tokens = r.tokens(seq)
        assert tokens.input_ids.tolist() == record["token_ids"]
        assert tokens.loss_mask.astype(bool).tolist() == record["loss_mask"]
        mask = np.array(record["loss_mask"])
        assert np.allclose(tokens.logprobs[mask], np.array(record["inference_logprobs"])[mask])
        assert not any(f.code == "trainer_figures_disagree" for f in r.findings)  # prime-rl's k3 is ours
        row = next(iter(r.signals.rows.values())).row
        kl = np.array(record["mismatch_kl"], dtype=float)[mask].mean()
        assert row.extra["prime_rl_mismatch_kl"] == pytest.approx(kl, rel=1e-5)
        assert r.signals.summary()["mean_abs_diff"] == pytest.approx(
            np.abs(np.array(record["trainer_logprobs"])[mask] - np.array(record["inference_logprobs"])[mask]).mean(),
            rel=1e-5,
        )


@pytest.mark.parametrize("path", ["verifiers/traces.jsonl", "prime-rl/rollouts/step_0/train/all/traces.jsonl"])
def test_verifiers_traces_rebuild_every_branch(path):
    by_id, loaded = opened(FIXTURES / path)
    assert loaded.skipped == []
    for record in lines(FIXTURES / path):
        for trace in record["traces"]:
            r = by_id[f"{record['id']}/{trace['id']}"]
            nodes = trace["nodes"]
            leaves = [i for i, n in enumerate(nodes) if n["sampled"] and not any(m.get("parent") == i for m in nodes)]
            assert len(r.sequences) == len(leaves)
            for leaf in leaves:
                path_nodes, at = [], leaf
                while at is not None:
                    path_nodes.append(at)
                    at = nodes[at].get("parent")
                seq = next(s for s in r.sequences if r.calls[s.leaf].node_id == f"n{leaf}")
                tokens = r.tokens(seq)
                assert tokens.input_ids.tolist() == [t for i in reversed(path_nodes) for t in nodes[i]["token_ids"]]
                assert tokens.loss_mask.astype(bool).tolist() == [
                    m for i in reversed(path_nodes) for m in nodes[i]["mask"]
                ]
            assert rollout_grade(r.calls) == "tokens+logprobs"


def test_verl_dumps_are_one_text_call_a_line_with_the_score_and_step():
    folder = FIXTURES / "verl" / "rollout_data"
    by_id, loaded = opened(folder)
    assert loaded.skipped == []
    written = [(step, record) for step in (1, 2) for record in lines(folder / f"{step}.jsonl")]
    assert len(by_id) == len(written)
    got = sorted(
        (r.calls[0].claims["step"], r.calls[0].response_message["content"], r.signals.reward) for r in by_id.values()
    )
    assert got == sorted((step, rec["output"], rec["score"]) for step, rec in written)
    assert {rollout_grade(r.calls) for r in by_id.values()} == {"text"}


def test_skyrl_dumps_sum_a_token_level_reward_and_skip_the_metrics():
    folder = FIXTURES / "skyrl" / "dumped_evals"
    by_id, loaded = opened(folder)
    assert sorted(s.file.rsplit("/", 1)[-1] for s in loaded.skipped) == ["aggregated_results.jsonl"] * 2
    written = [
        (int(f.parent.name.split("_")[2]), record)
        for f in sorted(folder.glob("*/*.jsonl"))
        if f.name != "aggregated_results.jsonl"
        for record in lines(f)
    ]
    assert len(by_id) == len(written)

    def score(value):
        return float(sum(value)) if isinstance(value, list) else float(value)

    got = sorted(
        (r.calls[0].claims["step"], r.calls[0].response_message["content"], r.signals.reward) for r in by_id.values()
    )
    assert got == sorted((step, rec["output_response"], score(rec["score"])) for step, rec in written)
    assert any(isinstance(rec["score"], list) for _, rec in written)  # the per-token reward is there


@pytest.mark.parametrize(("folder", "grade"), [("plain", "text"), ("chat", "messages")])
def test_trl_completions_open_with_their_rewards(folder, grade):
    import pyarrow.parquet as pq

    by_id, loaded = opened(FIXTURES / "trl" / folder)
    assert loaded.skipped == []
    for step in (1, 2):
        rows = pq.read_table(FIXTURES / "trl" / folder / "completions" / f"completions_{step:05d}.parquet").to_pylist()
        for k, row in enumerate(rows, start=1):
            r = by_id[f"completions/step_{step}/{k}"]
            assert rollout_grade(r.calls) == grade and r.calls[0].claims["step"] == step
            assert r.signals.reward == pytest.approx(row["length_reward"] + row["has_digit"])
