"""What we write is what OpenEnv's trainer accepts: ``export --format trace-entries`` passes
OpenEnv 0.10's ``TrainingTrace.from_entries`` unchanged and ``--format openenv-training-trace``
its ``TrainingTrace.model_validate``, run by OpenEnv's own code (tests/conformance/oracle_worker.py)
on the bundled samples, the real-harness samples, the writers' fixtures and random sessions
(docs/cli.md, "Trace entries: what OpenEnv's trainer accepts")."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rollout_graph.ingest.load.files import load_paths
from rollout_graph.pipeline import analyse
from rollout_graph.reports import export
from tests.conformance.writers import FIXTURES, ROOT
from tests.support.builders import TOOLS, Turn, examples, harness_traces, rollout_of, vllm_chat

SAMPLES = ROOT / "sample_traces"
INPUTS = [SAMPLES / "vllm", SAMPLES / "harnesses", FIXTURES / "openenv", FIXTURES / "verifiers"]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rollout_graph", *args], capture_output=True, text=True)


def by_session(entries: list[dict]) -> dict[str, list[dict]]:
    grouped = defaultdict(list)
    for entry in entries:
        grouped[entry["metadata"]["session_id"]].append(entry)
    return grouped


@pytest.mark.parametrize("source", INPUTS, ids=lambda p: p.name)
def test_exported_trace_entries_pass_openenvs_from_entries(openenv_oracle, tmp_path, source):
    out = tmp_path / "entries.jsonl"
    done = cli("export", str(source), "--format", "trace-entries", "--out", str(out), "--no-cache")
    assert done.returncode == 0, done.stderr
    entries = [json.loads(line) for line in out.read_text().splitlines()]
    assert entries, "nothing exported"
    for session, group in by_session(entries).items():
        answer = openenv_oracle.run({"op": "entries", "entries": group})
        assert answer["ok"], f"{session}: {answer.get('error')}"
        assert answer["node_ids"] == [e["metadata"]["node_id"] for e in group]
    for entry in entries:
        n_prompt = len(entry["prompt_token_ids"])
        assert len(entry["loss_mask"]) == n_prompt + len(entry["completion_token_ids"])
        assert entry["loss_mask"][n_prompt:] == entry["completion_loss_mask"]  # the deprecated alias
        meta = entry["metadata"]
        assert {"sampling_params", "requested_sampling_params", "n_tools", "model", "node_id"} <= set(meta)
        assert isinstance(entry["request"]["messages"], list)


@pytest.mark.parametrize("source", INPUTS, ids=lambda p: p.name)
def test_exported_training_traces_are_what_openenv_validates_and_dumps(openenv_oracle, tmp_path, source):
    out = tmp_path / "traces.jsonl"
    done = cli("export", str(source), "--format", "openenv-training-trace", "--out", str(out), "--no-cache")
    assert done.returncode == 0, done.stderr
    lines = out.read_text().splitlines()
    assert lines
    for line in lines:
        trace = json.loads(line)
        answer = openenv_oracle.run({"op": "trace", "trace": trace})
        assert answer["ok"], answer.get("error")
        assert answer["same_dump"] and answer["turns"] == len(trace["turns"])


def test_the_old_completion_only_mask_is_what_openenv_refused(openenv_oracle):
    rollout = analyse(load_paths([SAMPLES / "vllm"]).sessions["list-todos"])
    entries = export.trace_entries(rollout)
    old = [{**e, "loss_mask": e["completion_loss_mask"]} for e in entries]
    answer = openenv_oracle.run({"op": "entries", "entries": old})
    assert not answer["ok"] and "length_mismatch" in answer["error"]
    assert openenv_oracle.run({"op": "entries", "entries": entries})["ok"]


def test_calls_openenv_would_refuse_are_left_out_and_named(openenv_oracle, tmp_path):
    turns = [
        Turn("a", [1, 2], [3, 4], tools=TOOLS),
        Turn("b", [1, 2, 3, 4, 5], [6, 7], logprobs=[-0.5, 0.75], tools=TOOLS),  # positive: FATAL, masked
        Turn("c", [1, 2, 3, 4, 5, 6, 7, 8], [9], tools=TOOLS),
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(vllm_chat(t)) + "\n" for t in turns))
    out = tmp_path / "entries.jsonl"
    done = cli("export", str(path), "--format", "trace-entries", "--out", str(out), "--no-cache")
    assert done.returncode == 0, done.stderr
    entries = [json.loads(line) for line in out.read_text().splitlines()]
    assert [e["call_id"] for e in entries] == ["a", "c"]
    assert "1 agent call(s) left out" in done.stderr and "s1/b: positive logprobs" in done.stderr
    assert openenv_oracle.run({"op": "entries", "entries": entries})["ok"]


def test_the_training_trace_format_is_jsonl_only(tmp_path):
    done = cli(
        "export", str(SAMPLES / "vllm"), "--format", "openenv-training-trace", "--out", str(tmp_path / "t.parquet")
    )
    assert done.returncode == 2 and "written as JSONL" in done.stderr


@st.composite
def generated(draw):
    spec = [(p, s) for p, s in draw(harness_traces()) if p]
    turns = []
    for i, (prompt, sampled) in enumerate(spec):
        logprobs = draw(
            st.one_of(
                st.lists(st.floats(-5, 0, allow_nan=False), min_size=len(sampled), max_size=len(sampled)),
                st.lists(st.floats(-5, 2, allow_nan=False), min_size=len(sampled), max_size=len(sampled)),
            )
        )
        turns.append(Turn(f"n{i}", prompt, sampled, logprobs, tools=TOOLS if draw(st.booleans()) else None))
    return turns


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(generated())
def test_every_generated_rollout_exports_entries_openenv_accepts(openenv_oracle, turns):
    if not turns:
        return
    rollout = rollout_of([vllm_chat(t) for t in turns])
    left_out: list[str] = []
    entries = list(export.iter_trace_entries(rollout, left_out=left_out))
    assert len(entries) + len(left_out) == sum(
        1 for i, c in enumerate(rollout.calls) if rollout.node_roles[i] == "agent" and c.prompt_ids is not None
    )
    if entries:
        answer = openenv_oracle.run({"op": "entries", "entries": entries})
        assert answer["ok"], answer.get("error")
    trace = export.training_trace(rollout)
    assert (trace is None) == (not entries)
    if trace is not None:
        assert openenv_oracle.run({"op": "trace", "trace": json.loads(json.dumps(trace))})["same_dump"]


def test_the_inputs_exist():
    for source in INPUTS:
        assert Path(source).exists(), source
