"""Pure view builders for training signals: overlay classes and tooltips, the scatter's points,
the corpus filters and sort, and the Compare page's tables (escaped, differences marked)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from rollout_graph.analysis.decode import TraceTextDecoder
from rollout_graph.reports.compare import compare
from rollout_graph.signals.join import attach, join_rollout
from rollout_graph.signals.reading import parse_row
from rollout_graph.ui.builders import overlays
from rollout_graph.ui.builders.corpus import filter_signals, sort_rows
from rollout_graph.ui.builders.tokens import node_strip, page_html, sequence_strip
from rollout_graph.ui.panels.compare import findings_html, signals_html, stats_html
from rollout_graph.ui.panels.signals import outliers, points, scatter_figure
from tests.support.builders import Turn, rollout_of, vllm_chat

CHAIN = [Turn("c0", [1, 2, 3], [4, 5], [-0.5, -1.0]), Turn("c1", [1, 2, 3, 4, 5, 6], [7], [-0.2])]
TRAINER = [None, 0.0, 0.0, -0.4, -1.5, 0.0, -0.2]  # d = +0.1, -0.5, 0.0 at the trained positions


def joined():
    rollout = rollout_of([vllm_chat(t) for t in CHAIN])
    row = parse_row({"session_id": "s1", "leaf_id": "c1", "trainer_logprobs": TRAINER, "advantages": [0.5] * 7}, 1)
    return attach(rollout, join_rollout(rollout, [row], 0.4))


def test_overlay_arrays_line_up_with_the_strip():
    rollout = joined()
    strip = sequence_strip(rollout, rollout.sequences[0])
    o = strip.overlay
    np.testing.assert_allclose(o.trainer, [np.nan, np.nan, np.nan, -0.4, -1.5, np.nan, -0.2])
    np.testing.assert_allclose(o.inference[[3, 4, 6]], [-0.5, -1.0, -0.2])
    assert np.isnan(o.advantages[:3]).all() and o.advantages[3] == 0.5
    # the builders' top-2 alternatives give an entropy bound on every sampled token
    assert np.isfinite(o.entropy[[3, 4, 6]]).all() and np.isnan(o.entropy[:3]).all()
    node = node_strip(rollout, 1).overlay  # c1's context (token 6) then its sampled token 7
    np.testing.assert_allclose(node.trainer, [np.nan, -0.2])


def test_overlay_classes_and_tooltip():
    rollout = joined()
    strip = sequence_strip(rollout, rollout.sequences[0])
    o = strip.overlay
    assert o.css_class(3) is None  # logprob mode keeps the logprob colouring
    o.mode = overlays.DIFF
    mid = overlays.BUCKETS // 2
    assert o.css_class(6) == f"rg-d{mid}"  # d = 0: the white middle
    blue, red = int(o.css_class(3)[4:]), int(o.css_class(4)[4:])
    assert blue > mid > red  # trainer likelier -> blue side; less likely -> red side
    o.mode = overlays.RATIO
    assert "rg-x" in o.css_class(4) and "rg-x" not in o.css_class(3)  # exp(-0.5) is outside [0.8, 1.2]
    o.mode = overlays.ADVANTAGE
    assert o.css_class(3) == f"rg-d{overlays.BUCKETS - 1}"  # the largest advantage saturates
    lines = o.tooltip_lines(4)
    assert lines[0] == f"inference logprob -1.0000 · trainer logprob -1.5000 · Δ -0.5000 · ratio {math.exp(-0.5):.4f}"
    assert lines[1] == "advantage +0.5000" and lines[2].startswith("entropy ≥ ")
    decoder = TraceTextDecoder({})
    html_out = page_html(strip, 0, len(strip), decoder)
    assert "rg-d" in html_out and "trainer logprob -1.5000" in html_out
    assert overlays.diff_position(0.01) < overlays.diff_position(0.1) < overlays.diff_position(1) < 1
    assert overlays.diff_position(-5) == -1


def test_overlay_modes_without_data_say_so():
    rollout = rollout_of([vllm_chat(t) for t in CHAIN])  # no signals
    o = sequence_strip(rollout, rollout.sequences[0]).overlay
    o.mode = overlays.DIFF
    assert o.css_class(3) == "rg-n" and not o.available(overlays.DIFF) and o.available(overlays.ENTROPY)
    assert "load a signals file" in overlays.legend_html(o, overlays.DIFF)


def test_scatter_points_and_outliers():
    rollout = joined()
    p = points(rollout)
    assert p.node.tolist() == [0, 0, 1] and p.offset.tolist() == [0, 1, 0]
    np.testing.assert_allclose(p.diff, [0.1, -0.5, 0.0])
    assert outliers(p, 0.4).tolist() == [0, 1, 2]  # fewer than TOP_OUTLIERS points: all are drawn as outliers
    fig = scatter_figure(rollout, p, 0.4)
    assert [t.name for t in fig.data] == ["agreement", "tokens", "outliers"]
    assert fig.to_json() == scatter_figure(rollout, p, 0.4).to_json()  # stable across reruns


def test_corpus_filters_and_sort():
    frame = pd.DataFrame(
        {"session_id": ["a", "b", "c", "d"], "reward": [0.0, 1.0, None, 0.5],
         "max_abs_diff": [0.1, 2.0, None, 0.4], "n_mismatch_calls": [0, 2, None, 0]}
    )  # fmt: skip
    assert filter_signals(frame, (0.4, 1.0), 0, False)["session_id"].tolist() == ["b", "d"]
    assert filter_signals(frame, None, 0.3, False)["session_id"].tolist() == ["b", "d"]
    assert filter_signals(frame, None, 0, True)["session_id"].tolist() == ["b"]
    assert sort_rows(frame, "max |Δ| (largest first)")["session_id"].tolist() == ["b", "d", "a", "c"]
    assert sort_rows(frame, "reward (lowest first)")["session_id"].tolist() == ["a", "d", "b", "c"]


def test_compare_tables_mark_differences_and_escape():
    a = joined()
    b = rollout_of([vllm_chat(Turn("c0", [1, 2, 3], [4, 9], [-0.5, -3.0], session="<b>x</b>"))])
    result = compare(a, b)
    stats = stats_html(result)
    assert stats.count("rg-cmp-diff") == sum(a.stats[k] != b.stats[k] for k in a.stats) + sum(
        a.finding_counts[level] != b.finding_counts[level] for level in ("FATAL", "WARN", "INFO")
    )
    assert "<b>x</b>" not in stats and "&lt;b&gt;x&lt;/b&gt;" in stats
    assert "logprob_mismatch ≠" in findings_html(result)
    assert "reward" in signals_html(result) and signals_html(compare(b, b)) is None
