"""What every verb shares: loading and validating inputs, tokenizer options, error output."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graph.core.records import LoadResult
from graph.core.rollout import Rollout, analyse
from graph.ingest.loading import TRACE_SUFFIXES, load_paths


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
    signals_load: dict[str, Any] | None = None  # the signals join report, with --signals


def check_paths(paths: list[str] | list[Path]) -> None:
    """Raise :class:`UsageError` unless every path exists."""
    missing = [str(p) for p in paths if not Path(p).exists()]
    if missing:
        raise UsageError(f"cannot read {', '.join(missing)}: no such file or directory")


def load_inputs(
    paths: list[str] | list[Path],
    session: str | None = None,
    signals: list[str] | list[Path] | None = None,
    threshold: float | None = None,
) -> Inputs:
    """Load ``paths`` and analyse the rollouts (only ``session`` when given), joining the
    ``signals`` files to them when given (docs/signals.md).

    Raises:
        UsageError: a path is missing, nothing could be read, the session is unknown, or a
            signals file cannot be read.
    """
    check_paths(paths)
    loaded = load_paths(paths)
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
    rollouts = [analyse(s) for s in sessions]
    if not signals:
        return Inputs(loaded, rollouts)
    from graph.signals.join import DEFAULT_THRESHOLD, attach_all

    joined, report = attach_all(
        rollouts, read_signals_files(signals), DEFAULT_THRESHOLD if threshold is None else threshold
    )
    return Inputs(loaded, joined, report.as_dict())


def read_signals_files(paths: list[str] | list[Path]):
    """Every row of the given signals files, as one :class:`graph.signals.reading.SignalsFile`.

    Raises:
        UsageError: a file is missing or holds no readable row.
    """
    from graph.signals.reading import SignalsError, SignalsFile, read_signals

    out = SignalsFile()
    for path in paths:
        try:
            out.extend(read_signals(path))
        except SignalsError as exc:
            raise UsageError(f"signals: {exc}") from exc
    return out


def add_signals(command: argparse.ArgumentParser) -> None:
    """``--signals FILE`` (repeatable) and ``--mismatch-threshold NATS``."""
    command.add_argument(
        "--signals",
        action="append",
        metavar="FILE",
        help="join a signals file (JSONL or Parquet rows keyed by session_id and leaf_id; docs/signals.md)",
    )
    command.add_argument(
        "--mismatch-threshold",
        type=float,
        default=1.0,
        metavar="NATS",
        help="WARN logprob_mismatch on a call whose trainer and inference logprobs differ by more (default 1)",
    )


def add_paths(command: argparse.ArgumentParser) -> None:
    """The positional PATH arguments and ``--session``, as every reading verb takes them."""
    command.add_argument(
        "paths", nargs="+", metavar="PATH", help="trace files or directories (.jsonl, .json, .gz, .zst)"
    )
    command.add_argument("--session", help="only this session id")


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
