"""Keyboard moves between calls (pure), the keyboard bridge's event handling, and the pinned
token inspector's numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rollout_graph.analysis.decode import TraceTextDecoder, trace_token_texts
from rollout_graph.analysis.navigation import (
    CHILD,
    NEXT,
    NEXT_SIBLING,
    PARENT,
    PREVIOUS,
    PREVIOUS_SIBLING,
    siblings,
    step,
)
from rollout_graph.ui.builders.inspector import facts_text, token_facts
from rollout_graph.ui.builders.tokens import node_strip, origin_strip
from tests.support.builders import rollout_of_tokens

# n0 -> {n1 (retry), n2 -> n3}; n4 a second root
SPEC = [([1], [2]), ([1, 2, 3], [4]), ([1, 2, 3], [5]), ([1, 2, 3, 5, 6], [7]), ([9], [8])]


@pytest.fixture
def topo():
    return rollout_of_tokens(SPEC).topology


def test_arrival_order(topo):
    assert step(topo, 0, NEXT) == 1 and step(topo, 4, NEXT) is None
    assert step(topo, 1, PREVIOUS) == 0 and step(topo, 0, PREVIOUS) is None


def test_parent_and_first_child(topo):
    assert step(topo, 3, PARENT) == 2 and step(topo, 0, PARENT) is None
    assert step(topo, 0, CHILD) == 1 and step(topo, 3, CHILD) is None


def test_siblings_share_a_parent_and_roots_are_siblings(topo):
    assert siblings(topo, 1) == [1, 2]
    assert step(topo, 1, NEXT_SIBLING) == 2 and step(topo, 2, NEXT_SIBLING) is None
    assert step(topo, 2, PREVIOUS_SIBLING) == 1
    assert step(topo, 0, NEXT_SIBLING) == 4 and step(topo, 4, PREVIOUS_SIBLING) == 0


def test_no_selection_starts_at_the_first_call(topo):
    assert step(topo, None, CHILD) == 0
    with pytest.raises(ValueError):
        step(topo, 0, "sideways")


def test_inspector_numbers_for_a_sampled_token():
    from tests.support.builders import TOOLS, Turn, rollout_of, vllm_chat

    r = rollout_of([vllm_chat(Turn("a", [1, 2], [3, 4], logprobs=[-0.25, -2.0], tools=TOOLS), token_text=True)])
    decoder = TraceTextDecoder(trace_token_texts(r.calls))
    strip = node_strip(r, 0)
    facts = dict(token_facts(strip, 3, decoder))  # the second sampled token: id 4
    assert facts["id"] == "4" and facts["text"] == repr("tok4")
    assert facts["logprob"] == "-2.000000" and facts["probability"] == f"{math.exp(-2.0):.6f}"
    assert facts["rank"] == "1 of 2 recorded"  # the builder records the token itself, then id + 1
    assert facts["loss mask"] == "1 (trained)"
    assert facts["top 2"].startswith("'<5>' id 5 logprob -3.5000")
    assert "<- sampled" in facts["top 1"]
    context = dict(token_facts(strip, 0, decoder))
    assert context["loss mask"] == "0" and "logprob" not in context
    text = facts_text(token_facts(strip, 3, decoder))
    assert text.splitlines()[1].split() == ["id", "4"]


def test_inspector_names_the_call_that_sampled_a_context_token():
    r = rollout_of_tokens([([1], [2, 3]), ([1, 2, 3, 4], [5])])
    strip = origin_strip(r, 1)
    decoder = TraceTextDecoder({})
    sampled_earlier = dict(token_facts(strip, 1, decoder))
    assert (
        sampled_earlier["origin"] == f"sampled earlier by the policy in n0 at logprob -0.5000 (p {math.exp(-0.5):.4f})"
    )
    assert dict(token_facts(strip, 3, decoder))["origin"].startswith("inserted by the harness")
    assert np.isnan(strip.logprobs[1])
