"""The crossover of the two-part read (graph/ingest/load/two_parts.py, "two cores"): whole-process
``rollout-graph inspect --json --no-cache`` read in one process vs this process plus one forked
helper, against the orjson floor (``floor_orjson.py``), interleaved, quiet and with one core kept
busy by a spinning interpreter.

- ``one``: the file read in one process (the two-part read switched off);
- ``two``: the two-part read whatever the free cores and the file's size;
- ``rule``: what the command does by itself (:func:`rollout_graph.ingest.load.cpu_window.free_cores_now`
  against ``TWO_PART_MIN_FREE_CORES``);
- ``floor``: ``orjson.loads`` of every line, nothing else.

The rounds are ``bench_cold.py``'s (:func:`bench_cold.interleaved`: every command once per round in
a rotating order, the package from bytecode written once, as pip installs it), with the busy core a
spinning interpreter in a session of its own (with the kernel's autogroup, one in this benchmark's
session competes with the command for one session's share rather than for a core). Each figure is
the median of the rounds' ratios to the floor, wall-clock and CPU (user + system of the command and
its helper, from ``os.wait4``); the 1-minute load average is printed beside each round (the machine
may be shared); peak memory is per token when ``TRACE.tokens`` (bench_cold.py's) is beside the trace.
The page cache is warmed first: every command reads the file from memory.

``python benchmarks/bench_two_cores.py TRACE.jsonl [TRACE2 ...] [--rounds 3] [--modes quiet,busy]``
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_cold import interleaved, load_text, package_env, run, write_bytecode  # noqa: E402

# The command with the two-part read's threshold of free cores set (inf: never; 0: always, any size;
# rule: the console command's own judgement, its start-up window opened before anything is imported).
# numpy is loaded with one BLAS thread first, as the console command loads it (``one_blas_thread``):
# importing ``two_parts`` loads numpy, and without it OpenBLAS's spinning threads add 0.07-0.1 s of CPU.
# The modules are found where this checkout has them, else where a checkout from before the ingest
# folders (graph/ingest/parallel.py, cpu_window.py) had them: bench_against.py runs both.
RUNNER = (
    "import gc, sys\n"
    "try:\n from rollout_graph.ingest.load import cpu_window\n"
    "except ImportError:\n from rollout_graph.ingest import cpu_window\n"
    "cpu_window.mark_start(); gc.disable()\n"
    "from rollout_graph.cli import one_blas_thread; one_blas_thread()\n"
    "try:\n from rollout_graph.ingest.load import two_parts as p\n"
    "except ImportError:\n from rollout_graph.ingest import parallel as p\n"
    "v = sys.argv.pop(1); p.TWO_PART_MIN_FREE_CORES = float(v) if v != 'rule' else p.TWO_PART_MIN_FREE_CORES; "
    "p.TWO_PART_MIN_BYTES = 0 if v == '0' else p.TWO_PART_MIN_BYTES; "
    "from rollout_graph.cli import main; sys.exit(main())"
)


def commands(trace: Path, pycache: Path | None) -> dict[str, tuple[list[str], dict[str, str] | None, str | None]]:
    py = sys.executable
    inspect = ["inspect", "--json", "--no-cache", str(trace)]
    env = package_env(pycache)
    return {
        "floor": ([py, str(HERE / "floor_orjson.py"), str(trace)], package_env(None), None),
        "one": ([py, "-c", RUNNER, "inf", *inspect], env, None),
        "two": ([py, "-c", RUNNER, "0", *inspect], env, None),
        "rule": ([py, "-c", RUNNER, "rule", *inspect], env, None),
    }


def measure(trace: Path, rounds: int, busy: bool, pycache: Path | None) -> dict[str, dict[str, float]]:
    cmds = commands(trace, pycache)
    for name in ("one", "two"):
        write_bytecode(*cmds[name])  # the package's .pyc, as pip writes them (bench_cold.py)
    run(*cmds["floor"])  # the page cache holds the file
    wall, cpu, peak = interleaved(
        cmds,
        rounds,
        busy,
        own_session=True,
        after_round=lambda r: print(f"  round {r + 1}: {load_text()}", file=sys.stderr),
    )
    out = {}
    for name in cmds:
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
    with contextlib.ExitStack() as stack:
        pycache = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rg-two-pyc-")))
        for trace in args.traces:
            tokens_file = trace.with_suffix(".tokens")
            tokens = int(tokens_file.read_text()) if tokens_file.exists() else 0
            for mode in args.modes.split(","):
                print(f"{trace.name} {mode} ({load_text()}, {os.cpu_count()} cores)", file=sys.stderr)
                result = measure(trace, args.rounds, busy=mode == "busy", pycache=pycache)
                for name, f in result.items():
                    per_token = f" = {f['peak_mb'] * 1e6 / tokens:.1f} B/token" if tokens else ""
                    print(
                        f"{trace.name:>18} {mode:>5} {name:>5}: ratio {f['ratio']:.2f} (cpu {f['cpu_ratio']:.2f}), "
                        f"{f['wall_s']:.2f} s wall, {f['cpu_s']:.2f} s cpu, peak {f['peak_mb']:.0f} MB{per_token}"
                    )
                print(f"  after: {load_text()}")


if __name__ == "__main__":
    main()
