"""What the frameworks' capture layers write, read back (docs/formats.md): NeMo Gym's TokenEntry
records and its rollout records with ``ng_model_call_capture``, and the rLLM gateway's trace
records, each written by the real writer (tests/reconcile/fixtures/*/README.md). Every call of the
source sessions comes back with the same ids, logprobs, messages and reply, and the lens reads
the same rows from it."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pytest

import rollout_graph as rg
from rollout_graph.analysis.reconcile import reconcile
from rollout_graph.analysis.reconcile.nemo_gym import capturable
from tests.reconcile.sessions import generate, write

ROOT = Path(__file__).resolve().parents[2]


FIXTURES = Path(__file__).with_name("fixtures")
SESSIONS = [f"gen-{seed}" for seed in range(12)] + ["list-todos"]


def source(session: str):
    if session == "list-todos":
        return rg.load(ROOT / "sample_traces" / "vllm")["list-todos"]
    seed = int(session.split("-")[1])
    with tempfile.TemporaryDirectory() as folder:
        (rollout,) = rg.load(write(generate(seed, 4 + seed % 8, session=session), Path(folder) / "s.jsonl")).values()
    return rollout


def _same(read, expected, framework: str) -> None:
    """The lens reads the same counts (the error's wording names the calls by their ids)."""
    a, b = reconcile(read, framework).summary(), reconcile(expected, framework).summary()
    assert (a.pop("error") is None) == (b.pop("error") is None)
    assert a == b


def _same_calls(read, expected, messages: bool, only=None) -> None:
    wanted = expected.calls if only is None else only
    assert len(read.calls) == len(wanted)
    for got, want in zip(read.calls, wanted, strict=True):
        assert (got.prompt_ids is None) == (want.prompt_ids is None)
        if want.prompt_ids is not None:
            assert np.array_equal(got.prompt_ids, want.prompt_ids)
        assert np.array_equal(got.sampled_ids, want.sampled_ids)
        if want.logprobs_aligned:
            assert np.allclose(got.sampled_logprobs, want.sampled_logprobs, atol=1e-6)
        assert (got.response_message or {}).get("content") == (want.response_message or {}).get("content")
        assert got.finish_reason in (want.finish_reason, None)
        if messages:
            assert got.request_messages == want.request_messages
            assert got.tools == want.tools


@pytest.fixture(scope="module")
def token_entries():
    return rg.load(FIXTURES / "nemo_gym_capture" / "tokens")


@pytest.fixture(scope="module")
def rollout_records():
    return rg.load(FIXTURES / "nemo_gym_capture" / "rollouts.jsonl")


@pytest.fixture(scope="module")
def gateway():
    return rg.load(FIXTURES / "rllm_gateway" / "traces.jsonl")


@pytest.mark.parametrize("session", SESSIONS)
def test_nemo_gym_token_entries_read_back(token_entries, session):
    expected = source(session)
    if all(c.prompt_ids is None for c in expected.calls):
        assert session not in token_entries  # nothing was recorded: the capture was marked incomplete
        return
    read = token_entries[session]
    assert token_entries.report.skipped == []
    recorded = [c for c in expected.calls if capturable(c)]  # a call without logprobs is not recorded
    _same_calls(read, expected, messages=False, only=recorded)
    assert {c.shape for c in read.calls} == {"nemo-gym-token-entry"}
    if len(recorded) == len(expected.calls):  # what Gym's builder delivers is the same from either
        _same(read, expected, "nemo-gym")


@pytest.mark.parametrize("session", SESSIONS)
def test_nemo_gym_rollout_records_read_back(rollout_records, session):
    read = rollout_records[session]
    expected = source(session)
    _same_calls(read, expected, messages=True)
    assert read.stats["n_roots"] == expected.stats["n_roots"]
    for framework in ("trl", "openenv", "verifiers"):
        _same(read, expected, framework)


@pytest.mark.parametrize("session", SESSIONS)
def test_rllm_gateway_trace_records_read_back(gateway, session):
    read = gateway[session]
    expected = source(session)
    _same_calls(read, expected, messages=True)
    for call in read.calls:
        assert call.timing["ended_at"] >= call.timing["started_at"]
    _same(read, expected, "trl")


def test_a_newer_token_entry_is_refused_naming_it(tmp_path):
    line = json.loads((FIXTURES / "nemo_gym_capture" / "tokens" / "gen-0.tokens.jsonl").read_text().splitlines()[0])
    path = tmp_path / "gen-0.tokens.jsonl"
    path.write_text(json.dumps({**line, "schema_version": 2}) + "\n" + json.dumps(line) + "\n")
    loaded = rg.load(path)
    (skipped,) = loaded.report.skipped
    assert skipped.line == 1 and "schema_version 2" in skipped.reason
    assert len(next(iter(loaded.values())).calls) == 1  # every other record still loads


def test_a_capture_without_payloads_says_why(tmp_path):
    record = json.loads((FIXTURES / "nemo_gym_capture" / "rollouts.jsonl").read_text().splitlines()[0])
    for call in record["ng_model_call_capture"]["calls"]:
        call.pop("request"), call.pop("response")
    path = tmp_path / "rollouts.jsonl"
    path.write_text(json.dumps(record) + "\n")
    loaded = rg.load(path)
    (skipped,) = loaded.report.skipped
    assert skipped.line == 1 and "include_payloads" in skipped.reason
