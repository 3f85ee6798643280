"""The cold command-line path, as a user meets it: whole-process ``rollout-graph inspect --json
--no-cache`` against the floor (``floor_orjson.py``: ``orjson.loads`` of every line, nothing
else) and against the previous release (the code of 2026-11-30 12:22, before the parallel reader
and the cache), interleaved in one run, on both trace shapes of ``synthetic.py``:

- ``flat``: 1,000 calls as trace entries with flat token arrays (~225 MB);
- ``vllm``: 5,000 calls as vLLM chat pairs with top-5 logprobs (~480 MB).

Each shape is timed quiet and with one core kept busy by another process (a spinning
interpreter). A round runs every command once, in a rotating order (A, B, C, then B, C, A ...), so
load changes on a shared machine hit all of them alike; each figure is the median of the rounds'
ratios to the floor. Peak resident memory is each child's ``ru_maxrss`` (``os.wait4``). The cached
reopen (``inspect --json`` once a persistent cache entry exists) is a separate figure. With
``--steps`` each step's share (import, read, parse, link, analyse, print) is measured in-process by
``cold_steps.py``.

Bytecode: by default the package's modules (ours and the previous release's) run from bytecode,
as from a ``pip install`` (pip compiles every module as it installs a wheel): it is written once,
before the rounds, to a temporary ``PYTHONPYCACHEPREFIX`` folder the measured children read it
from (removed at the end). ``--bytecode source`` runs them as the environment says instead: with
``PYTHONDONTWRITEBYTECODE=1`` and an editable install no ``.pyc`` is ever written, so every run
compiles the package's source again (about 0.06 s of CPU on the inspect path, which the floor
never pays: its modules are the standard library's and orjson's, compiled when installed). The
floor runs as it always did, in the environment as given.

``python benchmarks/bench_cold.py [--rounds 5] [--shapes flat,vllm] [--modes quiet,busy]
[--data DIR] [--prev DIR] [--steps] [--bytecode installed|source]``. Traces go to ``DIR`` (default: a temporary folder, removed
at the end); the previous release is checked out with ``git worktree add`` to a temporary folder
(removed at the end) unless ``--prev`` names a checkout of it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
# The release before the parallel reader and the persistent cache: the last commit of this date.
PREV_BEFORE = "2026-11-30 12:23:00 +0000"
SHAPES = {
    "flat": {"calls": 1000, "max_context": 46_000, "flat": True},
    "vllm": {"calls": 5000, "max_context": 3_000, "summary_tokens": 50},
}


def bytecode_text(pycache: Path | None) -> str:
    if pycache is not None:
        return "installed (the package's .pyc written once, as pip writes them)"
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return "source (PYTHONDONTWRITEBYTECODE is set: a package without .pyc files is compiled every run)"
    return "as the environment says"


def load_text() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f}"


def run(command: list[str], env: dict[str, str] | None = None, cwd: str | None = None) -> tuple[float, int, float]:
    """Seconds, peak resident bytes and CPU seconds (user + system) of one child process (its
    output discarded)."""
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=cwd)
    assert child.stderr is not None
    err = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({child.returncode}): {err.decode(errors='replace')[-2000:]}")
    return elapsed, usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime


@contextlib.contextmanager
def busy_core(on: bool, own_session: bool = False) -> Iterator[None]:
    """Another process keeping one core busy for the duration (a spinning interpreter);
    ``own_session``: in a session of its own (with the kernel's autogroup, one in this
    benchmark's session competes for the session's share of the CPU rather than for a core)."""
    if not on:
        yield
        return
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=own_session)
    try:
        time.sleep(0.3)
        yield
    finally:
        spinner.kill()
        spinner.wait()


@contextlib.contextmanager
def previous_release(given: str | None) -> Iterator[Path]:
    """A checkout of the previous release (``git worktree add``, removed afterwards)."""
    if given:
        yield Path(given)
        return
    commit = subprocess.run(
        ["git", "-C", str(REPO), "log", "-1", "--format=%H", f"--before={PREV_BEFORE}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    folder = Path(tempfile.mkdtemp(prefix="rg-prev-"))
    shutil.rmtree(folder)
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", str(folder), commit], capture_output=True, check=True
    )
    try:
        yield folder
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(folder)], capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


def package_env(pycache: Path | None) -> dict[str, str]:
    """The environment the package's commands run in: bytecode read from ``pycache`` when given
    (``PYTHONPYCACHEPREFIX``), else the environment as given."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return env if pycache is None else env | {"PYTHONPYCACHEPREFIX": str(pycache)}


