"""One-process cold ``inspect --json --no-cache`` of this checkout against other checkouts and the
floor, interleaved: the A/B behind the cold path's before -> after figures.

Each checkout DIR runs the command with its own interpreter (``DIR/.venv/bin/python``, or this
one's with ``DIR`` first on ``PYTHONPATH`` when it has no venv), read in one process (the
two-part read switched off, as it is with a core busy), the collector off before the imports as
the console command does; the package from bytecode written once per checkout, as pip installs
it (``bench_cold.py``). The rounds are ``bench_cold.interleaved``'s (every command once per round,
a rotating order); ``--busy`` keeps one core busy with a spinning interpreter in a session of its
own. Prints each command's median CPU seconds and the median, min and max of its ratio to the
floor's CPU in the same round, and the median ratio of the wall-clock times.

``python benchmarks/bench_against.py TRACE.jsonl [--rounds 5] [--busy] [NAME=DIR ...]``: this
checkout is always measured (as ``this``); e.g. ``start=../start-checkout``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_cold import interleaved, load_text, package_env, write_bytecode  # noqa: E402
from bench_two_cores import RUNNER  # noqa: E402  # its first argument "inf": never two parts
from checkout import named_checkouts  # noqa: E402


def command(checkout: Path, trace: Path, pycache: Path) -> tuple[list[str], dict[str, str], None]:
    venv = checkout / ".venv" / "bin" / "python"
    env = package_env(pycache)
    if venv.exists():
        python = str(venv)
    else:
        python, env = sys.executable, env | {"PYTHONPATH": str(checkout)}
    return [python, "-c", RUNNER, "inf", "inspect", "--json", "--no-cache", str(trace)], env, None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("checkouts", nargs="*", metavar="NAME=DIR")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--busy", action="store_true", help="keep one core busy")
    args = parser.parse_intermixed_args()
    named = named_checkouts(parser, args.checkouts)
    work = Path(tempfile.mkdtemp(prefix="rg-against-"))
    try:
        cmds = {"floor": ([sys.executable, str(HERE / "floor_orjson.py"), str(args.trace)], package_env(None), None)}
        for name, folder in named.items():
            cmds[name] = command(folder, args.trace, work / name)
            write_bytecode(*cmds[name])
        print(f"{args.trace}: {args.rounds} rounds, {'one core busy' if args.busy else 'quiet'}, {load_text()}")
        wall, cpu, _ = interleaved(
            cmds,
            args.rounds,
            args.busy,
            own_session=True,
            after_round=lambda r: print(f"  round {r + 1}: {load_text()}"),
        )
        for name in cmds:
            ratios = [a / b for a, b in zip(cpu[name], cpu["floor"], strict=True)]
            walls = [a / b for a, b in zip(wall[name], wall["floor"], strict=True)]
            print(
                f"{name:>8}: CPU {statistics.median(cpu[name]):.3f} s, ratio to the floor's CPU "
                f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}), wall {statistics.median(walls):.3f}"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
