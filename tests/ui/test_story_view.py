"""The story view and the first screen, through Streamlit's AppTest, on each kind of source a user
opens: the bundled samples, a command-line trace, a framework dump (issue 42: "Read a rollout like a
story"). The upload is driven in Chromium (tests/browser/test_browser_story.py)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from rollout_graph.analysis.story import PAGE_SIZE
from rollout_graph.ui import state
from rollout_graph.ui.builders.headline import INTRO
from tests.browser.test_browser_dag import conversation_records
from tests.support.apptest import app, html_of, no_errors
from tests.support.builders import write

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"
QWEN = SAMPLES / "harnesses" / "qwen-code.jsonl.gz"
FRAMEWORK = ROOT / "tests" / "fixtures" / "frameworks" / "verifiers"


def popovers(at) -> list[str]:
    return [p.proto.popover.label for p in at.get("popover")]


def to_story(at):
    at.session_state[state.LEFT_VIEW] = state.STORY_VIEW
    return at.run()


def chapters(at) -> list[str]:
    """The node ids of the chapters the story draws (their data-node attribute)."""
    return re.findall(r'class="rg-ch[^"]*" data-node="([^"]+)"', html_of(at))


def test_the_first_screen_says_what_this_is_and_the_rollout_in_three_numbers(monkeypatch):
    at = app(monkeypatch)
    no_errors(at)
    page = html_of(at)
    assert INTRO in page  # what this is, in one line
    # three numbers in plain words, each with a (?) whose tooltip is its one-line meaning
    numbers = re.findall(r"<span><b>([\d,.k]+)</b>([^<]+)<span class=\"rg-q\" title=\"([^\"]+)\"", page)
    assert [(v, w) for v, w, _ in numbers] == [
        ("25", "model calls"),
        ("4", "conversations"),
        ("1,982", "tokens to train on"),
    ]
    assert all(meaning for _, _, meaning in numbers)
    assert "trainable tokens (calls)" in numbers[2][2]  # the jargon behind the (?)
    # one picture: the conversations as one bar, the agent's first
    assert 'class="rg-strip"' in page and "agent · 14" in page
    assert "Click a call in the graph" in page  # where to click
    # the tour and the glossary at the top of the page: reachable without scrolling
    assert popovers(at)[:2] == ["Take the tour", "What the words mean"] and "All counts" in popovers(at)
    assert "root ◆" in page and "a call no earlier call" in page  # the glossary's one-line meanings


def test_the_story_tells_the_agents_conversation_first_and_folds_what_it_does_not_follow(monkeypatch):
    at = to_story(app(monkeypatch, session="fix-config-bug"))
    no_errors(at)
    picker = at.selectbox(key=next(k for k in at.session_state if str(k).endswith("-conv")))
    assert picker.options[0].startswith("The agent · conversation 1 of 2") and "Side call" in picker.options[-1]
    page = html_of(at)
    assert chapters(at)[:3] == ["c03", "c04", "c05"]
    assert "1 discarded attempt (c01): the same prompt sent again (a retry); c03 continued" in page
    assert "<details><summary>" in page and "SYSTEM PROMPT".lower() in page.lower()  # folded, with its size
    # the second conversation: the break named in one sentence, with its evidence
    at = picker.select(1).run()
    no_errors(at)
    page = html_of(at)
    assert "Why a new conversation:</b> the history was compacted" in page and "Evidence:" in page
    assert chapters(at)[0] == "c19"


def test_a_call_opens_from_the_story_and_goes_to_the_graph_and_back(monkeypatch):
    at = to_story(app(monkeypatch, session="fix-config-bug"))
    next(b for b in at.button if b.label == "Open c05").click().run()
    no_errors(at)
    assert at.query_params["node"] == "c05" and at.session_state[state.LEFT_VIEW] == state.STORY_VIEW
    assert 'class="rg-ch rg-sel" data-node="c05"' in html_of(at)  # the story marks it
    assert ">c05 <span" in html_of(at)  # its detail on the right
    # to the graph: the same call, ringed there
    next(b for b in at.button if b.label == "◆ Show it in the graph").click().run()
    no_errors(at)
    assert at.session_state[state.LEFT_VIEW] == state.GRAPH_VIEW and at.query_params["node"] == "c05"
    # and back: the story turns to the call's conversation and page
    next(b for b in at.button if b.label == "☰ Read it in the story").click().run()
    no_errors(at)
    assert at.session_state[state.LEFT_VIEW] == state.STORY_VIEW and "c05" in chapters(at)


def test_a_call_selected_in_the_graph_turns_the_story_to_its_page(monkeypatch):
    at = app(monkeypatch, session="fix-config-bug", node="c08")  # the subagent's first call
    at = to_story(at)
    no_errors(at)
    key = next(k for k in at.session_state if str(k).endswith("-conv"))
    assert at.session_state[key] == 2 and chapters(at) == ["c08", "c09"]  # the subagent's conversation


def test_the_story_of_5000_calls_is_paged(monkeypatch, tmp_path):
    path = write(tmp_path / "big.jsonl", conversation_records(5000, session="big"))
    start = time.perf_counter()
    at = to_story(app(monkeypatch, path))
    no_errors(at)
    drawn = chapters(at)
    assert 0 < len(drawn) <= PAGE_SIZE  # one page of chapters, never the whole conversation
    assert time.perf_counter() - start < 120
    later = [b for b in at.button if b.label == "Later ›"]
    if later:
        at = later[0].click().run()
        no_errors(at)
        assert chapters(at) and chapters(at)[0] not in drawn


@pytest.mark.parametrize("source", [QWEN, FRAMEWORK], ids=["command-line capture", "framework dump"])
def test_the_story_opens_on_a_command_line_trace_and_a_framework_dump(monkeypatch, source):
    at = to_story(app(monkeypatch, source))
    no_errors(at)
    assert chapters(at), html_of(at)[:300]
    if source == QWEN:  # qwen-code's 15,054-character system prompt: folded, with its size
        page = html_of(at)
        assert "15,054 characters" in page and "<details><summary>" in page
