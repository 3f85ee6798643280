"""Small truths of the Compare and Corpus pages on a command-line folder of one rollout (the
pages as `rollout-graph view FILE` opens them, run in-process by AppTest): Compare says it needs two
rollouts instead of comparing the one with itself, the Corpus page counts in the singular, its
histogram of trainable tokens starts at 0, and a compared row's ≠ stays on its label's line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from streamlit.testing.v1 import AppTest

from rollout_graph.ui.panels.compare import stats_html
from tests.support.apptest import APP, no_errors
from tests.support.builders import Turn, vllm_chat, write

ROOT = Path(__file__).resolve().parents[2]
COMPARE = str(ROOT / "views" / "screens" / "compare.py")


def _folder(tmp_path: Path, sessions: list[str]) -> Path:
    records = []
    for s in sessions:
        records += [
            vllm_chat(Turn("c0", [1, 2, 3], [4], session=s)),
            vllm_chat(Turn("c1", [1, 2, 3, 4, 5], [6], session=s)),
        ]
    folder = tmp_path / "t"
    folder.mkdir()
    write(folder / "t.jsonl", records)
    return folder


def test_compare_with_one_rollout_says_it_needs_two(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "argv", ["compare.py", str(_folder(tmp_path, ["only"]))])
    at = AppTest.from_file(COMPARE, default_timeout=120).run()
    no_errors(at)
    assert [i.value for i in at.info] == [
        "These traces hold one rollout (only): Compare needs two. Open a folder or files with more rollouts "
        "(the sidebar's source), or see this one in the Explorer."
    ]
    assert not any(t.value.startswith(("**A ·", "**B ·")) for t in at.markdown)  # no table of a rollout beside itself


def test_compare_with_two_rollouts_compares_them(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "argv", ["compare.py", str(_folder(tmp_path, ["one", "two"]))])
    at = AppTest.from_file(COMPARE, default_timeout=120).run()
    no_errors(at)
    assert not at.info
    named = [t.value for t in at.markdown if t.value.startswith(("**A ·", "**B ·"))]
    assert named == ["**A · one**", "**B · two**"]


def test_a_compared_row_label_never_wraps():
    side = {
        "session_id": "a-long-session-id",
        "stats": {"n_calls": 1},
        "finding_counts": {"FATAL": 0, "WARN": 1, "INFO": 0},
    }
    other = {**side, "session_id": "b", "stats": {"n_calls": 2}}
    html = stats_html({"a": side, "b": other})
    assert '<td style="white-space:nowrap">n_calls ≠</td>' in html
    assert '<td style="white-space:nowrap">FATAL</td>' in html


def test_corpus_page_counts_one_rollout_in_the_singular(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "argv", ["app.py", str(_folder(tmp_path, ["only"]))])
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("views/screens/corpus.py").run()
    no_errors(at)
    assert at.markdown[0].value == "##### Corpus audit: 1 rollout from 1 file"
    assert any(c.value.startswith("1 rollout matches · ") for c in at.caption)
    figure = next(c for c in at.get("plotly_chart") if "Trainable tokens" in c.proto.spec)
    spec = json.loads(figure.proto.spec)
    top = int(at.dataframe[0].value["n_trainable_tokens"].max())
    assert top > 0
    # the one rollout's bar at its count on an axis from 0 (not a bar across the chart)
    assert spec["layout"]["xaxis"]["range"][0] == 0 and spec["layout"]["xaxis"]["range"][1] > top
    bins = spec["data"][0]["xbins"]
    assert bins["start"] == 0 and bins["end"] > top and bins["size"] >= 1


def test_corpus_page_counts_several_in_the_plural(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "argv", ["app.py", str(_folder(tmp_path, ["one", "two"]))])
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("views/screens/corpus.py").run()
    no_errors(at)
    assert at.markdown[0].value == "##### Corpus audit: 2 rollouts from 1 file"
    assert any(c.value.startswith("2 rollouts match · ") for c in at.caption)