def write_bytecode(command: list[str], env: dict[str, str], cwd: str | None = None) -> None:
    """Run ``command`` once with bytecode writing allowed, so its modules' ``.pyc`` files exist in
    the ``PYTHONPYCACHEPREFIX`` folder before anything is timed (the environment may forbid it)."""
    if "PYTHONPYCACHEPREFIX" in env:
        run(command, {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}, cwd)


def commands(
    trace: Path, prev: Path, cache_dir: Path, pycache: Path | None = None
) -> dict[str, tuple[list[str], dict[str, str], str | None]]:
    floor_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env = package_env(pycache)
    prev_env = env | {"PYTHONPATH": str(prev)}
    py = sys.executable
    return {
        "ours": ([py, "-m", "rollout_graph", "inspect", "--json", "--no-cache", str(trace)], env, None),
        "floor": ([py, str(HERE / "floor_orjson.py"), str(trace)], floor_env, None),
        # The old package is the folder `graph` of that checkout; run from there so no other one shadows it.
        "prev": ([py, "-m", "graph", "inspect", "--json", str(trace)], prev_env, str(prev)),
        "reopen": (
            [py, "-m", "rollout_graph", "inspect", "--json", "--cache-dir", str(cache_dir), str(trace)],
            env,
            None,
        ),
    }


def measure(
    trace: Path, prev: Path, cache_dir: Path, rounds: int, busy: bool, pycache: Path | None = None
) -> dict[str, dict[str, float]]:
    cmds = commands(trace, prev, cache_dir, pycache)
    # bytecode of everything each command imports: the reopen's twice, writing the cache entry
    # and then reading it (pyarrow's modules, else compiled in every timed reopen)
    for name in ("ours", "prev", "reopen", "reopen"):
        write_bytecode(*cmds[name])
    run(*cmds["reopen"])  # writes the cache entry the reopen figure reads
    run(*cmds["floor"])  # the page cache holds the file: every command reads it from memory
    times, cpus, peaks = interleaved(cmds, rounds, busy)
    out = {}
    for name in cmds:
        ratios = [t / f for t, f in zip(times[name], times["floor"], strict=True)]
        cpu_ratios = [t / f for t, f in zip(cpus[name], cpus["floor"], strict=True)]
        out[name] = {
            "median_s": statistics.median(times[name]),
            "ratio": statistics.median(ratios),
            "ratio_min": min(ratios),
            "ratio_max": max(ratios),
            "cpu_ratio": statistics.median(cpu_ratios),
            "peak_rss": peaks[name],
        }
    return out


def interleaved(
    cmds: dict[str, tuple[list[str], dict[str, str] | None, str | None]],
    rounds: int,
    busy: bool,
    own_session: bool = False,
    after_round: Callable[[int], None] | None = None,
) -> tuple[dict[str, list[float]], dict[str, list[float]], dict[str, int]]:
    """Every command once per round, in a rotating order (A, B, C, then B, C, A ...), quiet or
    with one core busy: each one's seconds and CPU seconds per round and its peak resident bytes."""
    order = list(cmds)
    times: dict[str, list[float]] = {name: [] for name in order}
    cpus: dict[str, list[float]] = {name: [] for name in order}
    peaks: dict[str, int] = dict.fromkeys(order, 0)
    with busy_core(busy, own_session):
        for r in range(rounds):
            for name in order[r % len(order) :] + order[: r % len(order)]:
                seconds, peak, cpu = run(*cmds[name])
                times[name].append(seconds)
                cpus[name].append(cpu)
                peaks[name] = max(peaks[name], peak)
            if after_round is not None:
                after_round(r)
    return times, cpus, peaks


