"""Training signals: reading, the join to training rows, the mismatch figures and findings,
groups, the entropy bound and the comparison (hand-computed expectations on small rows)."""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from rollout_graph.analysis.entropy import entropy_lower_bound
from rollout_graph.analysis.groups import common_prefix, group_key, rollout_groups
from rollout_graph.core.records import TopK
from rollout_graph.reports.compare import compare
from rollout_graph.reports.contract import session_json
from rollout_graph.reports.export import training_rows
from rollout_graph.signals.join import attach, attach_all, join_rollout, mismatch_metrics
from rollout_graph.signals.reading import SignalsError, SignalsFile, parse_row, read_signals_bytes
from tests.support.builders import Turn, rollout_of, vllm_chat

# c0: prompt [1 2 3] samples [4 5]; c1 continues it (prompt [1..6]) and samples [7].
# The one training row (leaf c1): ids 1 2 3 4 5 6 7, mask 0 0 0 1 1 0 1, logprobs -0.5 -1.0 at 3, 4 and -0.2 at 6.
CHAIN = [Turn("c0", [1, 2, 3], [4, 5], [-0.5, -1.0]), Turn("c1", [1, 2, 3, 4, 5, 6], [7], [-0.2])]
TRAINER = [None, 0.0, 0.0, -0.4, -1.5, 0.0, -0.2]  # d at the trained positions: +0.1, -0.5, 0.0


def chain():
    return rollout_of([vllm_chat(t) for t in CHAIN])


def row(leaf="c1", **columns):
    return parse_row({"session_id": "s1", "leaf_id": leaf, **columns}, 1)


def test_metrics_by_hand():
    d = np.array([0.1, -0.5, 0.0])
    m = mismatch_metrics(d)
    assert m["n_tokens"] == 3
    assert m["mean_abs_diff"] == pytest.approx(0.2)
    assert m["max_abs_diff"] == pytest.approx(0.5)
    k3 = ((math.exp(0.1) - 1 - 0.1) + (math.exp(-0.5) - 1 + 0.5) + 0.0) / 3
    assert m["kl_k3"] == pytest.approx(k3)  # 0.0372...
    assert m["ratio_outside_share"] == pytest.approx(1 / 3)  # exp(-0.5) = 0.61 is outside [0.8, 1.2]
    assert mismatch_metrics(np.empty(0)) == {
        "n_tokens": 0, "mean_abs_diff": None, "max_abs_diff": None, "kl_k3": None, "ratio_outside_share": None,
    }  # fmt: skip


def test_join_a_row_by_hand():
    rollout = chain()
    joined = join_rollout(rollout, [row(trainer_logprobs=TRAINER, reward=0.75, advantages=[0] * 3 + [0.5] * 4)], 0.4)
    s = joined.summary()
    assert s["n_rows"] == 1 and s["reward"] == 0.75 and s["n_tokens"] == 3
    assert s["mean_abs_diff"] == pytest.approx(0.2) and s["max_abs_diff"] == pytest.approx(0.5)
    assert s["mean_advantage"] == pytest.approx(0.5)  # over the three trained positions
    c0, c1 = joined.calls[0], joined.calls[1]
    assert (c0.n_tokens, c0.mean_abs_diff, c0.max_abs_diff) == (2, pytest.approx(0.3), pytest.approx(0.5))
    assert (c1.n_tokens, c1.max_abs_diff) == (1, pytest.approx(0.0))
    np.testing.assert_allclose(c0.trainer, [-0.4, -1.5])
    # over the 0.4 nat threshold: c0 only
    assert [(f.level, f.code, f.node_id) for f in joined.findings] == [("WARN", "logprob_mismatch", "c0")]
    assert not join_rollout(rollout, [row(trainer_logprobs=TRAINER)], 1.0).findings


