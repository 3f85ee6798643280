"""Each reconciler's rules on small rollouts whose answer can be read off by hand (the oracles in
test_oracles.py / test_nemo_gym_fixtures.py check the same against the frameworks' code)."""

from __future__ import annotations

import numpy as np
import pytest

from rollout_graph.analysis.reconcile import parse_spec, reconcile
from rollout_graph.analysis.reconcile.explain import differences
from rollout_graph.analysis.reconcile.model import DROPPED, QUARANTINED, row_tokens
from rollout_graph.analysis.reconcile.nemo_rl import SpliceError, replace_prefix_tokens
from tests.support.builders import TOOLS, Turn, rollout_of, vllm_chat

SYS = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]


def _rollout(turns):
    return rollout_of([vllm_chat(t) for t in turns])


def test_trl_realigns_a_small_drift_and_forks_a_large_one():
    # c1 replays c0's reply [4, 5] as [4, 9]: a drift of one token inside the last answer
    turns = [Turn("c0", [1, 2, 3], [4, 5]), Turn("c1", [1, 2, 3, 4, 9, 6], [7])]
    rollout = _rollout(turns)
    result = reconcile(rollout, "trl")
    (row,) = result.rows
    t = row_tokens(rollout, row)
    assert t.input_ids.tolist() == [1, 2, 3, 4, 9, 6, 7]
    assert t.loss_mask.tolist() == [0, 0, 0, 1, 0, 0, 1]  # the sampled 5 is gone, 9 is context
    assert result.fates[0].n_trained == 1 and result.notes["tally"]["realign"] == 1
    forked = reconcile(rollout, "trl", fork_threshold_tokens=1)
    assert len(forked.rows) == 2 and forked.notes["tally"]["fork"] == 1
    assert forked.summary()["n_dropped_tokens"] == 0  # a fork keeps the earlier row whole


def test_trl_builds_nothing_when_a_turn_has_no_logprobs():
    records = [vllm_chat(Turn("c0", [1, 2, 3], [4, 5])), vllm_chat(Turn("c1", [1, 2, 3, 4, 5, 6], [7]))]
    del records[1]["response"]["choices"][0]["logprobs"]  # an engine asked for no logprobs
    rollout = rollout_of(records)
    result = reconcile(rollout, "trl")
    assert result.rows == [] and "logprobs must contain one entry per token" in result.error
    assert all(f.status == DROPPED for f in result.fates)


def test_nemo_gym_quarantines_the_child_of_identical_calls():
    turns = [
        Turn("c0", [1, 2, 3], [4, 5], tools=TOOLS),
        Turn("c1", [1, 2, 3], [4, 5], tools=TOOLS),  # the same prompt and the same sample: twins
        Turn("c2", [1, 2, 3, 4, 5, 6], [7], tools=TOOLS),
    ]
    rollout = _rollout(turns)
    result = reconcile(rollout, "nemo-gym")
    assert [rollout.calls[k].node_id for k in result.quarantined] == ["c2", "c1"]
    assert result.fates[2].status == QUARANTINED and result.notes["mask_sample"]
    assert result.notes["unresolved_retries"] == ["c0", "c1"]  # only a child not quarantined resolves a retry
    assert any("quarantines c2" in d["sentence"] for d in differences(rollout, result))


def test_openenv_labels_a_discarded_retry_and_does_not_train_it():
    turns = [
        Turn("c0", [1, 2, 3], [4], tools=TOOLS),
        Turn("c1", [1, 2, 3], [5], tools=TOOLS),
        Turn("c2", [1, 2, 3, 5, 6], [7], tools=TOOLS),
    ]
    rollout = _rollout(turns)
    result = reconcile(rollout, "openenv")
    assert [(r.row_id, r.label, r.trained) for r in result.rows] == [("c0", "discarded", False), ("c2", "agent", True)]
    assert result.summary()["n_dropped_tokens"] == 1


def test_verifiers_splits_on_a_changed_tool_call_id_with_the_same_ids():
    call = {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    reply = {"role": "assistant", "content": "ok", "tool_calls": [call]}
    again = {**reply, "tool_calls": [{**call, "id": "call_1x"}]}
    turns = [
        Turn("c0", [1, 2, 3], [4, 5], messages=SYS, tools=TOOLS),
        Turn(
            "c1",
            [1, 2, 3, 4, 5, 6],
            [7],
            messages=[*SYS, again, {"role": "tool", "tool_call_id": "call_1x", "content": "r"}],
            tools=TOOLS,
        ),
    ]
    records = [vllm_chat(t) for t in turns]
    records[0]["response"]["choices"][0]["message"] = reply
    rollout = rollout_of(records)
    assert rollout.topology.parents[1] == 0  # the exact graph links them: the ids continue
    result = reconcile(rollout, "verifiers")
    assert len(result.rows) == 2 and all(r.trained for r in result.rows)
    assert [e[0] for e in result.events] == ["split"]
    t = row_tokens(rollout, result.rows[1])
    assert t.input_ids.tolist() == [1, 2, 3, 4, 5, 6, 7] and t.loss_mask.tolist() == [0, 0, 0, 0, 0, 0, 1]


def test_replace_prefix_tokens_as_its_docstring_example():
    model = np.array([11, 12, 13, 40, 41, 220, 17, 2])
    template = np.array([11, 12, 13, 40, 41, 1001, 2, 21, 22, 40, 41])
    cut, start = replace_prefix_tokens(2, model, 1, template)
    assert np.concatenate([model[:cut], template[start:]]).tolist() == [11, 12, 13, 40, 41, 220, 17, 2, 21, 22, 40, 41]
    with pytest.raises(SpliceError, match="EOS token #3 not found"):
        replace_prefix_tokens(2, model, 3, template)


def test_specs_name_what_they_know():
    assert parse_spec("trl,nemo-gym:builder=per_request") == [("trl", {}), ("nemo-gym", {"builder": "per_request"})]
    assert [name for name, _ in parse_spec("all")] == ["trl", "nemo-gym", "verifiers", "openenv", "nemo-rl"]
    with pytest.raises(ValueError, match="must be int"):
        parse_spec("trl:fork_threshold_tokens=many")
    with pytest.raises(ValueError, match="unknown framework"):
        parse_spec("slime")
