"""Before a call is selected the detail pane says how to select one and offers the calls worth a
look (findings first, most severe first) as buttons that select them."""

from __future__ import annotations

from pathlib import Path

from rollout_graph.core.types import LEVELS
from rollout_graph.ingest.load.files import load_paths
from rollout_graph.pipeline import analyse
from rollout_graph.ui.builders.start import START_CALLS, calls_worth_a_look
from rollout_graph.ui.panels.start import HOW
from tests.support.apptest import app, no_errors
from tests.support.builders import ROLLOUT, rollout_of, vllm_chat

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
SESSION = "fix-config-bug"


def sample():
    return analyse(load_paths([SAMPLES / "vllm"]).sessions[SESSION])


def test_the_calls_worth_a_look_lead_with_the_most_severe_findings_one_per_code():
    r = sample()
    starts = calls_worth_a_look(r)
    assert 0 < len(starts) <= START_CALLS
    flagged = [s for s in starts if " · WARN " in s.label or " · FATAL " in s.label or " · INFO " in s.label]
    assert flagged and starts[: len(flagged)] == flagged  # findings first
    codes = [s.label.split()[3] for s in flagged]
    assert len(codes) == len(set(codes))  # one button per code, not one per call
    every = {f.code for i in range(len(r.calls)) for f in r.findings_for(i)}
    assert set(codes) == every or len(starts) == START_CALLS
    levels = [LEVELS.index(s.label.split()[2]) for s in flagged]
    assert levels == sorted(levels)  # most severe first
    for s in flagged:
        code = s.label.split()[3]
        assert code in {f.code for f in r.findings_for(s.index)}  # the button opens a call with that code
    assert len({s.label for s in starts}) == len(starts)


def test_a_clean_rollout_still_offers_somewhere_to_start():
    r = rollout_of([vllm_chat(t) for t in ROLLOUT])
    labels = [s.label for s in calls_worth_a_look(r)]
    assert any("first fork" in label for label in labels) and any("last leaf" in label for label in labels)


def test_the_detail_pane_offers_buttons_that_select_before_any_click(monkeypatch):
    at = app(monkeypatch, session=SESSION)
    no_errors(at)
    assert any(HOW[:40] in m.value for m in at.markdown)
    starts = calls_worth_a_look(sample())
    button = next(b for b in at.button if b.key == f"start-{SESSION}-0-{starts[0].index}")
    at = button.click().run()
    no_errors(at)
    node_id = sample().calls[starts[0].index].node_id
    assert at.query_params.get("node") in (node_id, [node_id])
    assert not any(HOW[:40] in m.value for m in at.markdown)  # the call's detail took its place
