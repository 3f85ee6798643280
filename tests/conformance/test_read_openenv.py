"""Every file OpenEnv 0.10's own code writes (tests/fixtures/writers/openenv/, made by
tools/make_writer_fixtures.py) opens exactly: OpenEnv's ids, roots, parents, discards, roles,
rows, messages, sampling params and validation, compared with the file itself, never restated
(docs/formats.md, "Rollout documents" and "OpenEnv files")."""

from __future__ import annotations

import json

import pytest

from rollout_graph.ingest.formats.fidelity import rollout_grade
from rollout_graph.ingest.load.files import load_paths
from rollout_graph.pipeline import analyse
from rollout_graph.reports import export
from tests.conformance.writers import FIXTURES

OPENENV = FIXTURES / "openenv"


def opened(path):
    loaded = load_paths([path])
    assert loaded.skipped == [], loaded.skipped
    return {sid: analyse(s) for sid, s in loaded.sessions.items()}


def document(name: str) -> dict:
    return json.loads((OPENENV / name).read_text())


def root_of(rollout, k: int) -> str:
    parents = rollout.topology.parents
    while parents[k] is not None:
        k = parents[k]
    return rollout.calls[k].node_id


def codes(rollout, level=None) -> list[str]:
    return [f.code for f in rollout.findings if level is None or f.level == level]


@pytest.mark.parametrize("name", ["rollout.default.json", "rollout.full.json"])
def test_a_rollout_document_opens_with_openenvs_own_graph(name):
    doc = document(name)
    (rollout,) = opened(OPENENV / name).values()
    assert rollout.session_id == doc["session_id"]
    assert [c.node_id for c in rollout.calls] == [t["node_id"] for t in doc["turns"]]
    stats = rollout.stats
    for key in ("n_turns", "n_roots", "n_leaves", "n_forks", "n_discarded"):
        assert stats[key] == doc["stats"][key], key
    discarded = {rollout.calls[k].node_id for k in rollout.topology.discarded}
    assert discarded == {t["node_id"] for t in doc["turns"] if t["discarded"]}
    assert [root_of(rollout, k) for k in range(len(rollout.calls))] == [t["root_id"] for t in doc["turns"]]
    # every row the document holds, token for token, with its role
    ours = {rollout.calls[s.leaf].node_id: s for s in rollout.sequences}
    for row in doc["sequences"]:
        seq = ours[row["node_ids"][-1]]
        tokens = rollout.tokens(seq)
        assert [rollout.calls[k].node_id for k in seq.nodes] == row["node_ids"]
        assert seq.role == row["role"]
        assert tokens.input_ids.tolist() == row["input_ids"]
        assert tokens.loss_mask.tolist() == row["loss_mask"]
        assert tokens.logprobs.tolist() == row["logprobs"]
    assert "document_disagrees" not in codes(rollout) and codes(rollout, "FATAL") == []
    assert rollout_grade(rollout.calls) == "tokens+logprobs"
    # the sampling params OpenEnv records: the proxy submitted top_p 1.0 for the harness's 0.95
    for call, turn in zip(rollout.calls, doc["turns"], strict=True):
        assert call.requested_params == turn["requested_sampling_params"]
        assert call.submitted_params == turn["sampling_params"]
    neutralised = [f for f in rollout.findings if f.code == "sampling_neutralised"]
    assert len(neutralised) == len(doc["turns"]) and all("top_p 0.95 -> 1.0" in f.detail for f in neutralised)
    assert rollout.document["validation"] == doc["validation"]
    # a turn no row holds (the default export leaves discarded rows out) says so, not no_prompt_ids
    omitted = {t["node_id"] for t in doc["turns"]} - {n for row in doc["sequences"] for n in row["node_ids"]}
    assert {f.node_id for f in rollout.findings if f.code == "document_omits_tokens"} == omitted


def test_the_full_document_carries_messages_tools_and_the_title_call_is_auxiliary():
    doc = document("rollout.full.json")
    (rollout,) = opened(OPENENV / "rollout.full.json").values()
    for call, turn in zip(rollout.calls, doc["turns"], strict=True):
        assert call.request_messages == turn["request_messages"]
        assert call.tools == turn["request_tools"]
        assert call.response_message == turn["response_message"]
        assert call.sampled_logprobs.tolist() == turn["sampled_logprobs"]
    title = next(k for k, t in enumerate(doc["turns"]) if t["n_tools"] == 0)
    assert rollout.node_roles[title] == "auxiliary"
    assert rollout.calls[title].request_messages[0]["content"] == "Generate a short title."


def test_without_messages_the_title_call_is_auxiliary_by_openenvs_n_tools():
    doc = document("rollout.default.json")
    (rollout,) = opened(OPENENV / "rollout.default.json").values()
    title = next(k for k, t in enumerate(doc["turns"]) if t["n_tools"] == 0)
    assert rollout.calls[title].tools is None and rollout.node_roles[title] == "auxiliary"


