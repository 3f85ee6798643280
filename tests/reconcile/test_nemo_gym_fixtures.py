"""Our NeMo Gym and NeMo-RL reconcilers against those frameworks' own functions, whose outputs
tools/make_reconcile_fixtures.py wrote once from their sources (tests/reconcile/fixtures/README.md):
the records, every chain (its calls, interstitials and row), the quarantine, ``BuildNotes`` and
``mask_sample``; NeMo-RL's spliced prompts and the rows built from them."""

from __future__ import annotations

import hashlib
import json
import tempfile
from functools import cache
from pathlib import Path

import pytest

import rollout_graph as rg
from rollout_graph.analysis.reconcile.model import row_tokens
from rollout_graph.analysis.reconcile.nemo_gym import reconcile_nemo_gym, token_entries
from rollout_graph.analysis.reconcile.nemo_rl import _ids, reconcile_nemo_rl, splice
from tests.reconcile.sessions import EOS, generate, write

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = [
    json.loads(line) for line in (Path(__file__).with_name("fixtures") / "nemo_gym.jsonl").read_text().splitlines()
]
NOTES = ("builder", "roots", "chains", "generated_tokens_captured", "generated_tokens_delivered", "delivered_fraction",
         "unresolved_retries", "empty_generation_calls")  # fmt: skip


def digest(value) -> str:
    return hashlib.sha256(json.dumps(value, separators=(",", ":")).encode()).hexdigest()[:20]


@cache
def _sample(path: str):
    return rg.load(ROOT / path)


def rollout_of(case):
    source = case["source"]
    if "sample" in source:
        return _sample(source["sample"])[case["session_id"]]
    with tempfile.TemporaryDirectory() as folder:
        seed, n = source["generated"]["seed"], source["generated"]["n_calls"]
        (rollout,) = rg.load(write(generate(seed, n), Path(folder) / f"gen-{seed}.jsonl")).values()
    return rollout


def _chains(rollout, result):
    out = []
    for row in result.rows:
        t = row_tokens(rollout, row)
        out.append(
            {
                "chain_id": row.row_id,
                "model_call_ids": [rollout.calls[k].node_id for k in row.extra["chain"]],
                "length": int(t.input_ids.shape[0]),
                "n_mask": int(t.loss_mask.sum()),
                "row_digest": digest(
                    [t.input_ids.tolist(), t.loss_mask.tolist(), [round(x, 6) for x in t.logprobs.tolist()]]
                ),
            }
        )
    return out


def _theirs(built):
    return [
        {k: c[k] for k in ("chain_id", "model_call_ids", "length", "n_mask", "row_digest")} for c in built["chains"]
    ]


def _check_build(rollout, result, built, builder):
    assert _chains(rollout, result) == _theirs(built)
    assert [rollout.calls[k].node_id for k in result.quarantined] == built["quarantined"]
    assert {k: result.notes[k] for k in NOTES} == {k: built["notes"][k] for k in NOTES}
    if builder == "prefix_merging":
        expected = built["assembled"]["mask_sample"] or bool(result.notes.get("capture_incomplete"))
        assert result.notes["mask_sample"] == expected
        main = [r for r in result.rows if r.row_id == "main"]
        assert [r.trained for r in main] == [not expected] * len(main)
        assert all(not r.trained for r in result.rows if r.row_id != "main")


IDS = [
    f"{Path(c['source']['sample']).parent.name}/{c['session_id']}"
    if c["source"].get("writer") or c["source"].get("capture")
    else c["session_id"]
    for c in FIXTURES
]


@pytest.mark.parametrize("builder", ["prefix_merging", "per_request"])
@pytest.mark.parametrize("case", FIXTURES, ids=IDS)
def test_nemo_gym_builds_what_its_builder_builds(case, builder):
    rollout = rollout_of(case)
    assert digest(token_entries(rollout.session_id, rollout.calls)) == case["entries_digest"]
    _check_build(rollout, reconcile_nemo_gym(rollout, builder), case[builder], builder)


GENERATED = [c for c in FIXTURES if "nemo_rl" in c]


@pytest.mark.parametrize("case", GENERATED, ids=[c["session_id"] for c in GENERATED])
def test_nemo_rl_splices_as_replace_prefix_tokens(case):
    rollout = rollout_of(case)
    expected = case["nemo_rl"]
    done = splice(rollout, expected["eos_token_id"])
    for k, (call, theirs) in enumerate(zip(rollout.calls, expected["calls"], strict=True)):
        assert theirs["node_id"] == call.node_id
        pred = done.predecessors[k]
        assert theirs["predecessor"] == (None if pred is None else rollout.calls[pred].node_id)
        if "template_prefix_eos" in theirs:
            assert done.needed[k] == theirs["template_prefix_eos"], call.node_id
        assert ("error" in theirs) == (k in done.failed), call.node_id
        if "prompt_digest" in theirs:
            prompt = _ids(rollout.calls, done.composite[k] or [])
            assert int(prompt.shape[0]) == theirs["prompt_length"]
            assert digest([int(t) for t in prompt.tolist()]) == theirs["prompt_digest"], call.node_id
    result = reconcile_nemo_rl(rollout, eos_token_id=EOS)
    _check_build(rollout, result, expected["prefix_merging"], "prefix_merging")


def test_the_fixtures_cover_what_matters():
    """Quarantines, unresolved retries, branches, one clean chain and spliced calls all occur."""
    seen = {
        "quarantine": any(c["prefix_merging"]["quarantined"] for c in FIXTURES),
        "unresolved": any(c["prefix_merging"]["notes"]["unresolved_retries"] for c in FIXTURES),
        "branches": any(c["prefix_merging"]["notes"]["chains"] > 1 for c in FIXTURES),
        "one clean chain": any(not c["prefix_merging"]["assembled"]["mask_sample"] for c in FIXTURES),
        "a real writer's rollout": any(c["source"].get("writer") for c in FIXTURES),
        "a capture layer's records": any(c["source"].get("capture") for c in FIXTURES),
        "spliced": any(
            any("prompt_digest" in x and x.get("predecessor") for x in c["nemo_rl"]["calls"]) for c in GENERATED
        ),
    }
    assert all(seen.values()), seen


def test_the_fixtures_hold_every_sample_and_every_writers_rollout():
    """Made again when a sample or a writer's fixture is added: every bundled rollout, every
    rollout of tests/fixtures/writers/ (each file on its own) and of the capture layers' records
    has its case."""
    have = {(c["source"]["sample"], c["session_id"]) for c in FIXTURES if "sample" in c["source"]}
    want = set()
    for sid, rollout in rg.load(ROOT / "sample_traces").items():
        want.add((str(Path(rollout.calls[0].source).resolve().relative_to(ROOT)), sid))
    writers = ROOT / "tests" / "fixtures" / "writers"
    for path in sorted(p for p in writers.rglob("*") if p.is_file() and p.name not in ("README.md", "STABLE")):
        want |= {(str(path.relative_to(ROOT)), sid) for sid, r in rg.load(path).items() if r.calls}
    for folder in ("nemo_gym_capture", "rllm_gateway"):  # the capture layers' records, by their readers
        root = Path(__file__).with_name("fixtures") / folder
        for path in sorted(p for p in root.rglob("*") if p.is_file() and p.name != "README.md"):
            want |= {(str(path.relative_to(ROOT)), sid) for sid, r in rg.load(path).items() if r.calls}
    assert want - have == set(), "make the fixtures again: tools/make_reconcile_fixtures.py builders"
