"""What RL frameworks write (docs/formats.md, "RL frameworks"): detection, fidelity grade, tokens,
masks, embedded signals and training steps, per framework, on tests/fixtures/frameworks/ (made by
tools/make_framework_fixtures.py; verifiers' by verifiers itself). Property tests re-read rollouts
exported by ``rollout-graph export`` through each token-level format."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout_graph.cli import main
from rollout_graph.ingest.formats.fidelity import GRADES, mask_runs, rollout_grade, step_from_path
from rollout_graph.ingest.load.files import load_paths
from rollout_graph.pipeline import analyse
from rollout_graph.reports.contract import session_json
from rollout_graph.reports.export import training_rows

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "frameworks"
SAMPLE = ROOT / "sample_traces" / "vllm" / "agent-rollouts.jsonl"


def rollouts(path: Path) -> dict:
    loaded = load_paths([path])
    return {s.session_id: analyse(s) for s in loaded.sessions.values()}, loaded


# --- per framework --------------------------------------------------------------------------


def test_prime_rl_token_export_rows_come_back_exactly_with_their_trainer_columns():
    by_id, loaded = rollouts(FIXTURES / "prime-rl")
    assert loaded.skipped == [] and len(by_id) == 8  # 2 steps x 2 ranks x 2 rows; STABLE is no trace
    line = json.loads((FIXTURES / "prime-rl/token_exports/step_2/rank_1.jsonl").read_text().splitlines()[1])
    r = by_id["step_2/rank_1/seq_1"]
    assert rollout_grade(r.calls) == "sequences"
    assert {c.shape for c in r.calls} == {"prime-rl token export"}
    (seq,) = r.sequences
    tokens = r.tokens(seq)
    assert tokens.input_ids.tolist() == line["token_ids"]
    assert tokens.loss_mask.astype(bool).tolist() == line["loss_mask"]
    mask = np.array(line["loss_mask"])
    assert np.allclose(tokens.logprobs[mask], np.array(line["inference_logprobs"])[mask])
    assert len(r.calls) == 2  # one call per loss-mask run
    # signals: the trainer's logprobs against the engine's, and prime-rl's own figures beside ours
    s = r.signals.summary()
    assert s["reward"] == 0.0 and s["n_tokens"] == 5
    assert s["mean_abs_diff"] == pytest.approx(0.3)
    assert s["mean_advantage"] == pytest.approx(-0.5)
    row = next(iter(r.signals.rows.values()))
    assert row.row.extra["prime_rl_mismatch_kl"] == pytest.approx(s["kl_k3"], rel=1e-6)
    assert row.row.extra["prime_rl_masked_share"] == 1.0
    assert {c.claims["step"] for c in r.calls} == {2}
    assert not any(f.code == "trainer_figures_disagree" for f in r.findings)


def test_prime_rl_mismatch_kl_that_disagrees_with_ours_is_a_finding(tmp_path):
    src = FIXTURES / "prime-rl/token_exports/step_1/rank_0.jsonl"
    record = json.loads(src.read_text().splitlines()[0])
    record["mismatch_kl"] = [0.5 if m else 0.0 for m in record["loss_mask"]]
    (tmp_path / "step_1").mkdir()
    (tmp_path / "step_1" / "rank_0.jsonl").write_text(json.dumps(record) + "\n")
    (r,) = rollouts(tmp_path)[0].values()
    (finding,) = [f for f in r.findings if f.code == "trainer_figures_disagree"]
    assert finding.level == "WARN" and "0.5" in finding.detail


def test_verifiers_traces_written_by_verifiers_rebuild_the_message_graph():
    by_id, loaded = rollouts(FIXTURES / "verifiers")
    assert loaded.skipped == [] and len(by_id) == 4
    branching = [r for r in by_id.values() if len(r.sequences) == 2]
    assert len(branching) == 2  # the trace whose second question was re-asked has two leaves
    r = branching[0]
    assert rollout_grade(r.calls) == "tokens+logprobs"
    assert r.stats["n_forks"] == 1 and all(by == "tokens" for by in r.linked_by[1:])
    record = json.loads((FIXTURES / "verifiers/rollouts/step_3/train/default/traces.jsonl").read_text().splitlines()[1])
    nodes = record["traces"][0]["nodes"]
    # a branch's training row is the concatenation of its nodes' token ids and masks
    leaf = max(range(len(nodes)), key=lambda i: i if nodes[i]["sampled"] else -1)
    path, at = [], leaf
    while at is not None:
        path.append(at)
        at = nodes[at].get("parent")
    want_ids = [t for i in reversed(path) for t in nodes[i]["token_ids"]]
    want_mask = [m for i in reversed(path) for m in nodes[i]["mask"]]
    r3 = next(x for x in by_id.values() if x.session_id.endswith(record["traces"][0]["id"]))
    seq = next(s for s in r3.sequences if r3.calls[s.leaf].node_id == f"n{leaf}")
    tokens = r3.tokens(seq)
    assert tokens.input_ids.tolist() == want_ids
    assert tokens.loss_mask.astype(bool).tolist() == want_mask
    assert r3.signals.summary()["mean_advantage"] == pytest.approx(-0.25)
    assert r3.signals.summary()["mean_abs_diff"] == pytest.approx(0.01)
    assert {c.claims["step"] for c in r3.calls} == {3}


def test_nemo_rl_rows_are_cut_at_their_input_length():
    by_id, _ = rollouts(FIXTURES / "nemo-rl")
    assert len(by_id) == 4
    r = by_id["exp_001/train_data_step2/sample_2"]
    (seq,) = r.sequences
    tokens = r.tokens(seq)
    assert tokens.input_ids.tolist() == [1, 2, 5, 6, 50, 51, 7, 52, 2]
    assert tokens.loss_mask.tolist() == [0, 0, 0, 0, 1, 1, 0, 1, 1]
    assert tokens.logprobs[tokens.loss_mask == 1].tolist() == pytest.approx([-0.5, -0.6, -0.7, -0.8])
    r1 = by_id["exp_001/train_data_step1/sample_1"]
    assert r1.tokens(r1.sequences[0]).input_ids.tolist() == [1, 2, 3, 40, 41, 42, 2]  # padding dropped
    s = r.signals.summary()
    assert (
        s["reward"] == 0.0 and s["max_abs_diff"] == pytest.approx(0.02) and s["mean_advantage"] == pytest.approx(-0.7)
    )
    assert r.calls[0].claims["step"] == 2


@pytest.mark.parametrize(
    ("folder", "fmt", "n", "rewards", "steps"),
    [
        ("verl", "verl rollout dump", 4, [0.0, 1.0], {1, 2}),
        ("skyrl", "SkyRL eval dump", 2, [0.0, 1.0], {0, 5}),
    ],
)
def test_text_dumps_are_graded_text_with_their_scores_as_rewards(folder, fmt, n, rewards, steps):
    by_id, _ = rollouts(FIXTURES / folder)
    assert len(by_id) == n
    for r in by_id.values():
        assert rollout_grade(r.calls) == "text"
        assert r.calls[0].shape == fmt and r.calls[0].prompt_ids is None
        assert r.calls[0].response_message["content"]
    assert sorted({r.signals.reward for r in by_id.values()}) == rewards
    assert {r.calls[0].claims["step"] for r in by_id.values()} == steps


@pytest.mark.parametrize(("folder", "grade"), [("trl", "text"), ("trl-chat", "messages")])
def test_trl_completions_written_by_trl_itself_carry_their_step_and_summed_rewards(folder, grade):
    import pyarrow.parquet as pq

    by_id, loaded = rollouts(FIXTURES / folder)
    assert loaded.skipped == [] and len(by_id) == 4
    for step in (1, 2):
        table = pq.read_table(FIXTURES / folder / "completions" / f"completions_{step:05d}.parquet").to_pylist()
        for line, row in enumerate(table, start=1):
            r = by_id[f"completions/step_{step}/{line}"]
            assert rollout_grade(r.calls) == grade and r.calls[0].claims["step"] == step
            assert r.signals.reward == pytest.approx(row["length_reward"] + row["has_digit"])
            extra = next(iter(r.signals.rows.values())).row.extra
            assert extra["advantage"] == pytest.approx(row["advantage"])
            completion = row["completion"] if isinstance(row["completion"], str) else row["completion"][-1]["content"]
            assert r.calls[0].response_message["content"] == completion
    if grade == "messages":
        assert r.calls[0].request_messages[0]["role"] == "user"


def test_skyrl_metrics_and_pickles_are_skipped_by_name():
    _, loaded = rollouts(FIXTURES / "skyrl")
    reasons = {Path(s.file).name: s.reason for s in loaded.skipped}
    assert "aggregated eval metrics" in reasons["aggregated_results.jsonl"]
    assert "never unpickled" in reasons["global_step_5.pkl"] and "convert" in reasons["global_step_5.pkl"].lower()


def test_a_pickle_is_never_opened(tmp_path, monkeypatch):
    import pickle

    (tmp_path / "dump.pt").write_bytes(pickle.dumps([1, 2, 3]))
    monkeypatch.setattr(pickle, "loads", lambda *a, **k: pytest.fail("unpickled"))
    monkeypatch.setattr(pickle, "load", lambda *a, **k: pytest.fail("unpickled"))
    loaded = load_paths([tmp_path])
    assert loaded.sessions == {} and "never unpickled" in loaded.skipped[0].reason


def test_opentelemetry_genai_spans_are_message_level_calls():
    by_id, _ = rollouts(FIXTURES / "otel")
    r = by_id["conv-42"]
    assert rollout_grade(r.calls) == "messages"
    assert [c.node_id for c in r.calls] == ["c1", "c2"]
    assert r.topology.parents == [None, 0] and r.linked_by[1] == "messages"
    assert r.calls[0].response_message["tool_calls"][0]["function"]["name"] == "ls"
    assert r.calls[1].request_messages[-1]["role"] == "tool"
    assert r.calls[0].model == "gpt-4o-mini-2024-07-18" and r.calls[0].harness == "files-bot"
    assert r.calls[0].usage == {"prompt_tokens": 12, "completion_tokens": 8}


# --- inspect ---------------------------------------------------------------------------------


def test_inspect_json_and_text_carry_the_grade_what_it_rules_out_and_the_step(capsys):
    assert main(["inspect", str(FIXTURES / "verl"), "--json", "--no-cache"]) == 0
    payload = json.loads(capsys.readouterr().out)
    session = payload["sessions"][0]
    assert session["fidelity"] == "text" and session["step"] in (1, 2)
    assert "no token ids" in session["fidelity_detail"]["rules_out"]
    assert session["fidelity_detail"]["format"] == "verl rollout dump"
    assert main(["inspect", str(FIXTURES / "prime-rl"), "--no-cache"]) == 0
    text = capsys.readouterr().out
    assert "fidelity sequences · prime-rl token export · step 1 (rules out:" in text


def test_every_sample_trace_keeps_a_grade_in_inspect_json():
    loaded = load_paths([ROOT / "sample_traces"])
    grades = {session_json(analyse(s), False)["fidelity"] for s in loaded.sessions.values()}
    assert grades <= set(GRADES) and "tokens+logprobs" in grades


# --- steps -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "step"),
    [
        ("out/token_exports/step_12/rank_0.jsonl", 12),
        ("ckpt/dumped_evals/global_step_40_evals/gsm8k.jsonl", 40),
        ("logs/exp_001/train_data_step7.jsonl", 7),
        ("logs/val_data_step3.jsonl", 3),
        ("out/completions/completions_00012.parquet", 12),
        ("rollout_data_dir/25.jsonl", 25),
        ("rollouts/step_9/train/default/traces.jsonl", 9),
        ("runs/2024/agent.jsonl", None),
        ("traces/agent-rollouts.jsonl", None),
    ],
)
def test_the_step_comes_from_the_path(path, step):
    assert step_from_path(path) == step


# --- property tests: export -> a token-level framework format -> the same rows ----------------


def _trained_prefix(row: dict) -> tuple[list[int], list[int], list[float]]:
    mask = row["loss_mask"]
    end = max(i for i, m in enumerate(mask) if m) + 1
    return row["input_ids"][:end], mask[:end], row["logprobs"][:end]


def _exported_rows() -> list[dict]:
    loaded = load_paths([SAMPLE])
    rows = [row for s in loaded.sessions.values() for row in training_rows(analyse(s))]
    return [r for r in rows if any(r["loss_mask"])]


def _prime_line(i: int, ids: list[int], mask: list[int], lps: list[float]) -> dict:
    n = len(ids)
    return {
        "schema_version": 1, "step": 0, "rank": 0, "micro_step": 0, "micro_sequence_idx": i,
        "export_sequence_idx": i, "token_ids": ids, "position_ids": list(range(n)),
        "loss_mask": [bool(m) for m in mask], "inference_logprobs": lps, "trainer_logprobs": lps,
        "advantages": [0.0] * n, "rewards": [0.0] * n,
    }  # fmt: skip


def _nemo_line(ids: list[int], mask: list[int], lps: list[float], pad: int) -> dict:
    return {
        "token_ids": ids + [0] * pad, "token_loss_mask": mask + [0] * pad,
        "generation_logprobs": lps + [0.0] * pad, "prev_logprobs": lps + [0.0] * pad,
        "input_lengths": len(ids), "rewards": 0.0, "advantages": [0.0] * (len(ids) + pad), "sample_loss_mask": 1,
    }  # fmt: skip


def _reread(folder: Path) -> list:
    loaded = load_paths([folder])
    assert loaded.skipped == []
    return [analyse(s) for s in loaded.sessions.values()]


def _key(ids: list[int], mask: list[int], lps: list[float]) -> tuple:
    return (ids, mask, [round(lp, 6) for lp, m in zip(lps, mask, strict=True) if m])


def _same_rows(rows: list[tuple[list[int], list[int], list[float]]], reread: list) -> None:
    got = []
    for r in reread:
        (seq,) = r.sequences
        t = r.tokens(seq)
        got.append(_key(t.input_ids.tolist(), t.loss_mask.tolist(), t.logprobs.tolist()))
    assert sorted(got) == sorted(_key(*row) for row in rows)


def test_exported_rows_reread_as_prime_rl_and_nemo_rl_give_the_same_tokens_masks_and_logprobs(tmp_path):
    rows = [_trained_prefix(r) for r in _exported_rows()]
    assert len(rows) >= 3
    prime = tmp_path / "prime" / "token_exports" / "step_0"
    prime.mkdir(parents=True)
    (prime / "rank_0.jsonl").write_text("".join(json.dumps(_prime_line(i, *row)) + "\n" for i, row in enumerate(rows)))
    _same_rows(rows, _reread(tmp_path / "prime"))
    nemo = tmp_path / "nemo"
    nemo.mkdir()
    (nemo / "train_data_step0.jsonl").write_text("".join(json.dumps(_nemo_line(*row, pad=3)) + "\n" for row in rows))
    _same_rows(rows, _reread(nemo))


def test_rows_written_by_the_export_command_reread_as_prime_rl_and_nemo_rl(tmp_path):
    out = tmp_path / "rows.jsonl"
    assert main(["export", str(SAMPLE), "--out", str(out), "--no-cache"]) == 0
    exported = [json.loads(line) for line in out.read_text().splitlines()]
    rows = [_trained_prefix(r) for r in exported if any(r["loss_mask"])]
    assert rows and len(rows) == len(_exported_rows())
    prime = tmp_path / "prime" / "step_3"
    prime.mkdir(parents=True)
    (prime / "rank_0.jsonl").write_text("".join(json.dumps(_prime_line(i, *row)) + "\n" for i, row in enumerate(rows)))
    _same_rows(rows, _reread(tmp_path / "prime"))
    nemo = tmp_path / "nemo"
    nemo.mkdir()
    (nemo / "val_data_step3.jsonl").write_text("".join(json.dumps(_nemo_line(*row, pad=1)) + "\n" for row in rows))
    reread = _reread(nemo)
    _same_rows(rows, reread)
    assert {c.claims["step"] for r in reread for c in r.calls} == {3}


def _as_verifiers_trace(rollout) -> dict:
    """The rollout's calls as a verifiers message graph: a context node then a sampled node per call."""
    nodes: list[dict] = []
    assistant_of: dict[int, int] = {}
    for i, call in enumerate(rollout.calls):
        parent = rollout.topology.parents[i]
        context = call.prompt_ids[rollout.context_start(i) :].tolist()
        nodes.append(
            {"parent": assistant_of.get(parent), "message": {"role": "user", "content": f"ctx {i}"}, "sampled": False,
             "token_ids": context, "mask": [False] * len(context), "logprobs": []}
        )  # fmt: skip
        sampled = call.sampled_ids.tolist()
        nodes.append(
            {"parent": len(nodes) - 1, "message": {"role": "assistant", "content": f"reply {i}"}, "sampled": True,
             "token_ids": sampled, "mask": [True] * len(sampled), "logprobs": call.sampled_logprobs.tolist()}
        )  # fmt: skip
        assistant_of[i] = len(nodes) - 1
    return {"version": 1, "id": rollout.session_id, "nodes": nodes, "rewards": {}}


