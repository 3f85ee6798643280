"""The "what your trainer trains" view: its pure builders, and the panel in the app (AppTest)."""

from __future__ import annotations

from pathlib import Path

import rollout_graph as rg
from rollout_graph.analysis.reconcile import LABELS
from rollout_graph.ui.builders import trainers
from tests.support.apptest import app, html_of, no_errors

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


def _claude():
    return rg.load(SAMPLES / "harnesses" / "claude-code-continue.jsonl.gz")["claude-code-continue"]


def test_summary_has_a_line_per_framework_from_the_library():
    rollout = _claude()
    found = trainers.results(rollout, eos_token_id=2)
    lines = trainers.summary_rows(found)
    assert [line["framework"] for line in lines] == list(LABELS.values())
    trl = next(line for line in lines if line["framework"] == "TRL")
    assert trl["sampled tokens dropped"] == found[0].summary()["n_dropped_tokens"] == 5
    nemo_rl = next(line for line in lines if line["framework"] == "NeMo-RL")
    assert nemo_rl["never sampled"] == 48  # the spliced calls, trained after a prompt the model never saw


def test_token_strip_escapes_and_colours_by_provenance():
    rollout = _claude()
    found = trainers.results(rollout)
    trl = found[0]
    html = trainers.token_strip_html(rollout, trl.rows[0], lambda ids: ["<b>&"] * len(ids))
    assert "<b>&" not in html and "&lt;b&gt;&amp;" in html
    assert trainers.COLOURS["sampled"][0] in html and "context tokens" in html  # a long context run folded
    counts = trainers.provenance_counts(rollout, trl.rows[0])
    assert counts["sampled"] == trl.rows[0].n_mask and sum(counts.values()) == trl.rows[0].length


def test_panel_shows_every_framework_and_the_differences(monkeypatch):
    at = app(monkeypatch, session="claude-code-continue")  # the bundled samples (traces given are followed live)
    no_errors(at)
    assert "Rollout claude-code-continue<" in html_of(at)
    assert "NeMo Gym" not in {t.label for t in at.tabs}  # built only while open
    at = next(t for t in at.toggle if t.label.startswith("What your trainer trains")).set_value(True).run()
    no_errors(at)
    assert set(LABELS.values()) <= {t.label for t in at.tabs}
    text = " ".join(m.value for m in at.markdown).replace("\\", "")  # md() escapes Markdown
    assert "TRL realigns" in text and "re-tokenizes" in text  # the difference and the break that caused it
    assert "trained: sampled by the model here" in html_of(at)
