"""What every verb shares: loading and validating inputs, tokenizer options, error output."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

from graph.analysis.decode import Decoder, decoder_for
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
    decoders: dict[str, Decoder] = field(default_factory=dict)  # by session id

    def decoder(self, rollout: Rollout) -> Decoder:
        """The decoder the rollout was analysed with."""
        return self.decoders[rollout.session_id]


def check_paths(paths: list[str] | list[Path]) -> None:
    """Raise :class:`UsageError` unless every path exists."""
    missing = [str(p) for p in paths if not Path(p).exists()]
    if missing:
        raise UsageError(f"cannot read {', '.join(missing)}: no such file or directory")


def load_inputs(
    paths: list[str] | list[Path], session: str | None = None, tokenizer: Path | None = None, hub: bool = False
) -> Inputs:
    """Load ``paths`` and analyse the rollouts (only ``session`` when given), each with the best
    decoder found for it (``tokenizer`` or the offline resolution order of graph/analysis/decode.py;
    a tokenizer lets the near-miss analysis recognise re-tokenized replays).

    Raises:
        UsageError: a path is missing, nothing could be read, the session is unknown, or the
            tokenizer path holds no tokenizer.
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
    decoders: dict[str, Decoder] = {}
    by_model: dict[str | None, Decoder] = {}
    rollouts = []
    for s in sessions:
        model = next((c.model for c in s.calls if c.model), None)
        if model not in by_model:
            try:
                by_model[model] = decoder_for(s.calls, [Path(p) for p in paths], tokenizer, hub)
            except FileNotFoundError as exc:
                raise UsageError(str(exc)) from exc
        decoders[s.session_id] = by_model[model]
        rollouts.append(analyse(s, by_model[model]))
    return Inputs(loaded, rollouts, decoders)


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
