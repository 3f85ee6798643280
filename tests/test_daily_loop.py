"""The daily loop (issue 22) through AppTest: Raw JSON on every source, Compare and the Corpus
page on command-line traces, honest links, and one vocabulary in what the app and CLI print."""

from __future__ import annotations

from pathlib import Path

import pytest

from rollout_graph.resources import SAMPLES
from tests.apptest import app, html_of, no_errors

VLLM = SAMPLES / "vllm"


def raw_record_shown(at) -> str:
    """The Raw JSON tab's text: the record read back from its file (not a warning)."""
    captions = [c.value for c in at.caption if c.value.startswith("The record from")]
    assert captions, [w.value for w in at.warning]
    return "\n".join(c.value for c in at.code)


def test_raw_json_reads_the_record_back_on_the_bundled_samples(monkeypatch):
    at = app(monkeypatch, session="fix-config-bug", node="c07")  # bundled signals joined by default
    no_errors(at)
    text = raw_record_shown(at)
    assert '"prompt_token_ids"' in text or '"prompt_ids"' in text or "{" in text
    assert not any("unloaded" in w.value for w in at.warning)


def test_raw_json_reads_the_record_back_on_command_line_traces(monkeypatch):
    at = app(monkeypatch, VLLM)
    no_errors(at)
    session = at.query_params["session"]
    at = app(monkeypatch, VLLM, session=session, node="c01")
    no_errors(at)
    text = raw_record_shown(at)
    assert "agent-rollouts.jsonl" in "\n".join(c.value for c in at.caption)
    assert text.startswith("{")