def test_untrained_and_missing_trainer_positions_are_not_compared():
    rollout = chain()
    trainer = list(TRAINER)
    trainer[4] = None  # the trainer gave nothing at the -0.5 position
    s = join_rollout(rollout, [row(trainer_logprobs=trainer)]).summary()
    assert s["n_tokens"] == 2 and s["max_abs_diff"] == pytest.approx(0.1)
    # context positions carry any value without effect
    noisy = [5.0, -9.0, -9.0, -0.4, -1.5, -9.0, -0.2]
    assert join_rollout(rollout, [row(trainer_logprobs=noisy)]).summary()["max_abs_diff"] == pytest.approx(0.5)


@pytest.mark.parametrize(
    "columns, why",
    [
        ({"trainer_logprobs": TRAINER[:-1]}, "trainer_logprobs has 6 values for a row of 7 positions"),
        ({"trainer_logprobs": TRAINER + [0.0]}, "trainer_logprobs has 8 values"),
        ({"advantages": [0.0] * 3}, "advantages has 3 values"),
        ({"trainer_logprobs": TRAINER, "input_ids": [1, 2, 3, 4, 5, 6, 8]}, "input_ids differ"),
    ],
)
def test_a_misaligned_row_is_reported_and_ignored_never_truncated(columns, why):
    rollout = chain()
    joined = join_rollout(rollout, [row(reward=1.0, **columns)])
    (finding,) = joined.findings
    assert (finding.level, finding.code, finding.leaf_id) == ("FATAL", "signals_misaligned", "c1")
    assert why in finding.detail
    assert joined.rows == {} and joined.calls == {} and joined.n_rows_ignored == 1
    assert joined.reward is None and joined.summary()["n_tokens"] == 0  # the whole row is ignored, reward too


def test_a_row_naming_a_missing_leaf_is_fatal():
    joined = join_rollout(chain(), [row(leaf="c9", reward=1.0), row(trainer_logprobs=TRAINER)])
    (finding,) = joined.findings
    assert finding.code == "signals_misaligned" and "'c9'" in finding.detail and finding.leaf_id is None
    assert joined.summary()["n_rows"] == 1 and joined.n_rows_ignored == 1


def test_duplicate_rows_agree_or_are_both_ignored():
    rollout = chain()
    same = join_rollout(rollout, [row(trainer_logprobs=TRAINER), row(trainer_logprobs=TRAINER)])
    assert not same.findings and same.summary()["n_rows"] == 1
    other = list(TRAINER)
    other[3] = -0.3
    differ = join_rollout(rollout, [row(trainer_logprobs=TRAINER), row(trainer_logprobs=other)])
    assert [f.code for f in differ.findings] == ["signals_misaligned"] and differ.rows == {}


def test_attach_adds_findings_and_the_contract_keys():
    rollout = chain()
    joined = attach(rollout, join_rollout(rollout, [row(trainer_logprobs=TRAINER, reward=0.5, step=3)], 0.4))
    assert joined.finding_counts["WARN"] == rollout.finding_counts["WARN"] + 1
    assert rollout.signals is None  # the original is untouched
    doc = session_json(joined, with_tokens=False)
    assert doc["signals"]["reward"] == 0.5 and doc["signals"]["rows"][0]["extra"] == {"step": 3}
    assert doc["nodes"][0]["signals"] == {"n_tokens": 2, "mean_abs_diff": pytest.approx(0.3), "max_abs_diff": 0.5}
    assert "signals" not in session_json(rollout, with_tokens=False)
    exported = training_rows(joined)[0]
    assert exported["reward"] == 0.5 and exported["trainer_logprobs"][0] is None
    assert exported["trainer_logprobs"][1:] == TRAINER[1:] and exported["signals_meta"] == {"step": 3}