def test_exported_rollouts_reread_as_verifiers_traces_give_the_same_rows(tmp_path):
    loaded = load_paths([SAMPLE])
    originals = [analyse(s) for s in loaded.sessions.values()]
    usable = [
        r
        for r in originals
        if r.calls and all(c.prompt_ids is not None and c.logprobs_aligned and c.n_sampled for c in r.calls)
    ]
    assert usable
    path = tmp_path / "traces.jsonl"
    path.write_text("".join(json.dumps(_as_verifiers_trace(r)) + "\n" for r in usable))
    reread = {r.session_id: r for r in _reread(tmp_path)}
    for original in usable:
        again = reread[original.session_id]
        assert again.stats["n_forks"] == original.stats["n_forks"]
        rows = lambda r: sorted(_key(x["input_ids"], x["loss_mask"], x["logprobs"]) for x in training_rows(r))  # noqa: E731
        assert rows(again) == rows(original)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.integers(1, 5)),  # (context tokens, sampled tokens) per call
        min_size=1,
        max_size=5,
    ),
    st.integers(0, 4),
)
def test_any_flattened_row_round_trips_through_prime_rl_and_nemo_rl(spans, pad):
    ids, mask, lps = [], [], []
    for n_context, n_sampled in spans:
        for _ in range(n_context):
            ids.append(len(ids) + 10)
            mask.append(0)
            lps.append(0.0)
        for k in range(n_sampled):
            ids.append(len(ids) + 10)
            mask.append(1)
            lps.append(-0.1 * (k + 1))
    runs = mask_runs(np.array(mask))
    assert sum(b - a for a, b in runs) == sum(mask)
    tmp = Path(f"/tmp/rg-h25-prop-{abs(hash((tuple(spans), pad)))}")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "step_0").mkdir(parents=True)
    try:
        (tmp / "step_0" / "rank_0.jsonl").write_text(json.dumps(_prime_line(0, ids, mask, lps)) + "\n")
        (tmp / "train_data_step0.jsonl").write_text(json.dumps(_nemo_line(ids, mask, lps, pad)) + "\n")
        reread = _reread(tmp)
        assert len(reread) == 2
        for r in reread:
            (seq,) = r.sequences
            t = r.tokens(seq)
            assert t.input_ids.tolist() == ids and t.loss_mask.tolist() == mask
            assert all(math.isclose(a, b) for a, b in zip(t.logprobs.tolist(), lps, strict=True))
            assert len(r.calls) == len(runs) and r.calls[0].claims["step"] == 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# --- Parquet and the app's pure parts ---------------------------------------------------------


