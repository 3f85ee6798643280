"""Wall time: call spans from the recorded timing fields, concurrency lanes, and the timeline
figure (bars per role with patterns, TTFT ticks, the selected call outlined, clicks map back)."""

from __future__ import annotations

import numpy as np
import pytest

from rollout_graph.analysis.timing import call_span, seconds, timeline
from rollout_graph.ui.builders.palette import ROLE_PATTERNS
from rollout_graph.ui.builders.timeline import SELECTED_LINE, TTFT_NAME, clicked_call, timeline_figure
from tests.support.builders import TOOLS, Turn, rollout_of, vllm_chat

T0 = 1_764_500_000.0


def test_seconds_reads_numbers_milliseconds_and_iso():
    assert seconds(T0) == T0
    assert seconds(T0 * 1000) == pytest.approx(T0)
    assert seconds("2025-11-30T10:53:20Z") == pytest.approx(T0)
    assert seconds("2025-11-30T10:53:20") == pytest.approx(T0)  # no zone: UTC
    assert seconds("yesterday") is None and seconds(True) is None and seconds(float("nan")) is None


def test_call_span_fallbacks():
    assert call_span({"started_at": T0, "ended_at": T0 + 2}) == (T0, T0 + 2, None)
    assert call_span({"start_time": T0, "latency_ms": 1500}) == (T0, T0 + 1.5, None)
    assert call_span({"end_time": T0 + 3, "duration_s": 1}) == (T0 + 2, T0 + 3, None)
    assert call_span({"started_at": T0, "ended_at": T0 + 2, "ttft_s": 0.25}) == (T0, T0 + 2, T0 + 0.25)
    assert call_span({"started_at": T0, "ended_at": T0 + 2, "ttft_s": 5}) == (T0, T0 + 2, None)  # after the end
    assert call_span({"started_at": T0}) is None
    assert call_span({"started_at": T0, "ended_at": T0 - 1}) is None  # ends before it starts
    assert call_span({}) is None


def timed(turn: Turn, start: float, end: float, **extra) -> dict:
    record = vllm_chat(turn)
    record["timing"] = {"started_at": T0 + start, "ended_at": T0 + end, **extra}
    return record


def rollout():
    return rollout_of(
        [
            timed(Turn("c0", [1, 2, 3], [4, 5], tools=TOOLS), 0, 2, ttft_s=0.5),
            timed(Turn("c1", [1, 2, 3, 4, 5, 6], [7], tools=TOOLS), 2.5, 3),  # a retry, discarded
            timed(Turn("c2", [1, 2, 3, 4, 5, 6], [8, 9], tools=TOOLS), 2.5, 4),  # concurrent with c1
            timed(Turn("c3", [1, 2, 3, 4, 5, 6, 8, 9, 10], [11], tools=TOOLS), 4, 5),
            vllm_chat(Turn("t0", [50, 51], [52])),  # no timing
        ]
    )


def test_lanes_separate_calls_in_flight_together():
    tl = timeline(rollout())
    assert tl is not None
    assert tl.lane.tolist() == [0, 0, 1, 0, -1]
    assert tl.n_lanes == 2 and tl.untimed == [4]
    assert tl.start[3] == pytest.approx(4) and tl.duration == pytest.approx(5)
    assert tl.ttft[0] == pytest.approx(0.5) and np.isnan(tl.ttft[1])


def test_no_timing_means_no_timeline():
    assert timeline(rollout_of([vllm_chat(Turn("a", [1], [2]))])) is None


def test_figure_bars_by_role_with_patterns_ttft_and_selection():
    r = rollout()
    tl = timeline(r)
    fig = timeline_figure(r, tl, selected=2)
    bars = {t.name: t for t in fig.data if t.type == "bar"}
    assert set(bars) == {"agent", "discarded"}
    assert list(bars["discarded"].customdata) == [1]
    assert bars["discarded"].marker.pattern.shape == ROLE_PATTERNS["discarded"] != ROLE_PATTERNS["agent"]
    agent = bars["agent"]
    assert list(agent.customdata) == [0, 2, 3]
    assert list(agent.marker.line.color) == [agent.marker.line.color[0], SELECTED_LINE, agent.marker.line.color[0]]
    assert list(agent.base) == pytest.approx([0, 2.5, 4])
    ttft = next(t for t in fig.data if t.name == TTFT_NAME)
    assert list(ttft.x) == pytest.approx([0.5])


def test_clicked_call_reads_customdata():
    assert clicked_call([{"curve_number": 0, "point_index": 1, "customdata": 3}]) == 3
    assert clicked_call([{"customdata": [2]}]) == 2
    assert clicked_call([]) is None
