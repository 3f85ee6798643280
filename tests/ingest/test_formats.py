"""One test per input shape (docs/formats.md), built from realistic bodies; every shape of the same
rollout must give the same graph."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
import zstandard

from rollout_graph.ingest.load.files import load_paths
from rollout_graph.reports import export
from tests.support.builders import (
    ROLLOUT,
    SHAPES,
    TOOLS,
    Turn,
    completions,
    jsonl,
    load_records,
    message_only,
    rollout_of,
    vllm_chat,
    write,
)


def graph_signature(rollout):
    calls = rollout.calls
    name = lambda i: None if i is None else calls[i].node_id  # noqa: E731
    return (
        [(c.node_id, name(p)) for c, p in zip(calls, rollout.topology.parents, strict=True)],
        sorted(calls[k].node_id for k in rollout.topology.discarded),
        [(calls[s.leaf].node_id, s.n_trainable) for s in rollout.sequences],
    )


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_token_shape_loads_the_same_rollout(shape):
    rollout = rollout_of([SHAPES[shape](t) for t in ROLLOUT])
    for call, turn in zip(rollout.calls, ROLLOUT, strict=True):
        assert call.node_id == turn.call_id
        assert call.prompt_ids.tolist() == turn.prompt
        assert call.sampled_ids.tolist() == turn.sampled
        assert call.sampled_logprobs.tolist() == turn.logprobs
        assert call.shape.startswith(shape.split("-")[0] if shape != "interception-log" else "interception")
    assert graph_signature(rollout) == (
        [("c0", None), ("c1", "c0"), ("c2", "c0"), ("c3", "c2"), ("t0", None)],
        ["c1"],
        [("c1", 3), ("c3", 5), ("t0", 1)],
    )


def test_vllm_chat_keeps_top_k_messages_params_model_finish_and_usage():
    rollout = rollout_of([vllm_chat(t) for t in ROLLOUT])
    c3 = rollout.calls[3]
    assert c3.top_k.ids.tolist() == [[11, 12]]
    assert c3.top_k.logprobs.tolist() == [[-0.125, -1.625]]
    assert c3.request_messages == [{"role": "user", "content": "hi"}]
    assert c3.tools == TOOLS
    assert c3.requested_params == {"temperature": 1.0}
    assert (c3.model, c3.finish_reason) == ("m", "length")
    assert c3.usage == {"prompt_tokens": 9, "completion_tokens": 1}
    assert c3.response_message["content"] == "ok"
    assert "truncated_turn" in {f.code for f in rollout.findings if f.node_id == "c3"}


def test_token_strings_are_flagged_and_ids_come_from_token_ids():
    rollout = rollout_of([vllm_chat(Turn("c0", [1], [5, 6]), token_text=True)])
    call = rollout.calls[0]
    assert call.sampled_ids.tolist() == [5, 6]
    assert call.token_texts == ["tok5", "tok6"]
    assert "token_strings" in {f.code for f in rollout.findings}


def test_chat_without_token_ids_recovers_them_from_token_id_strings():
    record = vllm_chat(Turn("c0", [1, 2], [7, 8]))
    del record["response"]["choices"][0]["token_ids"]
    assert rollout_of([record]).calls[0].sampled_ids.tolist() == [7, 8]


def test_completions_echo_keeps_the_completion_tail():
    rollout = rollout_of([completions(Turn("c0", [1, 2, 3], [4, 5], logprobs=[-0.5, -0.25]), echo=True)])
    assert rollout.calls[0].sampled_logprobs.tolist() == [-0.5, -0.25]
    assert rollout.trainable[0]


def test_completions_echo_without_token_ids_uses_usage():
    record = completions(Turn("c0", [1, 2, 3], [4, 5], logprobs=[-0.5, -0.25]), echo=True)
    del record["response"]["choices"][0]["token_ids"]
    record["response"]["usage"] = {"completion_tokens": 2}
    call = rollout_of([record]).calls[0]
    assert call.sampled_ids.tolist() == [4, 5]
    assert call.sampled_logprobs.tolist() == [-0.5, -0.25]


def test_n_greater_than_one_becomes_sibling_calls():
    record = vllm_chat(Turn("c0", [1, 2], [3]))
    second = json.loads(json.dumps(record["response"]["choices"][0]))
    second.update(index=1, token_ids=[9])
    second["logprobs"]["content"][0]["token"] = "token_id:9"
    record["response"]["choices"].append(second)
    rollout = rollout_of([record])
    assert [c.node_id for c in rollout.calls] == ["c0", "c0#1"]
    assert [c.sampled_ids.tolist() for c in rollout.calls] == [[3], [9]]
    assert rollout.topology.roots == [0, 1]


def test_message_only_pairs_load_without_tokens():
    rollout = rollout_of([message_only(Turn("c0", None, [], tools=TOOLS))])
    call = rollout.calls[0]
    assert call.shape == "messages-only" and call.prompt_ids is None
    assert "no_prompt_ids" not in {f.code for f in rollout.findings}


def rollout_document(turns: list[Turn], include_discarded: bool = True) -> dict:
    doc = export.rollout_document(rollout_of([vllm_chat(t) for t in turns]), include_discarded=include_discarded)
    doc["validation"] = {"ok": True}
    return doc


def test_rollout_document_rebuilds_the_same_graph(tmp_path):
    doc = rollout_document(ROLLOUT)
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(doc, indent=2))
    loaded = load_paths([path])
    from rollout_graph.pipeline import analyse

    rollout = analyse(loaded.sessions["s1"])
    assert graph_signature(rollout) == graph_signature(rollout_of([vllm_chat(t) for t in ROLLOUT]))
    assert rollout.document["capture_level"] == "tokens"
    assert rollout.document["validation"] == {"ok": True}
    assert not [f for f in rollout.findings if f.code == "document_disagrees"]
    assert {c.shape for c in rollout.calls} == {"rollout-document"}


def test_rollout_document_disagreements_are_reported():
    doc = rollout_document(ROLLOUT)
    doc["sequences"][1]["role"] = "auxiliary"  # the document calls the main line auxiliary
    rollout = rollout_of([doc])
    details = [f.detail for f in rollout.findings if f.code == "document_disagrees"]
    assert details == ["the document's role is 'auxiliary'; ours is 'agent'"]


def test_rollout_document_without_discarded_turns_reports_their_missing_tokens():
    rollout = rollout_of([rollout_document(ROLLOUT, include_discarded=False)])
    c1 = rollout.calls[rollout.index_of("c1")]
    assert c1.prompt_ids is None
    assert "no_prompt_ids" in {f.code for f in rollout.findings if f.node_id == "c1"}


def test_masked_positions_with_logprobs_in_a_document_are_fatal():
    doc = rollout_document(ROLLOUT)
    doc["sequences"][0]["logprobs"][0] = -3.0  # a context position carrying a logprob
    codes = {f.code for f in rollout_of([doc]).findings if f.level == "FATAL"}
    assert "masked_has_logprob" in codes


@pytest.mark.parametrize("compress", ["gz", "zst"])
def test_compressed_files(tmp_path, compress):
    data = jsonl([vllm_chat(t) for t in ROLLOUT])
    path = tmp_path / f"trace.jsonl.{compress}"
    path.write_bytes(gzip.compress(data) if compress == "gz" else zstandard.ZstdCompressor().compress(data))
    loaded = load_paths([path])
    assert loaded.loaded == len(ROLLOUT) and not loaded.skipped


def test_many_sessions_in_one_file_and_default_session_from_file_name(tmp_path):
    records = [vllm_chat(t) for t in ROLLOUT]
    records[4]["session_id"] = "other"
    records[0].pop("session_id")
    records[0]["metadata"] = {"session_id": "s1"}
    loaded = load_records(records)
    assert {sid: len(s.calls) for sid, s in loaded.sessions.items()} == {"s1": 4, "other": 1}
    anon = [vllm_chat(t) for t in ROLLOUT[:1]]
    anon[0].pop("session_id")
    loaded = load_paths([write(tmp_path / "my-run.jsonl", anon)])
    assert list(loaded.sessions) == ["my-run"]


def test_ids_are_held_as_int32_numpy_arrays():
    call = rollout_of([vllm_chat(ROLLOUT[0])]).calls[0]
    assert call.prompt_ids.dtype == np.int32 and call.sampled_ids.dtype == np.int32
