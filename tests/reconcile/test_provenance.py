"""The provenance every reconciler claims holds token by token (docs/reconcile.md, "Provenance"),
on generated sessions and the bundled samples: a position called sampled is the model's id after
exactly the prefix it saw; one called off-policy is not; masks, logprobs and counts add up."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rollout_graph as rg
from rollout_graph.analysis.reconcile import FRAMEWORKS, reconcile, reconcile_all
from rollout_graph.analysis.reconcile.model import (
    NO_LOGPROB,
    OFF_POLICY,
    OUTPUT,
    RETOKENIZED,
    SAMPLED,
    SAMPLED_AS_CONTEXT,
    row_tokens,
)
from tests.reconcile.sessions import EOS, generate, write

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


def check(rollout, result) -> None:
    calls = rollout.calls
    for row in result.rows:
        t = row_tokens(rollout, row)
        assert t.input_ids.shape[0] == row.length
        assert int(t.loss_mask.sum()) == row.n_mask
        assert not t.logprobs[t.loss_mask == 0].any(), "a masked position carries a logprob"
        assert not t.loss_mask[np.isin(t.provenance, [RETOKENIZED, SAMPLED_AS_CONTEXT])].any()
        at = 0
        for s in row.segments:
            n = s.stop - s.start
            if s.part == OUTPUT and s.mask:
                call = calls[s.call]
                prompt = np.asarray(call.prompt_ids, dtype=np.int64)
                seen = np.concatenate([prompt, np.asarray(call.sampled_ids[: s.start], dtype=np.int64)])
                same = at == seen.shape[0] and np.array_equal(t.input_ids[:at], seen)
                code = s.code()
                assert code in (SAMPLED, OFF_POLICY, NO_LOGPROB)
                assert same == (code != OFF_POLICY), (result.framework, row.row_id, call.node_id)
                assert (code == NO_LOGPROB) == (not call.logprobs_aligned) or code == OFF_POLICY
            at += n
    trained = {}
    for f, call in zip(result.fates, calls, strict=False):
        assert 0 <= f.n_trained <= f.n_sampled == call.n_sampled
        trained[call.node_id] = f.n_trained
    s = result.summary()
    assert s["n_delivered_tokens"] + s["n_dropped_tokens"] == s["n_sampled_tokens"]


def _generated(seed, n):
    with tempfile.TemporaryDirectory() as folder:
        (rollout,) = rg.load(write(generate(seed, n), Path(folder) / f"gen-{seed}.jsonl")).values()
    return rollout


@settings(max_examples=80)
@given(seed=st.integers(0, 10**9), n=st.integers(1, 14))
def test_generated_sessions_keep_every_claim(seed, n):
    rollout = _generated(seed, n)
    for name in FRAMEWORKS:
        params = {"eos_token_id": EOS} if name == "nemo-rl" else {}
        check(rollout, reconcile(rollout, name, **params))


BUNDLED = list(rg.load(SAMPLES).values())


@pytest.mark.parametrize("rollout", BUNDLED, ids=[r.session_id for r in BUNDLED])
def test_bundled_samples_keep_every_claim(rollout):
    for result in reconcile_all(rollout):
        check(rollout, result)
