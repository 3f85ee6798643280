"""The bundled sample traces: real SmolLM2 output with the promised structure, three variants of
the main rollout that give the same graph, and the bundled tokenizer found from the model name."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rollout_graph.analysis.decode import BUNDLED, decoder_for
from rollout_graph.ingest.load.files import load_paths
from rollout_graph.pipeline import analyse

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


@pytest.fixture(scope="module")
def loaded():
    return load_paths([SAMPLES])


@pytest.fixture(scope="module")
def main(loaded):
    return analyse(loaded.sessions["fix-config-bug"])


def edges(rollout):
    return [
        (c.node_id, None if p is None else rollout.calls[p].node_id)
        for c, p in zip(rollout.calls, rollout.topology.parents, strict=True)
    ]


def test_every_sample_loads_cleanly(loaded):
    assert not loaded.skipped
    harnesses = {p.name.removesuffix(".jsonl.gz") for p in (SAMPLES / "harnesses").glob("*.jsonl.gz")}
    expected = {"fix-config-bug", "fix-config-bug.eval", "fix-config-bug.openenv", "list-todos"}
    assert set(loaded.sessions) == expected | harnesses  # a real-harness trace is one rollout named after it


@pytest.mark.parametrize("session", ["fix-config-bug", "list-todos"])
def test_each_rollout_has_the_promised_structure(loaded, session):
    rollout = analyse(loaded.sessions[session])
    calls, topo = rollout.calls, rollout.topology
    root_messages = {calls[r].node_id: calls[r].request_messages for r in topo.roots}
    systems = {calls[r].node_id: root_messages[calls[r].node_id][0]["content"] for r in topo.roots}
    # a title generator: its own root, no tools, a low temperature
    title = [r for r in topo.roots if systems[calls[r].node_id].startswith("Write a title")]
    assert len(title) == 1 and not calls[title[0]].has_tools and calls[title[0]].requested_params["temperature"] == 0.3
    # a subagent with its own system prompt
    assert any(s.startswith("You are a careful code reviewer") for s in systems.values())
    # the resampled first call: a duplicate-prompt root that was discarded
    assert any(r in topo.discarded for r in topo.roots)
    # a context compaction: a new root whose history is a summary
    assert any("Summary of earlier work" in m[-1]["content"] for m in root_messages.values())
    # retries after malformed tool calls: discarded children of forks
    assert any(topo.parents[d] is not None for d in topo.discarded)
    # truncated turns
    assert any(c.finish_reason == "length" for c in calls)
    # concurrent calls recorded out of order: arrival order is not the order the calls were made in
    made = [(c.timing["started_at"], c.node_id) for c in calls]
    assert made != sorted(made)
    assert rollout.finding_counts["FATAL"] == 0


def test_the_main_rollout_is_the_long_one(main):
    assert len(main.calls) >= 20
    assert len([r for r in main.topology.roots if r in main.topology.discarded]) == 2


def test_samples_are_real_model_output_with_top5(main):
    for call in main.calls:
        assert call.model == "HuggingFaceTB/SmolLM2-135M-Instruct"
        assert call.top_k is not None and call.top_k.ids.shape == (call.n_sampled, 5)
        assert call.logprobs_aligned and np.all(call.sampled_logprobs <= 0)
        # a sampled token at least as likely as the fifth alternative is among the alternatives
        likely = call.sampled_logprobs >= call.top_k.logprobs[:, -1].astype(np.float64) + 1e-4
        in_top = (call.top_k.ids == call.sampled_ids[:, None]).any(axis=1)
        assert np.all(in_top[likely])
        assert call.submitted_params["temperature"] == call.requested_params["temperature"]


def test_three_variants_give_the_same_graph(loaded, main):
    document = analyse(loaded.sessions["fix-config-bug.openenv"])
    messages = analyse(loaded.sessions["fix-config-bug.eval"])
    assert edges(document) == edges(main) == edges(messages)
    assert document.topology.discarded == main.topology.discarded
    assert [s.n_trainable for s in document.sequences] == [s.n_trainable for s in main.sequences]
    assert not [f for f in document.findings if f.code == "document_disagrees"]
    # message-only roots carry no token ids, so duplicate-prompt roots never group (docs/semantics.md, "Discarded")
    roots_discarded = {i for i in main.topology.discarded if main.topology.parents[i] is None}
    assert messages.topology.discarded == {k: v for k, v in main.topology.discarded.items() if k not in roots_discarded}


def test_bundled_tokenizer_is_found_and_decodes_the_model_output(main):
    decoder = decoder_for(main.calls)
    assert decoder.source == BUNDLED
    for call in main.calls:
        text = decoder.text(call.sampled_ids)
        expected = call.response_message["content"] + ("<|im_end|>" if call.finish_reason == "stop" else "")
        assert text == expected
        assert decoder.text(call.prompt_ids).startswith("<|im_start|>system\n")


def test_decode_transcript_from_the_command_line():
    import subprocess
    import sys

    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "graph",
            "inspect",
            str(SAMPLES / "vllm"),
            "--session",
            "fix-config-bug",
            "--decode",
            "--node",
            "c09",
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert "sequence to c09 (auxiliary, 2 calls" in out.stdout
    assert "decoded with" in out.stdout and "(bundled sample_traces)" in out.stdout
    assert "You are a careful code reviewer" in out.stdout
    assert "── c08 · sampled ·" in out.stdout