def test_reading_jsonl_and_parquet_gives_the_same_rows_and_reports_bad_lines():
    rows = [
        {"session_id": "s1", "leaf_id": "c1", "trainer_logprobs": TRAINER, "reward": 1, "note": "x", "list": [1]},
        {"session_id": "s1", "leaf_id": "c0", "reward": 0.5},
    ]
    text = (
        "\n".join(json.dumps(r) for r in rows)
        + '\n{"leaf_id": "c2"}\nnot json\n{"session_id": "s", "leaf_id": "c", "reward": "high"}\n'
    )
    from_jsonl = read_signals_bytes("a.signals.jsonl", text.encode())
    assert [(s.line, s.reason.split(":")[0]) for s in from_jsonl.skipped] == [
        (3, "no session_id (a non-empty string)"),
        (4, "not JSON"),
        (5, "reward is not a finite number"),
    ]
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buf)
    from_parquet = read_signals_bytes("a.parquet", buf.getvalue())
    assert not from_parquet.skipped
    for a, b in zip(from_jsonl.rows, from_parquet.rows, strict=True):
        assert (
            a.key == b.key
            and a.reward == b.reward
            and a.extra == b.extra == ({"note": "x"} if a.leaf_id == "c1" else {})
        )
        if a.trainer_logprobs is not None:
            np.testing.assert_array_equal(a.trainer_logprobs, b.trainer_logprobs)
    with pytest.raises(SignalsError, match="no signals rows"):
        read_signals_bytes("empty.jsonl", b"nothing\n")


def test_rows_for_sessions_not_loaded_are_counted_not_joined():
    signals = SignalsFile(["f"], [row(trainer_logprobs=TRAINER), parse_row({"session_id": "zz", "leaf_id": "c1"}, 2)])
    (joined,), report = attach_all([chain()], signals)
    assert report.unmatched_sessions == ["zz"] and report.n_unmatched_rows == 1
    assert joined.signals.summary()["n_rows"] == 1 and not joined.signals.findings


# A fork: c0 -> c1 and c0 -> c2 (two rows sharing c0), plus a later call c3 on c1.
FORK = [
    Turn("c0", [1, 2], [3, 4], [-0.1, -0.2]),
    Turn("c1", [1, 2, 3, 4, 5], [6], [-0.3]),
    Turn("c2", [1, 2, 3, 4, 9], [8], [-0.4]),
    Turn("c3", [1, 2, 3, 4, 5, 6, 7], [9, 9], [-0.5, -0.6]),
]


