"""How many cores are free *now*: samples of the machine's CPU time, and the cores this process may use.

Entry points: :func:`mark_start` (the console command's first sample, taken as it starts, before
numpy or anything else is imported: the window from there to the load is its own start-up, which
costs no waiting), :func:`sample`, :func:`free_cores_now` (the two-part read's rule),
:func:`free_cores` and :func:`workers_available` (the pool's). Standard library only. Load layer:
``two_parts.py`` and ``pool.py`` judge by it (docs/performance.md, "Two cores").
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


def workers_available() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def free_cores() -> float:
    """Cores this process may use minus the other processes running (1-minute load average,
    this process counted as one of them)."""
    cores = workers_available()
    try:
        others = max(0.0, os.getloadavg()[0] - 1.0)
    except OSError:  # no load average on this platform
        others = 0.0
    return max(0.0, cores - others)


# Seconds of /proc/stat a judgement needs; shorter, or longer than _MAX_WINDOW (a long-running
# process: the window's average would lag), the running-task count of this instant decides.
_MIN_WINDOW, _MAX_WINDOW = 0.05, 5.0


def _running_others() -> float | None:
    """Other processes running right now (/proc/loadavg's running-task count, minus this one)."""
    try:
        with open("/proc/loadavg", "rb") as f:
            running = int(f.read().split()[3].split(b"/")[0])
    except (OSError, ValueError, IndexError):
        return None
    return max(0.0, running - 1.0)


def free_cores_now(since: Sample | None) -> float:
    """Cores this process may use minus what other processes use now (docs/performance.md,
    "Two cores": the rule).

    On Linux: the machine's busy CPU time (/proc/stat) since ``since`` (a :func:`sample`;
    the console command's is taken as it starts, so the window is its own start-up and costs no
    waiting) minus this process's own CPU time over the same window, per second of it. A window shorter than 50 ms
    or longer than 5 s (a process that started long ago: its average would lag) takes
    /proc/loadavg's count of tasks running at this instant instead, this one not counted. Off
    Linux: the 1-minute load average (:func:`free_cores`), the only figure there is.
    """
    cores = workers_available()
    now = sample()
    if since is not None and now is not None and _MIN_WINDOW <= now[0] - since[0] <= _MAX_WINDOW:
        busy = (now[1] - since[1]) - (now[2] - since[2])
        others = max(0.0, busy / (now[0] - since[0]))
        return max(0.0, cores - others)
    others_now = _running_others()
    if others_now is not None:
        return max(0.0, cores - others_now)
    return free_cores()