def test_a_damaged_or_foreign_parquet_file_is_named_not_fatal(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "broken.parquet").write_bytes(b"PAR1 not really")
    pq.write_table(pa.table({"x": [1, 2]}), tmp_path / "other.parquet")
    loaded = load_paths([tmp_path])
    reasons = {(Path(s.file).name, s.line): s.reason for s in loaded.skipped}
    assert reasons[("broken.parquet", 0)].startswith("not a readable Parquet file")
    assert reasons[("other.parquet", 1)].startswith("unknown record shape") and len(reasons) == 3


def test_the_fidelity_banner_names_the_grade_and_escapes_what_the_trace_named():
    from rollout_graph.ui.panels.fidelity import banner_text

    detail = {"grade": "text", "rules_out": "no ids", "format": "evil *dump* <b>", "step": 4}
    text = banner_text(detail)
    assert text.startswith("Fidelity **text**") and "step 4" in text and "rules out: no ids" in text
    assert "*dump*" not in text and "<b>" not in text
    assert banner_text({"grade": "tokens+logprobs", "rules_out": None, "format": None, "step": None}) is None
    assert "step 3" in banner_text({"grade": "tokens+logprobs", "rules_out": None, "format": None, "step": 3})


def test_the_run_page_charts_every_step_from_the_step_table():
    import pandas as pd

    from rollout_graph.reports.run import step_table
    from rollout_graph.ui.panels.run import CHART_KEYS, figures

    by_id, _ = rollouts(FIXTURES / "prime-rl")
    from rollout_graph.reports.audit import audit_row

    steps = pd.DataFrame(step_table([audit_row(r, "f") for r in by_id.values()]))
    charts = figures(steps)
    assert list(charts) == list(CHART_KEYS)
    reward = charts[CHART_KEYS[2]].data[0]
    assert list(reward.x) == [1, 2] and list(reward.y) == [0.5, 0.5]
    assert {t.name for t in charts[CHART_KEYS[5]].data} == {"mean |Δ| (nats)", "KL k3 (right)"}


