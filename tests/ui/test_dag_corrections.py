"""The DAG coloured by a correction (issue 26): each call's fill follows the share of its compared
sampled tokens the correction clips or masks (``mismatch.call_shares``), calls without compared
tokens stay grey, and the role colours are untouched otherwise; in the app, a "Colour calls by"
control in the DAG's toolbar offers each chosen correction and a legend line explains the scale."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from rollout_graph.ingest.load.files import load_paths
from rollout_graph.pipeline import analyse
from rollout_graph.samples import __file__ as samples_init
from rollout_graph.signals.corrections import parse_correction
from rollout_graph.signals.join import join_rollout
from rollout_graph.signals.reading import read_signals
from rollout_graph.ui import state
from rollout_graph.ui.builders import mismatch
from rollout_graph.ui.builders.dag import CALLS, dag_figure, legend_html
from rollout_graph.ui.state import signals as signals_state
from tests.support.apptest import app, html_of, no_errors

SAMPLES = Path(samples_init).parent
SESSION = "fix-config-bug"
LABEL = "token_mask:low=0.8,high=1.25"


@pytest.fixture(scope="module")
def joined():
    """fix-config-bug with the bundled signals joined."""
    rollout = analyse(load_paths([SAMPLES / "vllm"]).sessions[SESSION])
    rows = [r for r in read_signals(SAMPLES / "signals" / "samples.signals.jsonl").rows if r.session_id == SESSION]
    return replace(rollout, signals=join_rollout(rollout, rows))


def test_call_markers_follow_the_share_of_tokens_affected(joined):
    shares = mismatch.call_shares(joined, joined.signals.evaluate([parse_correction(LABEL)]), LABEL)
    assert shares and len(set(shares.values())) > 1  # the sample has calls the mask touches more than others
    assert mismatch.correction_shares(joined, LABEL) == shares
    colours = mismatch.share_colours(shares)
    fig = dag_figure(joined, collapse=False, shares=shares, shares_label=LABEL)
    calls = fig.data[CALLS]
    drawn = [int(v) for v in calls.customdata]
    assert sorted(drawn) == list(range(len(joined.calls)))
    want = [colours.get(v, mismatch.NO_SHARE) for v in drawn]
    assert list(calls.marker.color) == want
    assert calls.marker.colorscale is None  # plain fills, not role codes
    for v, hover in zip(drawn, calls.hovertext, strict=True):
        if v in shares:
            assert f"{LABEL}: {shares[v]:.1%} of compared tokens clipped or masked" in hover
        else:
            assert "no compared trainable tokens" in hover
    # deterministic: the same arguments draw the same figure (plotly keeps its selection across reruns)
    again = dag_figure(joined, collapse=False, shares=dict(shares), shares_label=LABEL)
    assert again.to_json() == fig.to_json()
    # the default is today's role colours, whatever signals are joined
    role = dag_figure(joined, collapse=False)
    assert role.data[CALLS].marker.colorscale is not None
    assert dag_figure(replace(joined, signals=None), collapse=False).to_json() == role.to_json()


def test_the_legend_explains_the_scale():
    assert "share of tokens affected" not in legend_html()
    text = legend_html("a<b")
    assert "share of tokens affected by <b>a&lt;b</b>" in text
    assert "100 % of the call's compared sampled tokens clipped or masked" in text
    assert "no compared tokens" in text


def test_the_app_colours_the_dag_by_a_chosen_correction(monkeypatch):
    at = app(monkeypatch, session=SESSION)
    no_errors(at)
    control = at.selectbox(key=state.DAG_COLOUR)
    assert control.value == "role"
    first = signals_state.starting_labels()[0]
    assert control.options == ["Colour by role", *[f"Colour by share of tokens affected by {x}" for x in
                                                   signals_state.starting_labels()]]  # fmt: skip
    at = control.select(first).run()
    no_errors(at)
    assert at.selectbox(key=state.DAG_COLOUR).value == first
    assert f"share of tokens affected by <b>{first}</b>" in html_of(at)
    assert "compared sampled tokens clipped or masked" in html_of(at)
    # back to role: no share legend
    at = at.selectbox(key=state.DAG_COLOUR).select("role").run()
    no_errors(at)
    assert "share of tokens affected by" not in html_of(at)
