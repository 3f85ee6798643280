"""Samples of the machine's CPU time, for judging how many cores are free *now* (the two-part
read's rule: graph/ingest/parallel.py, docs/performance.md "Two cores").

Standard library only, so the console command can take its first sample as it starts, before
numpy or anything else is imported (:func:`mark_start`): the window from there to the load is
the command's own start-up, which costs no waiting.
"""

from __future__ import annotations

import os
import time

Sample = tuple[float, float, float]  # (monotonic seconds, machine busy CPU seconds, this process's CPU seconds)

# The sample the console command took as it started (None: not a console command, or off Linux).
START: Sample | None = None


def sample() -> Sample | None:
    """(wall seconds, busy CPU seconds of the whole machine, this process's CPU seconds) now;
    None off Linux (no /proc/stat)."""
    try:
        with open("/proc/stat", "rb") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != b"cpu":
        return None
    try:
        ticks = [int(x) for x in fields[1:]]
    except ValueError:
        return None
    if len(ticks) < 4:
        return None
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    return time.monotonic(), (sum(ticks[:8]) - idle) / hz, time.process_time()


def mark_start() -> None:
    """Take the start-up sample (the console command calls this first thing); the earliest one
    stands (a benchmark that marks before it imports what it sets keeps its longer window)."""
    global START
    if START is None:
        START = sample()
