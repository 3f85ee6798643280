"""The rows' counts (graph/core/sequences.py ``build_sequences``) read each call's lengths once
instead of once per row through it; they must be what the plain per-row sums give: the row's
trainable tokens (the sampled ids of its trainable calls) and its context (each call's prompt
after its parent's end ids, as ``context_start`` gives it, plus its sampled ids, minus the
trainable tokens), on random token traces with random trainable flags, the bundled samples and
the test fixtures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rollout_graph.core.linking import link
from rollout_graph.core.sequences import build_sequences, context_start
from rollout_graph.core.topology import build_topology
from rollout_graph.ingest.load.files import load_paths
from rollout_graph.pipeline import analyse
from tests.support.builders import calls_from_tokens, examples, harness_traces

ROOT = Path(__file__).resolve().parents[2]


def _plain(calls, topology, trainable):
    out = []
    for leaf in topology.leaves:
        path = topology.path_to(leaf)
        n_trainable = sum(calls[k].n_sampled for k in path if trainable[k])
        length = sum(calls[k].n_prompt - context_start(calls, topology, k) + calls[k].n_sampled for k in path)
        out.append((leaf, path, calls[path[0]].n_prompt, int(n_trainable), int(length - n_trainable)))
    return out


def _mine(calls, topology, trainable):
    return [
        (s.leaf, s.nodes, s.prompt_len, s.n_trainable, s.n_context) for s in build_sequences(calls, topology, trainable)
    ]


@settings(max_examples=examples(1000), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(harness_traces(max_calls=16), st.data())
def test_row_counts_are_the_plain_sums(spec, data):
    calls = calls_from_tokens(spec)
    topology = build_topology(calls, link(calls).parents)
    flags = data.draw(st.lists(st.booleans(), min_size=len(calls), max_size=len(calls)))
    for trainable in (np.array(flags, dtype=bool), flags):  # an array, as the pipeline gives it, or a list
        got = _mine(calls, topology, trainable)
        assert got == _plain(calls, topology, trainable)
        assert all(type(x) is int for row in got for x in row[2:])


def test_every_sample_and_fixture_counts_its_rows_the_same():
    rollouts = [
        analyse(s)
        for folder in (ROOT / "sample_traces", ROOT / "tests" / "fixtures")
        for s in load_paths([folder]).sessions.values()
    ]
    assert len(rollouts) > 20
    for r in rollouts:
        assert _mine(r.calls, r.topology, r.trainable) == _plain(r.calls, r.topology, r.trainable)
        assert [(s.leaf, s.nodes, s.prompt_len, s.n_trainable, s.n_context) for s in r.sequences] == _plain(
            r.calls, r.topology, r.trainable
        )
