"""Our reconcilers against the frameworks' own code (docs/reconcile.md, "How it is verified"):
TRL's ``_chain_to_sequences`` (its own loop, and its OpenEnv harness), OpenEnv's ``RolloutGraph``
with ``export_session``, verifiers' ``prepare_turn`` / ``commit`` / ``Trace.branches``, from the
installed packages (tests/reconcile/oracle.py), on every bundled sample, on every rollout of the
real writers' fixtures (tests/fixtures/writers/ and the capture layers' records) and on generated
sessions (tests/reconcile/sessions.py). Every row must be the same: ids, loss mask, logprobs, and
OpenEnv's role and trainable flag."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rollout_graph as rg
from rollout_graph.analysis.reconcile import reconcile
from tests.reconcile.cases import case_from_rollout, our_rows, rounded
from tests.reconcile.sessions import generate

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
# framework oracle -> (our framework, our parameters, the case's parameters, compare labels)
TARGETS = {
    "trl": ("trl", {}, {}, False),
    "trl-openenv": ("trl", {"source": "openenv"}, {}, False),
    "openenv": ("openenv", {}, {}, True),
    "verifiers": ("verifiers", {}, {}, False),
}


def _bundled():
    rollouts = rg.load(SAMPLES)
    return [rollouts[sid] for sid in rollouts]


BUNDLED = _bundled()
WRITERS_DIR = SAMPLES.parent / "tests" / "fixtures" / "writers"


CAPTURE_DIRS = [Path(__file__).with_name("fixtures") / f for f in ("nemo_gym_capture", "rllm_gateway")]


def _writers():
    """Every rollout with calls in the real writers' fixtures (tests/fixtures/writers/, each
    folder's README says which code wrote it) and in the capture layers' records NeMo Gym's and
    the rLLM gateway's writers wrote (tests/reconcile/fixtures/), each file read on its own."""
    out = []
    for root in [WRITERS_DIR, *CAPTURE_DIRS]:
        for path in sorted(p for p in root.rglob("*") if p.is_file() and p.name not in ("README.md", "STABLE")):
            for sid, rollout in rg.load(path).items():
                if rollout.calls:
                    out.append((f"{root.name}/{path.relative_to(root)}:{sid}", rollout))
    return out


WRITERS = _writers()


def _compare(oracle, rollout, target: str, extra: dict | None = None) -> None:
    ours_name, params, case_params, labels = TARGETS[target]
    params = {**params, **(extra or {})}
    expected = oracle.run(case_from_rollout(rollout, {**case_params, **(extra or {})}))
    ours = reconcile(rollout, ours_name, **params)
    assert "oracle crashed" not in (expected["error"] or ""), expected["error"]
    assert (ours.error is not None) == (expected["error"] is not None), (ours.error, expected["error"])
    mine = our_rows(rollout, ours)
    theirs = rounded(expected["rows"])
    if not labels:
        for rows in (mine, theirs):
            for r in rows:
                r.pop("label")
        if target != "verifiers":
            for rows in (mine, theirs):
                for r in rows:
                    r.pop("trained")
    assert [len(r["input_ids"]) for r in mine] == [len(r["input_ids"]) for r in theirs], rollout.session_id
    assert mine == theirs, rollout.session_id


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("rollout", BUNDLED, ids=[r.session_id for r in BUNDLED])
def test_bundled_samples_give_the_frameworks_rows(oracles, target, rollout):
    _compare(oracles(target), rollout, target)


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("rollout", [r for _, r in WRITERS], ids=[name for name, _ in WRITERS])
def test_real_writers_fixtures_give_the_frameworks_rows(oracles, target, rollout):
    _compare(oracles(target), rollout, target)


def _loaded(seed: int, n_calls: int):
    import tempfile

    from tests.reconcile.sessions import write

    with tempfile.TemporaryDirectory() as folder:
        path = write(generate(seed, n_calls), Path(folder) / f"gen-{seed}.jsonl")
        (rollout,) = rg.load(path).values()
    return rollout


SESSIONS = st.tuples(st.integers(0, 10**9), st.integers(1, 14))


@pytest.mark.parametrize("target", list(TARGETS))
@settings(max_examples=60)
@given(session=SESSIONS)
def test_generated_sessions_give_the_frameworks_rows(oracles, target, session):
    _compare(oracles(target), _loaded(*session), target)


@settings(max_examples=60)
@given(session=SESSIONS, threshold=st.sampled_from([0, 1, 3, 8, 1024]))
def test_trl_fork_threshold_follows_trl(oracles, session, threshold):
    _compare(oracles("trl"), _loaded(*session), "trl", {"fork_threshold_tokens": threshold})
