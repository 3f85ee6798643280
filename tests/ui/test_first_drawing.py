"""`rollout-graph view` builds the DAG figure of the first page before a visitor opens it
(views/state/dag_figures.py ``first_page_drawing``, started by views/serve.py): the first page run
on those traces draws that very figure (a cache hit, built once), and the page is what it is
without it."""

from __future__ import annotations

import json

from rollout_graph.ui.state import dag_figures
from tests.support.apptest import app, no_errors
from tests.support.builders import ROLLOUT, vllm_chat, write


def _counting(monkeypatch) -> list[int]:
    built: list[int] = []
    real = dag_figures.dag_drawing

    def counted(*args, **kwargs):
        built.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(dag_figures, "dag_drawing", counted)
    dag_figures.drawing.clear()
    return built


def _dag_spec(at) -> dict:
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    return next(s for s in specs if any(t.get("name") == "calls" for t in s["data"]))


def test_the_first_page_draws_the_figure_built_before_the_visit(monkeypatch, tmp_path):
    folder = tmp_path / "traces"
    folder.mkdir()
    write(folder / "rollout.jsonl", [vllm_chat(t) for t in ROLLOUT])
    built = _counting(monkeypatch)
    assert dag_figures.first_page_drawing([str(folder)])
    assert built == [1]
    at = app(monkeypatch, folder)  # the first visit: no call chosen, the sidebar's defaults
    no_errors(at)
    assert built == [1]  # the page run found the figure built
    ahead = _dag_spec(at)
    dag_figures.drawing.clear()  # the same page with nothing built ahead: the same figure
    again = app(monkeypatch, folder)
    no_errors(again)
    assert built == [1, 1]
    assert _dag_spec(again) == ahead


def test_a_folder_without_rollouts_builds_nothing(monkeypatch, tmp_path):
    built = _counting(monkeypatch)
    (tmp_path / "empty.jsonl").write_text("")
    assert not dag_figures.first_page_drawing([str(tmp_path)])
    assert built == []
