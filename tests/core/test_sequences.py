"""Sequences, masks and roles (docs/semantics.md: Sequences, Roles), with a golden case checked to the token."""

from __future__ import annotations

from rollout_graph.core.records import SessionInput
from rollout_graph.pipeline import analyse
from tests.support.builders import TOOLS, Turn, calls_from_tokens, rollout_of, rollout_of_tokens, vllm_chat


def test_golden_flattening():
    # root c0: prompt [10 11] sampled [12 13]; c1 continues with tool output [14] and samples [15];
    # c2 retries c1's prompt and is discarded; c3 continues c1.
    records = [
        vllm_chat(Turn("c0", [10, 11], [12, 13], logprobs=[-0.1, -0.2], tools=TOOLS)),
        vllm_chat(Turn("c1", [10, 11, 12, 13, 14], [15], logprobs=[-0.3], tools=TOOLS)),
        vllm_chat(Turn("c2", [10, 11, 12, 13, 14], [16, 17], logprobs=[-0.4, -0.5], tools=TOOLS)),
        vllm_chat(Turn("c3", [10, 11, 12, 13, 14, 15, 18, 19], [20], logprobs=[-0.6], tools=TOOLS)),
    ]
    r = rollout_of(records)
    by_leaf = {r.calls[s.leaf].node_id: s for s in r.sequences}
    assert list(by_leaf) == ["c2", "c3"]  # leaf arrival order
    main = by_leaf["c3"]
    toks = r.tokens(main)
    assert [r.calls[k].node_id for k in main.nodes] == ["c0", "c1", "c3"]
    assert toks.input_ids.tolist() == [10, 11, 12, 13, 14, 15, 18, 19, 20]
    assert toks.loss_mask.tolist() == [0, 0, 1, 1, 0, 1, 0, 0, 1]
    assert toks.logprobs.tolist() == [0.0, 0.0, -0.1, -0.2, 0.0, -0.3, 0.0, 0.0, -0.6]
    assert toks.turn_starts.tolist() == [0, 4, 6]
    assert (main.prompt_len, main.n_trainable, main.n_context, main.n_turns) == (2, 4, 5, 3)
    assert main.role == "agent"
    retry = by_leaf["c2"]
    assert retry.role == "discarded"
    assert r.tokens(retry).input_ids.tolist() == [10, 11, 12, 13, 14, 16, 17]
    assert r.tokens(retry).loss_mask.tolist() == [0, 0, 1, 1, 0, 1, 1]


def test_missing_logprobs_mask_the_sampled_span():
    r = rollout_of_tokens([([1, 2], [3, 4])], logprobs=False)
    toks = r.tokens(r.sequences[0])
    assert toks.loss_mask.tolist() == [0, 0, 0, 0]
    assert toks.logprobs.tolist() == [0.0] * 4
    assert "no_logprobs" in {f.code for f in r.findings}


def test_misaligned_logprobs_mask_the_sampled_span():
    calls = calls_from_tokens([([1, 2], [3, 4])])
    calls[0].sampled_logprobs = calls[0].sampled_logprobs[:1]
    r = analyse(SessionInput("s", calls))
    assert r.tokens(r.sequences[0]).loss_mask.tolist() == [0, 0, 0, 0]
    assert [f.code for f in r.findings if f.level == "FATAL"][:1] == ["logprob_misalign"]


def test_fatal_turn_keeps_its_tokens_as_context_only():
    records = [vllm_chat(Turn("c0", [1, 2], [3], logprobs=[0.5]))]
    r = rollout_of(records)
    toks = r.tokens(r.sequences[0])
    assert toks.input_ids.tolist() == [1, 2, 3]
    assert toks.loss_mask.tolist() == [0, 0, 0]
    assert not r.trainable[0]


def test_roles_follow_the_tool_manifest_when_a_live_path_has_one():
    records = [
        vllm_chat(Turn("main", [1, 2], [3], tools=TOOLS)),
        vllm_chat(Turn("title", [9, 9], [8])),  # a title generator: no tools, its own root
    ]
    roles = {rollout.calls[s.leaf].node_id: s.role for rollout in [rollout_of(records)] for s in rollout.sequences}
    assert roles == {"main": "agent", "title": "auxiliary"}


def test_without_any_tool_manifest_roles_follow_trainable_tokens():
    r = rollout_of_tokens([([1], [2]), ([5], [])])
    assert [s.role for s in r.sequences] == ["agent", "auxiliary"]


def test_nothing_trainable_agent_sequence_is_fatal():
    records = [
        vllm_chat(Turn("c0", [1, 2], [3], tools=TOOLS)),
        vllm_chat(Turn("c1", [7], [4], logprobs=[float("nan")], tools=TOOLS)),
    ]
    records[1]["response"]["choices"][0]["logprobs"]["content"][0]["logprob"] = "bad"
    r = rollout_of(records)
    codes = {(f.code, f.node_id) for f in r.findings if f.level == "FATAL"}
    assert ("invalid_logprob", "c1") in codes
    assert ("nothing_trainable", "c1") in codes
