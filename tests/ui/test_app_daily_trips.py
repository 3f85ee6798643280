"""What a daily user tripped on, through AppTest (the app run in-process as a user opens it), on the
bundled samples and on a command-line trace: the Corpus table's missing values and its count axes,
and a ``?node=`` link that names no rollout."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from rollout_graph.ui.panels.corpus import MISSING, count_step
from tests.support.apptest import APP, app, html_of, no_errors, pick_call
from tests.support.builders import Turn, vllm_chat, write


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "t"
    folder.mkdir()
    write(
        folder / "t.jsonl",
        [
            vllm_chat(Turn("c0", [1, 2, 3], [4], session="s1")),
            vllm_chat(Turn("c1", [1, 2, 3, 4, 5], [6], session="s1")),
        ],
    )
    return folder


def corpus(monkeypatch, *paths: Path) -> AppTest:
    monkeypatch.setattr(sys, "argv", ["app.py", *map(str, paths)])
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("views/screens/corpus.py").run()
    no_errors(at)
    return at


def count_axes(at: AppTest) -> list[dict]:
    """The y axes of the page's charts of counts (the histogram's and the findings')."""
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    return [s["layout"]["yaxis"] for s in specs if "Trainable tokens" in str(s) or "Findings" in str(s)]


@pytest.mark.parametrize("source", ["bundled", "command line"])
def test_corpus_table_shows_missing_values_as_a_dash_and_counts_on_integer_ticks(monkeypatch, tmp_path, source):
    at = corpus(monkeypatch, *([_folder(tmp_path)] if source == "command line" else []))
    table = at.dataframe[0]
    assert table.value.isna().any().any()  # the audit has missing values (no reward, no signals) ...
    assert table.proto.placeholder == MISSING == "—"  # ... shown as an em dash, not "None"
    histogram = next(json.loads(c.proto.spec) for c in at.get("plotly_chart") if "Trainable tokens" in c.proto.spec)
    tokens_axis = histogram["layout"]["xaxis"]  # token counts: whole ticks from 0 as well
    assert tokens_axis["tick0"] == 0 and isinstance(tokens_axis["dtick"], int) and tokens_axis["dtick"] >= 1
    axes = count_axes(at)
    assert axes
    for axis in axes:  # counts: integer ticks from 0, never 0.5
        assert axis["tick0"] == 0 and isinstance(axis["dtick"], int) and axis["dtick"] >= 1
        assert axis["tickformat"] == ",d"


def test_count_steps_are_whole_and_about_five_ticks():
    assert [count_step(m) for m in (0, 1, 2, 3, 4, 5)] == [1] * 6  # plotly's own: 0.5 up to 4
    assert [count_step(m) for m in (6, 10, 11, 25, 26, 50, 51, 100, 101)] == [2, 2, 5, 5, 10, 10, 20, 20, 50]
    for most in range(0, 5000, 7):
        step = count_step(most)
        assert step >= 1 and most <= 5 * step and (step == 1 or most > 2 * step)


def notice(at: AppTest) -> str:
    return " ".join(w.value.replace("\\", "") for w in at.warning)


def test_a_node_link_without_session_says_what_it_lacks_on_the_samples(monkeypatch):
    at = app(monkeypatch, node="c07")
    no_errors(at)
    said = notice(at)
    assert "This link names call c07 but no rollout: it lacks `session=`" in said
    assert "`session=` (the rollout's id) and `node=` (the call's id)" in said
    assert "Showing rollout fix-config-bug" in said and "Rollout fix-config-bug<" in html_of(at)
    assert at.query_params["node"] == "c07" and "session" not in at.query_params  # the link is kept ...
    at = pick_call(at, "c05")  # ... until a call is chosen: then the page and the URL follow it
    no_errors(at)
    assert "lacks `session=`" not in notice(at)
    assert at.query_params["session"] == "fix-config-bug" and at.query_params["node"] == "c05"


def test_a_node_link_without_session_says_so_on_a_command_line_trace(monkeypatch, tmp_path):
    at = app(monkeypatch, _folder(tmp_path), node="c1")
    no_errors(at)
    assert "This link names call c1 but no rollout: it lacks `session=`" in notice(at)
    assert "Showing rollout s1" in notice(at)


def test_a_full_link_and_a_session_link_say_nothing_of_it(monkeypatch):
    for query in ({"session": "fix-config-bug", "node": "c07"}, {"session": "list-todos"}):
        at = app(monkeypatch, **query)
        no_errors(at)
        assert "lacks `session=`" not in notice(at) and "This link points to" not in notice(at)
