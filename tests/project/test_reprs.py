"""Every public object has a short, informative repr (issue 21): one line a notebook can print,
whatever size the rollout and whatever a trace put in its ids."""

from __future__ import annotations

from pathlib import Path

import rollout_graph as rg
from rollout_graph.core.records import TopK
from rollout_graph.ingest.files.sources import Source
from tests.support.builders import agent_records, write

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
LONG = "x" * 5_000 + "\u202e<script>"


def _check(obj: object, *needles: str) -> str:
    text = repr(obj)
    assert len(text) < 200, f"{type(obj).__name__} repr is {len(text)} chars: {text[:300]}"
    assert "\n" not in text, text
    assert text.startswith(type(obj).__name__ + "("), text
    for needle in needles:
        assert needle in text, (needle, text)
    return text


def test_reprs_of_a_big_rollout_are_short(tmp_path):
    records = agent_records(600, session="big")
    records.append("{not json")  # one skipped record
    path = write(tmp_path / "big.jsonl", records)
    rollouts = rg.load(path)
    rollout = rollouts["big"]
    report = rollouts.report
    assert len(repr(report.report())) > 200  # the JSON is long; the repr is not

    _check(rollouts, "1 rollouts", "'big'", "1 skipped")
    _check(report, "1 files", "601 records", "600 loaded", "1 skipped", "line 601")
    _check(rollout, "'big'", "600 calls")
    _check(rollout.topology, "600 calls", "roots", "discarded")
    main = max(rollout.sequences, key=lambda s: len(s.nodes))
    ids = rollout.node_ids
    text = _check(main, main.role, repr(ids[main.nodes[0]]), repr(ids[main.nodes[-1]]), f"{len(main.nodes)} calls")
    assert "…" in text and "trainable" in text  # the path is cut to its ends, not listed
    _check(rollout.tokens(main), "tokens", "trained")
    _check(rollout.calls[0], "'c0000'", "'big'", "big.jsonl:1")
    _check(report.skipped[0], "big.jsonl", "line 601")
    finding = next(f for f in rollout.findings if f.node_id is not None)
    _check(finding, finding.level, finding.code, repr(finding.node_id))
    top_k = next(c.top_k for c in rollout.calls if c.top_k is not None)
    assert isinstance(top_k, TopK)
    _check(top_k, "positions", "alternatives")
    _check(rg.Limits(), "defaults")
    _check(rg.Limits(max_depth=5, max_file_bytes=1 << 20), "max_depth=5", "max_file_bytes=1 MB")
    _check(Source.from_path(path), "big.jsonl")


def test_reprs_cut_hostile_ids(tmp_path):
    records = agent_records(3, session=LONG)
    for r in records:
        r["response"]["id"] = LONG
    path = write(tmp_path / ("n" * 150 + ".jsonl"), records)
    rollouts = rg.load(path)
    rollout = next(iter(rollouts.values()))
    for obj in (rollouts, rollouts.report, rollout, rollout.calls[0], rollout.sequences[0], *rollout.findings):
        text = _check(obj)
        assert "\u202e" not in text  # repr() escapes the control, and the cut keeps it escaped


def test_sample_reprs_name_what_they_hold():
    rollouts = rg.load(SAMPLES / "vllm")
    rollout = rollouts["fix-config-bug"]
    _check(rollouts, "'fix-config-bug'")
    _check(rollout, "'fix-config-bug'", f"{len(rollout.calls)} calls", f"{len(rollout.sequences)} sequences")
    for seq in rollout.sequences:
        _check(seq, seq.role, f"{seq.n_trainable} trainable")