def generate(trace: Path, calls: int, spec: dict) -> int:
    """Write a trace in a child process (this one stays small: a child's peak memory counts the
    parent's resident pages at the fork); returns its token count."""
    options = [f"--{k.replace('_', '-')}={v}" for k, v in spec.items() if k != "flat"]
    options += ["--flat"] if spec.get("flat") else []
    done = subprocess.run(
        [sys.executable, str(HERE / "synthetic.py"), str(trace), f"--calls={calls}", *options],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout.split(" calls, ", 1)[1].split(" tokens", 1)[0].replace(",", ""))


def steps(trace: Path, pycache: Path | None = None) -> str:
    command = [sys.executable, str(HERE / "cold_steps.py"), str(trace)]
    env = package_env(pycache)
    write_bytecode(command, env)
    done = subprocess.run(command, capture_output=True, text=True, check=True, env=env)
    return done.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--shapes", default="flat,vllm")
    parser.add_argument("--modes", default="quiet,busy")
    parser.add_argument("--data", type=Path, help="folder for the generated traces (kept)")
    parser.add_argument("--prev", help="a checkout of the previous release (default: git worktree add)")
    parser.add_argument("--steps", action="store_true", help="each step's share, measured in-process")
    parser.add_argument(
        "--bytecode",
        choices=("installed", "source"),
        default="installed",
        help="the package's modules from bytecode written once, as pip installs them (default), or "
        "as the environment says (PYTHONDONTWRITEBYTECODE=1 with an editable install: compiled every run)",
    )
    args = parser.parse_args()
    table: list[str] = []
    with contextlib.ExitStack() as stack:
        data = args.data or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rg-cold-")))
        data.mkdir(parents=True, exist_ok=True)
        cache_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rg-cold-cache-")))
        prev = stack.enter_context(previous_release(args.prev))
        pycache = None
        if args.bytecode == "installed":
            pycache = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rg-cold-pyc-")))
        print(f"previous release: {prev}; {os.cpu_count()} cores; {load_text()}; bytecode: {bytecode_text(pycache)}")
        for shape in args.shapes.split(","):
            spec = dict(SHAPES[shape])
            calls = spec.pop("calls")
            trace = (data / f"cold-{shape}.jsonl").resolve()
            tokens_file = trace.with_suffix(".tokens")
            if not trace.exists() or not tokens_file.exists():
                tokens_file.write_text(str(generate(trace, calls, spec)))
            tokens = int(tokens_file.read_text())
            size = trace.stat().st_size
            print(f"\n## {shape}: {calls:,} calls, {tokens / 1e6:.1f}M tokens, {size / 1e6:.0f} MB")
            if args.steps:
                print(f"steps (s): {steps(trace, pycache)}")
            for mode in args.modes.split(","):
                before = load_text()
                result = measure(trace, prev, cache_dir, args.rounds, busy=mode == "busy", pycache=pycache)
                print(f"{mode} ({args.rounds} interleaved rounds; {before} -> {load_text()}):")
                for name, r in result.items():
                    print(
                        f"  {name:6} {r['median_s']:6.2f} s  ratio to floor {r['ratio']:.2f}"
                        f" ({r['ratio_min']:.2f}-{r['ratio_max']:.2f}), CPU {r['cpu_ratio']:.2f}"
                        f"  peak {r['peak_rss'] / 1e6:5.0f} MB = {r['peak_rss'] / tokens:.1f} B/token"
                    )
                ours, old, reopen = result["ours"], result["prev"], result["reopen"]
                table.append(
                    f"| {shape}, {mode} | **{ours['ratio']:.2f}** ({ours['ratio_min']:.2f}-{ours['ratio_max']:.2f})"
                    f" | {ours['cpu_ratio']:.2f} | {old['ratio']:.2f} | {reopen['ratio']:.2f}"
                    f" | {ours['peak_rss'] / 1e6:.0f} MB ({ours['peak_rss'] / tokens:.1f} B/token)"
                    f" | {before.removeprefix('load ')} -> {load_text().removeprefix('load ')} |"
                )
    print(
        f"\n{args.rounds} interleaved rounds, {os.cpu_count()} cores, bytecode {args.bytecode}; "
        "ratios to the floor (lower is better):\n"
    )
    print(
        "| shape, mode | ours (min-max) | ours, CPU time | previous release | reopen | peak (ours) | load (1, 5, 15 min) |"
    )
    print("|---|---|---|---|---|---|---|")
    print("\n".join(table))


if __name__ == "__main__":
    main()
