"""Bad input never stops a load: every skipped record is reported with file, line and reason,
degraded records load with findings, and records == loaded + skipped."""

from __future__ import annotations

import gzip

from rollout_graph.ingest.load.files import load_paths
from tests.support.builders import Turn, jsonl, load_records, rollout_of, vllm_chat, write

GOOD = [vllm_chat(Turn("c0", [1, 2], [3])), vllm_chat(Turn("c1", [1, 2, 3, 4], [5]))]


def balanced(loaded):
    return loaded.records == loaded.loaded + len(loaded.skipped)


def test_unparseable_and_unknown_lines_are_skipped_with_line_and_reason():
    records = [GOOD[0], "{not json", [1, 2], {"hello": "world"}, "", GOOD[1]]
    loaded = load_records(records, name="bad.jsonl")
    assert balanced(loaded)
    assert loaded.loaded == 2
    reasons = {s.line: s.reason for s in loaded.skipped}
    assert set(reasons) == {2, 3, 4}
    assert reasons[2].startswith("not JSON")
    assert reasons[3] == "a JSON list, not an object"
    assert reasons[4] == "unknown record shape (keys: hello)"
    assert all(s.file == "bad.jsonl" for s in loaded.skipped)
    # The good records around the bad ones still link.
    r = rollout_of([GOOD[0], "{not json", GOOD[1]])
    assert r.topology.parents == [None, 0]


def test_failed_calls_and_empty_choices_are_reported():
    failed = {"request": {"messages": []}, "response": {"error": {"message": "upstream timeout"}}}
    empty = {"request": {}, "response": {"choices": []}}
    not_object = {"request": {}, "response": "oops"}
    loaded = load_records([failed, empty, not_object])
    assert [s.reason for s in loaded.skipped] == [
        "call failed, no model output: {'message': 'upstream timeout'}",
        "response.choices is empty or not a list of objects",
        "response is str, not an object",
    ]
    assert balanced(loaded)


def test_invalid_token_ids_degrade_to_fatal_findings():
    record = vllm_chat(Turn("c0", [1, 2], [3, 4]))
    record["response"]["prompt_token_ids"] = [1, -2, "x", True, 2.5]
    r = rollout_of([record])
    call = r.calls[0]
    assert call.prompt_ids.tolist() == [1, -1, -1, -1, -1]
    fatal = [f for f in r.findings if f.code == "invalid_token_id"]
    assert len(fatal) == 1 and "prompt_token_ids[1] = -2 (4 positions)" in fatal[0].detail
    assert not r.trainable[0]


def test_boolean_token_ids_are_caught_even_though_numpy_reads_them_as_one():
    record = vllm_chat(Turn("c0", [1, 2], [3]))
    record["response"]["prompt_token_ids"] = [1, True]
    assert "invalid_token_id" in {f.code for f in rollout_of([record]).findings}


def test_invalid_and_positive_logprobs_are_fatal():
    record = vllm_chat(Turn("c0", [1], [3, 4, 5]))
    content = record["response"]["choices"][0]["logprobs"]["content"]
    content[0]["logprob"] = None
    content[1]["logprob"] = True
    content[2]["logprob"] = 0.5
    codes = [f.code for f in rollout_of([record]).findings if f.level == "FATAL"]
    assert codes == ["invalid_logprob", "positive_logprob"]


def test_nan_and_infinity_literals_load_as_invalid_logprobs():
    line = jsonl([vllm_chat(Turn("c0", [1], [3]))]).decode().replace('"logprob": -0.5', '"logprob": NaN', 1)
    r = rollout_of([line.strip()])
    assert "invalid_logprob" in {f.code for f in r.findings}


def test_fields_of_the_wrong_type_degrade_with_a_warning():
    record = vllm_chat(Turn("c0", [1], [3]))
    record["request"]["messages"] = "not a list"
    record["request"]["tools"] = {"not": "a list"}
    r = rollout_of([record])
    details = [f.detail for f in r.findings if f.code == "malformed_field"]
    assert details == ["request.messages is a str, not a list", "tools is a dict, not a list"]
    assert r.calls[0].request_messages is None


def test_duplicate_node_ids_are_renamed_not_lost():
    loaded = load_records([GOOD[0], GOOD[0]])
    ids = [c.node_id for c in loaded.sessions["s1"].calls]
    assert ids == ["c0", "c0~trace.jsonl:2"]
    assert loaded.sessions["s1"].calls[1].issues[0].code == "duplicate_node_id"


def test_truncated_gzip_keeps_what_was_read(tmp_path):
    data = gzip.compress(jsonl(GOOD * 50))
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(data[: len(data) // 2])
    loaded = load_paths([path])
    assert loaded.loaded > 0
    assert balanced(loaded)
    assert "stream stopped after line" in loaded.skipped[-1].reason


def test_unreadable_file_is_a_skipped_record_and_others_still_load(tmp_path):
    good = write(tmp_path / "good.jsonl", GOOD)
    loaded = load_paths([tmp_path / "missing.jsonl", good])
    assert loaded.loaded == 2
    assert loaded.skipped[0].line == 0 and "cannot read file" in loaded.skipped[0].reason
    assert balanced(loaded)


def test_rollout_document_with_broken_turns():
    doc = {
        "session_id": "d",
        "turns": [7, {"node_id": "a", "n_prompt": 2, "n_sampled": 1}],
        "sequences": [{"node_ids": ["a"], "input_ids": [1, 2, 3], "loss_mask": [0, 0, 1], "logprobs": [0, 0, -0.5]}],
    }
    loaded = load_records([doc])
    assert balanced(loaded)
    assert loaded.skipped[0].reason == "turns[0] is not an object (int)"
    call = loaded.sessions["d"].calls[0]
    assert call.prompt_ids.tolist() == [1, 2] and call.sampled_logprobs.tolist() == [-0.5]
