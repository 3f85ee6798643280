"""One test per linking rule (docs/semantics.md: Linking, Discarded), on hand-built calls whose answers are known."""

from __future__ import annotations

import numpy as np

from rollout_graph.core.linking import prefix_hashes, token_parents
from tests.support.builders import Turn, calls_from_tokens, rollout_of, rollout_of_tokens, vllm_chat


def parents_by_id(rollout):
    return {
        c.node_id: (None if p is None else rollout.calls[p].node_id)
        for c, p in zip(rollout.calls, rollout.topology.parents, strict=True)
    }


def test_parent_is_the_longest_prefix():
    r = rollout_of_tokens([([1, 2], [3]), ([1, 2, 3, 4], [5]), ([1, 2, 3, 4, 5, 6], [7])])
    assert parents_by_id(r) == {"n0": None, "n1": "n0", "n2": "n1"}


def test_parent_must_be_a_prefix_of_the_prompt_exactly():
    # n1's prompt diverges at the last token of n0's end: no parent, a new root.
    r = rollout_of_tokens([([1, 2], [3]), ([1, 2, 9, 4], [5])])
    assert parents_by_id(r) == {"n0": None, "n1": None}


def test_ties_go_to_the_earliest_arrival():
    # n0 and n1 have identical end ids; n2 continues that end.
    r = rollout_of_tokens([([1], [2]), ([1], [2]), ([1, 2, 3], [4])])
    assert parents_by_id(r)["n2"] == "n0"


def test_candidate_prompt_must_be_shorter_than_the_prompt():
    # n0 sampled nothing; its end equals n1's prompt but its prompt is not shorter.
    r = rollout_of_tokens([([1, 2, 3], []), ([1, 2, 3], [4])])
    assert parents_by_id(r) == {"n0": None, "n1": None}


def test_late_ancestor_adopts_regardless_of_arrival_order():
    spec = {"A": ([1], [2]), "B": ([1, 2, 3], [4]), "C": ([1, 2, 3, 4, 5], [6])}
    for order in (["A", "B", "C"], ["A", "C", "B"], ["C", "B", "A"], ["B", "C", "A"]):
        calls = calls_from_tokens([spec[k] for k in order])
        parents = token_parents(calls)
        named = {order[i]: (None if p is None else order[p]) for i, p in enumerate(parents)}
        assert named == {"A": None, "B": "A", "C": "B"}, order


def test_fork_and_discarded_retry():
    # n1 and n2 both continue n0; only n2 has a child, so n1 is a discarded retry.
    r = rollout_of_tokens([([1], [2]), ([1, 2, 3], [4]), ([1, 2, 3], [5]), ([1, 2, 3, 5, 6], [7])])
    assert r.topology.forks == [0]
    assert r.topology.discarded == {1: 2}
    assert [s.role for s in r.sequences] == ["discarded", "agent"]


def test_fork_where_no_branch_continued_discards_nothing():
    r = rollout_of_tokens([([1], [2]), ([1, 2, 3], [4]), ([1, 2, 3], [5])])
    assert r.topology.forks == [0]
    assert r.topology.discarded == {}


def test_retried_first_call_is_a_duplicate_prompt_root():
    r = rollout_of_tokens([([1, 2], [3]), ([1, 2], [4]), ([1, 2, 4, 5], [6])])
    assert r.topology.roots == [0, 1]
    assert r.topology.discarded == {0: 1}
    codes = [f.code for f in r.findings]
    assert "discarded_turns" in codes


def test_roots_without_token_ids_never_group():
    calls = calls_from_tokens([(None, []), (None, [])])
    from rollout_graph.core.records import SessionInput
    from rollout_graph.pipeline import analyse

    r = analyse(SessionInput("s", calls))
    assert r.topology.roots == [0, 1]
    assert r.topology.discarded == {}


def test_calls_without_prompt_ids_are_never_token_parents():
    # n0 has no prompt ids: its sampled ids alone are not an end sequence.
    r = rollout_of_tokens([(None, [1, 2]), ([1, 2, 3], [4])])
    assert parents_by_id(r) == {"n0": None, "n1": None}


def test_hash_collisions_never_decide(monkeypatch):
    import rollout_graph.core.linking as linking

    # Every hash collides (every term is 0): the exact token check must still refuse the link,
    # whether the pairs are filtered by hash (a head of 1 id, no direct pairs) or not.
    monkeypatch.setattr(linking, "_terms", lambda pieces, at=None: np.zeros(sum(len(p) for p in pieces), np.uint64))
    calls = calls_from_tokens([([5], [6]), ([7, 8, 9], [1]), ([5, 6, 2], [3])])
    for head, direct in ((32, 256), (1, 0), (1, 256), (2, 0)):
        monkeypatch.setattr(linking, "_HEAD", head)
        monkeypatch.setattr(linking, "_DIRECT_PAIRS", direct)
        assert token_parents(calls) == [None, None, 0], (head, direct)


def test_prefix_hashes_agree_for_equal_prefixes():
    a = prefix_hashes(np.array([3, 1, 4, 1, 5], dtype=np.int32))
    b = prefix_hashes(np.array([3, 1, 4, 9], dtype=np.int64))
    assert (a[:4] == b[:4]).all() and a[4] != b[4]
    assert a[0] == 0


def test_vllm_chat_records_link_into_a_chain():
    records = [
        vllm_chat(Turn("c0", [1, 2, 3], [4, 5])),
        vllm_chat(Turn("c1", [1, 2, 3, 4, 5, 6], [7])),
    ]
    r = rollout_of(records)
    assert parents_by_id(r) == {"c0": None, "c1": "c0"}
    assert r.linked_by == [None, "tokens"]