def test_an_eval_document_is_graded_messages_and_links_by_its_messages():
    doc = document("rollout.eval.json")
    assert doc["capture_level"] == "text"
    (rollout,) = opened(OPENENV / "rollout.eval.json").values()
    assert rollout_grade(rollout.calls) == "messages"
    assert all(c.prompt_ids is None for c in rollout.calls)
    assert "no_sampled_ids" not in codes(rollout) and "no_prompt_ids" not in codes(rollout)
    for key in ("n_turns", "n_roots", "n_leaves", "n_forks", "n_discarded"):
        assert rollout.stats[key] == doc["stats"][key], key
    assert [root_of(rollout, k) for k in range(len(rollout.calls))] == [t["root_id"] for t in doc["turns"]]
    roles = {rollout.calls[s.leaf].node_id: s.role for s in rollout.sequences}
    assert all(roles[row["node_ids"][-1]] == row["role"] for row in doc["sequences"])
    assert "document_disagrees" not in codes(rollout)


def entries_agree(calls, entries) -> None:
    assert [c.node_id for c in calls] == [e["metadata"]["node_id"] for e in entries]
    for call, entry in zip(calls, entries, strict=True):
        assert call.prompt_ids.tolist() == entry["prompt_token_ids"]
        assert call.sampled_ids.tolist() == entry["completion_token_ids"]
        assert call.sampled_logprobs.tolist() == entry["per_token_logps"]
        assert call.request_messages == entry["request"]["messages"]
        assert call.tools == entry["request"]["tools"]
        assert call.submitted_params == entry["metadata"]["sampling_params"]
        assert call.requested_params == entry["metadata"]["requested_sampling_params"]
        assert call.claims["loss_mask"] == entry["loss_mask"][len(entry["prompt_token_ids"]) :]


def test_the_trace_entries_route_body_opens_as_its_session_named_by_openenvs_node_ids():
    body = document("trace_entries.route.json")
    rollouts = opened(OPENENV / "trace_entries.route.json")
    assert list(rollouts) == [body["session_id"]]
    rollout = rollouts[body["session_id"]]
    entries_agree(rollout.calls, body["entries"])
    assert rollout_grade(rollout.calls) == "tokens+logprobs" and codes(rollout, "FATAL") == []
    # the same graph as the document's agent calls
    full = document("rollout.full.json")
    agent = [n for row in full["sequences"] if row["role"] == "agent" for n in row["node_ids"]]
    assert {c.node_id for c in rollout.calls} == set(agent)


@pytest.mark.parametrize("name", ["to_trace_entries.json", "training_trace.json"])
def test_trace_entries_and_the_training_trace_open_alike(name):
    raw = document(name)
    entries = (
        raw
        if isinstance(raw, list)
        else [{**t, "metadata": {**t["metadata"], "node_id": t["node_id"]}} for t in raw["turns"]]
    )
    (rollout,) = opened(OPENENV / name).values()
    entries_agree(rollout.calls, entries)
    assert rollout.stats["n_forks"] == 1 and rollout.stats["n_roots"] == 1


@pytest.mark.parametrize("path", ["harbor/contract.json", "harbor/rollout-out.json", "harbor/runs"])
def test_harbors_contract_result_and_run_record_open_with_their_reward(path):
    raw = json.loads((OPENENV / "harbor" / "rollout-out.json").read_text())[0]
    rollouts = opened(OPENENV / path)
    assert list(rollouts) == [raw["session_id"]]
    rollout = rollouts[raw["session_id"]]
    assert [c.node_id for c in rollout.calls] == [t["node_id"] for t in raw["turns"]]
    for call, turn in zip(rollout.calls, raw["turns"], strict=True):
        assert call.prompt_ids.tolist() == turn["prompt_token_ids"]
        assert call.sampled_ids.tolist() == turn["completion_token_ids"]
        assert call.sampled_logprobs.tolist() == turn["per_token_logps"]
        assert call.submitted_params == turn["sampling_params"]
        assert call.response_message["content"] == turn["text"]
    assert rollout.signals is not None and rollout.signals.reward == raw["reward"]
    assert rollout_grade(rollout.calls) == "tokens+logprobs"


def test_a_run_record_without_a_result_is_one_named_skip(tmp_path):
    record = json.loads(next((OPENENV / "harbor" / "runs").glob("*.json")).read_text())
    record.update(result=None, status="failed", error="sandbox did not start")
    (tmp_path / "run.json").write_text(json.dumps(record))
    loaded = load_paths([tmp_path])
    (skip,) = loaded.skipped
    assert "run record with no result" in skip.reason and "sandbox did not start" in skip.reason


def test_trace_entries_exported_from_a_document_carry_its_messages_and_sampling_params():
    doc = document("rollout.full.json")
    (rollout,) = opened(OPENENV / "rollout.full.json").values()
    turns = {t["node_id"]: t for t in doc["turns"]}
    entries = export.trace_entries(rollout)
    assert entries
    for entry in entries:
        turn = turns[entry["metadata"]["node_id"]]
        assert entry["request"]["messages"] == turn["request_messages"]
        assert entry["metadata"]["sampling_params"] == turn["sampling_params"]
        assert entry["metadata"]["requested_sampling_params"] == turn["requested_sampling_params"]
        assert entry["metadata"]["n_tools"] == turn["n_tools"]
    # the same calls, tokens and logprobs as OpenEnv's own to_trace_entries
    theirs = {e["metadata"]["node_id"]: e for e in document("to_trace_entries.json")}
    assert {e["metadata"]["node_id"] for e in entries} == set(theirs)
    for entry in entries:
        other = theirs[entry["metadata"]["node_id"]]
        for key in ("prompt_token_ids", "completion_token_ids", "per_token_logps", "loss_mask"):
            assert entry[key] == other[key], key
