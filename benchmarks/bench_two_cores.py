"""The crossover of the two-part read (graph/ingest/parallel.py, "two cores"): whole-process
``rollout-graph inspect --json --no-cache`` read in one process vs this process plus one forked
helper, against the orjson floor (``floor_orjson.py``), interleaved, quiet and with one core kept
busy by a spinning interpreter.

- ``one``: the file read in one process (the two-part read switched off);
- ``two``: the two-part read whatever the free cores and the file's size;
- ``rule``: what the command does by itself (:func:`rollout_graph.ingest.parallel.free_cores_now`
  against ``TWO_PART_MIN_FREE_CORES``);
- ``floor``: ``orjson.loads`` of every line, nothing else.

The busy core is a spinning interpreter in a session of its own (``bench_cold.py``'s shares this
benchmark's session, so with the kernel's autogroup it competes with the command for one
session's share rather than for a core).

A round runs every command once in a rotating order; each figure is the median of the rounds'
ratios to the floor, wall-clock and CPU (user + system of the command and its helper, from
``os.wait4``); the 1-minute load average is printed beside each round (the machine may be
shared). The page cache is warmed first: every command reads the file from memory.

``python benchmarks/bench_two_cores.py TRACE.jsonl [TRACE2 ...] [--rounds 3] [--modes quiet,busy]``
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_cold import load_text, run  # noqa: E402


@contextlib.contextmanager
def busy_core(on: bool) -> Iterator[None]:
    """Another process keeping one core busy, in a session of its own: the kernel shares CPU
    between sessions first (autogroup), so a spinner in this benchmark's session would take
    its share from the command's instead of from a core."""
    if not on:
        yield
        return
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
    try:
        time.sleep(0.3)
        yield
    finally:
        spinner.kill()
        spinner.wait()


# The command with the two-part read's threshold of free cores set (inf: never; 0: always, any size).
RUNNER = (
    "import sys; from rollout_graph.ingest import parallel as p; "
    "v = sys.argv.pop(1); p.TWO_PART_MIN_FREE_CORES = float(v) if v != 'rule' else p.TWO_PART_MIN_FREE_CORES; "
    "p.TWO_PART_MIN_BYTES = 0 if v == '0' else p.TWO_PART_MIN_BYTES; "
    "from rollout_graph.cli import main; sys.exit(main())"
)


def commands(trace: Path) -> dict[str, list[str]]:
    py = sys.executable
    inspect = ["inspect", "--json", "--no-cache", str(trace)]
    return {
        "floor": [py, str(HERE / "floor_orjson.py"), str(trace)],
        "one": [py, "-c", RUNNER, "inf", *inspect],
        "two": [py, "-c", RUNNER, "0", *inspect],
        "rule": [py, "-c", RUNNER, "rule", *inspect],
    }


def measure(trace: Path, rounds: int, busy: bool) -> dict[str, dict[str, float]]:
    cmds = commands(trace)
    run(cmds["floor"])  # the page cache holds the file
    order = list(cmds)
    wall: dict[str, list[float]] = {n: [] for n in order}
    cpu: dict[str, list[float]] = {n: [] for n in order}
    peak: dict[str, int] = dict.fromkeys(order, 0)
    with busy_core(busy):
        for r in range(rounds):
            for name in order[r % len(order) :] + order[: r % len(order)]:
                seconds, rss, used = run(cmds[name])
                wall[name].append(seconds)
                cpu[name].append(used)
                peak[name] = max(peak[name], rss)
            print(f"  round {r + 1}: {load_text()}", file=sys.stderr)
    out = {}
    for name in order:
        out[name] = {
            "wall_s": statistics.median(wall[name]),
            "cpu_s": statistics.median(cpu[name]),
            "ratio": statistics.median(w / f for w, f in zip(wall[name], wall["floor"], strict=True)),
            "cpu_ratio": statistics.median(c / f for c, f in zip(cpu[name], cpu["floor"], strict=True)),
            "peak_mb": peak[name] / 1e6,
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("traces", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--modes", default="quiet,busy")
    args = parser.parse_args()
    for trace in args.traces:
        for mode in args.modes.split(","):
            print(f"{trace.name} {mode} ({load_text()}, {os.cpu_count()} cores)", file=sys.stderr)
            result = measure(trace, args.rounds, busy=mode == "busy")
            for name, f in result.items():
                print(
                    f"{trace.name:>18} {mode:>5} {name:>5}: ratio {f['ratio']:.2f} (cpu {f['cpu_ratio']:.2f}), "
                    f"{f['wall_s']:.2f} s wall, {f['cpu_s']:.2f} s cpu, peak {f['peak_mb']:.0f} MB"
                )
            print(f"  after: {load_text()}")


if __name__ == "__main__":
    main()
