"""What every verb shares: loading and validating inputs, tokenizer options, error output."""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from graph.core.records import LoadResult
from graph.core.rollout import Rollout, analyse
from graph.ingest import cache
from graph.ingest.loading import TRACE_SUFFIXES, trace_files
from graph.ingest.parallel import PARALLEL_MIN_BYTES, LoadProgress


class UsageError(Exception):
    """A problem with what the user asked for: printed as one line, exit code 2."""


def fail(message: str) -> int:
    """Print ``rollout-graph: message`` on stderr and return exit code 2."""
    print(f"rollout-graph: {message}", file=sys.stderr)
    return 2


@dataclass
class Inputs:
    """Loaded traces and the rollouts selected by ``--session`` (all of them without it)."""

    loaded: LoadResult
    rollouts: list[Rollout]


def check_paths(paths: list[str] | list[Path]) -> None:
    """Raise :class:`UsageError` unless every path exists."""
    missing = [str(p) for p in paths if not Path(p).exists()]
    if missing:
        raise UsageError(f"cannot read {', '.join(missing)}: no such file or directory")


def load_inputs(paths: list[str] | list[Path], session: str | None = None) -> Inputs:
    """Load ``paths`` and analyse the rollouts (only ``session`` when given).

    Raises:
        UsageError: a path is missing, nothing could be read, or the session is unknown.
    """
    check_paths(paths)
    files = [f for p in paths for f in trace_files(p)]
    loaded = cache.load_files(files, progress=StderrProgress(), use_cache=cache.enabled())
    if loaded.nothing_readable:
        suffixes = ", ".join(TRACE_SUFFIXES)
        reason = loaded.skipped[0].reason if loaded.skipped else f"no trace files ({suffixes})"
        raise UsageError(f"cannot read {', '.join(map(str, paths))}: {reason}")
    sessions = list(loaded.sessions.values())
    if session is not None:
        sessions = [s for s in sessions if s.session_id == session]
        if not sessions:
            known = ", ".join(list(loaded.sessions)[:10]) or "none"
            raise UsageError(f"no session {session!r} (sessions: {known})")
    return Inputs(loaded, [analyse(s) for s in sessions])


class StderrProgress:
    """Bytes read and calls parsed while a big load runs, on stderr (a line in place on a
    terminal; a line every few seconds in a log). Small loads print nothing."""

    def __init__(self, every: float | None = None) -> None:
        self.tty = sys.stderr.isatty()
        self.every = every if every is not None else (0.25 if self.tty else 5.0)
        self.last = 0.0
        self.shown = False

    def __call__(self, progress: LoadProgress) -> None:
        """Show this progress if the load is big and the last line is old enough."""
        now = time.monotonic()
        done = progress.bytes_done >= progress.bytes_total
        if progress.bytes_total < PARALLEL_MIN_BYTES or (now - self.last < self.every and not done):
            return
        self.last = now
        end = "\n" if done or not self.tty else ""
        print(f"\rrollout-graph: reading {progress.describe()}", end=end, file=sys.stderr, flush=True)


class _CacheDir(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None) -> None:
        os.environ[cache.ENV_DIR] = "off" if option_string == "--no-cache" else str(values)
        setattr(namespace, self.dest, values)


def add_paths(command: argparse.ArgumentParser) -> None:
    """The positional PATH arguments and ``--session``, as every reading verb takes them, and
    the parsed-trace cache options (docs/performance.md)."""
    command.add_argument(
        "paths", nargs="+", metavar="PATH", help="trace files or directories (.jsonl, .json, .gz, .zst)"
    )
    command.add_argument("--session", help="only this session id")
    command.add_argument(
        "--cache-dir",
        action=_CacheDir,
        metavar="DIR",
        help="parsed-trace cache folder (default ~/.cache/rollout-graph)",
    )
    command.add_argument(
        "--no-cache", action=_CacheDir, nargs=0, dest="cache_dir", help="parse the traces again; do not cache them"
    )


def add_tokenizer_options(command: argparse.ArgumentParser) -> None:
    """``--tokenizer`` and ``--hub``, for verbs that decode token ids."""
    command.add_argument("--tokenizer", type=Path, metavar="PATH", help="tokenizer.json, or a folder holding one")
    command.add_argument("--hub", action="store_true", help="allow downloading the tokenizer from the Hugging Face Hub")


def guarded(run):
    """Wrap a verb's ``run`` so a :class:`UsageError` becomes one line on stderr and exit 2."""

    def wrapper(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except UsageError as exc:
            return fail(str(exc))

    wrapper.__doc__ = run.__doc__
    return wrapper