def test_opentelemetry_snake_case_and_pre_scope_exports_read_the_same(tmp_path):
    export = json.loads((FIXTURES / "otel" / "traces.json").read_text())
    old = {
        "resourceSpans": [{**r, "instrumentationLibrarySpans": r.pop("scopeSpans")} for r in export["resourceSpans"]]
    }
    (tmp_path / "old.json").write_text(json.dumps(old))
    snake_spans = []
    for span in json.loads((FIXTURES / "otel" / "traces.json").read_text())["resourceSpans"][0]["scopeSpans"][0][
        "spans"
    ]:
        span = {
            {"spanId": "span_id", "parentSpanId": "parent_span_id", "traceId": "trace_id"}.get(k, k): v
            for k, v in span.items()
        }
        span["attributes"] = [
            {
                "key": a["key"],
                "value": {
                    ("string_value" if "stringValue" in a["value"] else next(iter(a["value"]))): next(
                        iter(a["value"].values())
                    )
                },
            }
            for a in span["attributes"]
        ]
        snake_spans.append(span)
    (tmp_path / "snake.json").write_text(json.dumps({"resource_spans": [{"scope_spans": [{"spans": snake_spans}]}]}))
    for name in ("old.json", "snake.json"):
        (r,) = rollouts(tmp_path / name)[0].values()
        assert r.session_id == "conv-42" and [c.node_id for c in r.calls] == ["c1", "c2"]
        assert r.calls[1].request_messages[-1]["role"] == "tool" and r.topology.parents == [None, 0]


def test_an_audit_table_beside_the_traces_is_one_named_skip(tmp_path):
    from rollout_graph.reports import audit

    rows = audit.run_local(audit.expand_inputs([str(FIXTURES / "verl")]), 1)
    audit.write_parquet(rows, tmp_path / "audit.parquet")
    loaded = load_paths([tmp_path])
    (skip,) = loaded.skipped
    assert skip.line == 0 and "audit table" in skip.reason