def fork_rows(seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    rollout = rollout_of([vllm_chat(t) for t in FORK])
    out = []
    for r in training_rows(rollout):
        noise = rng.normal(0, 0.3, len(r["input_ids"]))
        out.append({"session_id": "s1", "leaf_id": r["leaf_id"], "trainer_logprobs": (np.array(r["logprobs"]) + noise).tolist(),
                    "reward": float(rng.uniform())})  # fmt: skip
    out.append({"session_id": "s1", "leaf_id": "nope", "reward": 1.0})
    out.append({"session_id": "s1", "leaf_id": out[0]["leaf_id"], "trainer_logprobs": [0.0]})  # a bad duplicate
    return out


@given(st.integers(0, 10_000), st.randoms(use_true_random=False))
def test_a_permutation_of_the_signals_file_changes_nothing(seed, rnd):
    rows = fork_rows(seed)
    shuffled = list(rows)
    rnd.shuffle(shuffled)
    assume(shuffled != rows)
    rollout = rollout_of([vllm_chat(t) for t in FORK])

    def joined(rs):
        parsed = [parse_row(r, i + 1) for i, r in enumerate(rs)]
        j = join_rollout(rollout, parsed, threshold=0.5)
        doc = j.as_dict(rollout)
        return doc, [(f.code, f.node_id, f.leaf_id) for f in j.findings], {k: v.as_dict() for k, v in j.calls.items()}

    a, b = joined(rows), joined(shuffled)
    assert a[1] == b[1] and a[2] == b[2]
    assert json.dumps(a[0], sort_keys=True) == json.dumps(b[0], sort_keys=True)


@given(st.integers(0, 10_000))
def test_per_call_figures_pool_every_row_covering_the_call(seed):
    rollout = rollout_of([vllm_chat(t) for t in FORK])
    rows = [parse_row(r, i) for i, r in enumerate(fork_rows(seed)[:-2])]
    j = join_rollout(rollout, rows, threshold=100)
    by_leaf = {r.leaf_id: r for r in rows}
    # c0's sampled span (positions 2, 3) appears in every row
    expected = []
    for seq in rollout.sequences:
        leaf = rollout.calls[seq.leaf].node_id
        if leaf not in by_leaf:
            continue
        tokens = rollout.tokens(seq)
        expected += list(by_leaf[leaf].trainer_logprobs[2:4] - tokens.logprobs[2:4])
    assume(expected)
    assert j.calls[0].n_tokens == len(expected)
    assert j.calls[0].max_abs_diff == pytest.approx(max(abs(x) for x in expected))
    assert j.calls[0].mean_abs_diff == pytest.approx(np.mean(np.abs(expected)))


def test_reward_is_the_main_rows_else_the_mean():
    rollout = rollout_of([vllm_chat(t) for t in FORK])
    main = "c3"  # the agent row with the most trainable tokens
    rows = [row(leaf=main, reward=1.0), row(leaf="c2", reward=0.0)]
    assert join_rollout(rollout, rows).reward == 1.0
    # the main row has none: the mean over the rows that have one (c0 is no leaf: that row is ignored)
    fallback = join_rollout(rollout, [row(leaf="c2", reward=0.2), row(leaf="c3"), row(leaf="c0", reward=0.4)])
    assert fallback.reward == pytest.approx(0.2) and fallback.n_rows_ignored == 1


def test_entropy_lower_bound_by_hand():
    p = np.array([[0.5, 0.25, 0.25], [0.9, 0.05, np.nan]])
    bound = entropy_lower_bound(TopK(ids=np.zeros((2, 3), np.int64), logprobs=np.log(p)), 3)
    assert bound[0] == pytest.approx(1.5 * math.log(2))  # the whole distribution: exact
    # 0.9, 0.05 recorded; 0.05 left, each unrecorded token at most 0.05 likely
    assert bound[1] == pytest.approx(-0.9 * math.log(0.9) - 0.05 * math.log(0.05) + 0.05 * -math.log(0.05))
    assert math.isnan(bound[2]) and np.isnan(entropy_lower_bound(None, 2)).all()


@given(st.lists(st.floats(0.01, 10), min_size=2, max_size=40), st.integers(1, 8))
def test_entropy_lower_bound_never_exceeds_the_entropy(weights, k):
    assume(k < len(weights))
    p = np.sort(np.array(weights) / sum(weights))[::-1]
    true = float(-(p * np.log(p)).sum())
    bound = entropy_lower_bound(TopK(ids=np.zeros((1, k), np.int64), logprobs=np.log(p[None, :k])), 1)[0]
    assert bound <= true + 1e-9


def test_groups_and_compare():
    same_task = [Turn("c0", [1, 2, 3], [4, 5], tools=[{"type": "function"}])]
    a = rollout_of([vllm_chat(t) for t in same_task])
    other = [Turn("c0", [1, 2, 3], [4, 6], tools=[{"type": "function"}], session="s2")]
    b = rollout_of([vllm_chat(t) for t in other])
    c = rollout_of([vllm_chat(Turn("c0", [1, 9], [4], tools=[{"type": "function"}], session="s3"))])
    assert group_key(a) == group_key(b) != group_key(c)
    groups = rollout_groups([a, c, b])
    assert [g.members for g in groups] == [["s1", "s2"], ["s3"]]
    assert groups[0].common_prefix == 4 and groups[0].divergence == {"s1": 5, "s2": 4}
    result = compare(a, b)
    assert result["a"]["stats"] == dict(a.stats) and result["b"]["session_id"] == "s2"
    assert result["main"]["common_prefix_tokens"] == 4 and result["main"]["a_tokens"] == result["main"]["b_tokens"] == 5
    d = result["main"]["divergence"]
    assert d["position"] == 4 and d["a"]["token_id"] == 5 and d["b"]["token_id"] == 6 and d["a"]["node_id"] == "c0"
    assert d["a"]["logprob"] == pytest.approx(-0.5) and result["differences"]["same_first_prompt"]
    assert compare(a, a)["main"]["identical"] and compare(a, c)["differences"]["same_first_prompt"] is False
    assert common_prefix(np.array([1, 2]), np.array([1, 2, 3])) == 2
