"""Property tests: the fast linking against the naive reference on thousands of random traces,
arrival-order invariance, the path invariant and balanced counts."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rollout_graph.core.linking import token_parents
from rollout_graph.core.records import SessionInput
from rollout_graph.pipeline import analyse
from tests.support.builders import calls_from_tokens, examples, harness_traces
from tests.support.reference import reference_token_parents

FAST = settings(max_examples=examples(3000), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(harness_traces())
def test_fast_linking_matches_the_naive_reference(spec):
    assert token_parents(calls_from_tokens(spec)) == reference_token_parents(spec)


def _ends(spec):
    return [tuple((p or []) + s) if p is not None else None for p, s in spec]


@settings(max_examples=examples(1000), deadline=None)
@given(harness_traces(), st.randoms(use_true_random=False))
def test_graph_is_invariant_to_arrival_order(spec, rnd):
    ends = [e for e in _ends(spec) if e]
    assume(len(ends) == len(set(ends)))  # identical ends: ties go to the earliest arrival, which order changes
    order = list(range(len(spec)))
    rnd.shuffle(order)
    original = token_parents(calls_from_tokens(spec))
    shuffled = token_parents(calls_from_tokens([spec[i] for i in order]))
    mapped = [None if p is None else order[p] for p in shuffled]
    assert {order[i]: mapped[i] for i in range(len(spec))} == dict(enumerate(original))


@settings(max_examples=examples(1000), deadline=None)
@given(harness_traces())
def test_every_path_concatenates_to_its_leaf_and_counts_balance(spec):
    spec = [(p, s) for p, s in spec if p is not None]  # the invariant is about token chains
    assume(spec)
    rollout = analyse(SessionInput("s", calls_from_tokens(spec)))
    topo = rollout.topology
    assert len(rollout.sequences) == len(topo.leaves)
    assert sum(len(c) for c in topo.children) == len(spec) - len(topo.roots)
    for seq in rollout.sequences:
        leaf = rollout.calls[seq.leaf]
        toks = rollout.tokens(seq)
        assert toks.input_ids.tolist() == leaf.prompt_ids.tolist() + leaf.sampled_ids.tolist()
        assert int(toks.loss_mask.sum()) == seq.n_trainable
        assert toks.input_ids.shape[0] == seq.n_trainable + seq.n_context
        assert np.all(toks.logprobs[toks.loss_mask == 0] == 0.0)
        assert seq.role in ("agent", "auxiliary", "discarded")
        assert (seq.role == "discarded") == (seq.leaf in topo.discarded)
    stats = rollout.stats
    assert stats["n_turns"] == len(spec)
    assert stats["n_sequences"] == stats["n_leaves"]
