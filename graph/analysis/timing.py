"""Wall-clock spans of a rollout's calls, for a timeline: start, end, time to first token, and a
lane per concurrent call.

A call's start is ``started_at`` (else ``start_time``, else ``timestamp``); its end is
``ended_at`` (else ``end_time``, else start + ``latency_s`` / ``latency_ms`` / ``duration_s``);
with only an end and a duration the start is derived. Times are epoch seconds (numbers above
1e12 are taken as milliseconds) or ISO 8601 strings (UTC when no zone is given). TTFT is
``ttft_s`` after the start. Lanes: calls sorted by start, each in the first lane free by then,
so calls in flight together sit in different lanes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

from rollout_graph.core.rollout import Rollout

START_KEYS = ("started_at", "start_time", "timestamp")
END_KEYS = ("ended_at", "end_time")
DURATION_KEYS = (("latency_s", 1.0), ("latency_ms", 0.001), ("duration_s", 1.0))


def seconds(value: Any) -> float | None:
    """Epoch seconds from a recorded time: a number (ms when above 1e12) or an ISO 8601 string."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        v = float(value)
        if not math.isfinite(v):
            return None
        return v / 1000.0 if v > 1e12 else v
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return parsed.timestamp()
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def call_span(timing: dict[str, Any]) -> tuple[float, float, float | None] | None:
    """(start, end, ttft time or None) in epoch seconds, or None when the call's timing is unknown."""
    start = next((s for k in START_KEYS if (s := seconds(timing.get(k))) is not None), None)
    end = next((s for k in END_KEYS if (s := seconds(timing.get(k))) is not None), None)
    duration = next(
        (d * scale for k, scale in DURATION_KEYS if (d := _number(timing.get(k))) is not None and d >= 0), None
    )
    if start is None and end is not None and duration is not None:
        start = end - duration
    if end is None and start is not None and duration is not None:
        end = start + duration
    if start is None or end is None or end < start:
        return None
    ttft = _number(timing.get("ttft_s"))
    first = start + ttft if ttft is not None and 0 <= ttft <= end - start else None
    return start, end, first


@dataclass(slots=True)
class Timeline:
    """Per call (arrival order), seconds from the earliest start; NaN where a call has no timing."""

    origin: float  # epoch seconds of the earliest start
    start: np.ndarray
    end: np.ndarray
    ttft: np.ndarray  # NaN where not recorded
    lane: np.ndarray  # int, -1 where untimed
    untimed: list[int] = field(default_factory=list)

    @property
    def n_lanes(self) -> int:
        """How many lanes: the most calls in flight at once."""
        return int(self.lane.max()) + 1 if self.lane.size and self.lane.max() >= 0 else 0

    @property
    def duration(self) -> float:
        """From the earliest start to the latest end, in seconds."""
        return float(np.nanmax(self.end)) if self.n_lanes else 0.0


def timeline(rollout: Rollout) -> Timeline | None:
    """The rollout's calls on wall time, or None when no call has a usable start and end."""
    n = len(rollout.calls)
    spans = [call_span(c.timing) for c in rollout.calls]
    timed = [i for i in range(n) if spans[i] is not None]
    if not timed:
        return None
    origin = min(spans[i][0] for i in timed)  # type: ignore[index]
    start = np.full(n, np.nan)
    end = np.full(n, np.nan)
    ttft = np.full(n, np.nan)
    for i in timed:
        s, e, t = spans[i]  # type: ignore[misc]
        start[i], end[i] = s - origin, e - origin
        if t is not None:
            ttft[i] = t - origin
    lane = np.full(n, -1, dtype=np.int64)
    free_at: list[float] = []  # per lane: when its last call ended
    for i in sorted(timed, key=lambda k: (start[k], end[k], k)):
        for k, busy_until in enumerate(free_at):
            if busy_until <= start[i]:
                lane[i], free_at[k] = k, end[i]
                break
        else:
            lane[i] = len(free_at)
            free_at.append(end[i])
    return Timeline(origin, start, end, ttft, lane, [i for i in range(n) if spans[i] is None])
