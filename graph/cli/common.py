"""What every verb shares: loading and validating inputs, tokenizer options, error output.

Entry points: :func:`load_inputs` (the paths read through the one load path,
:func:`rollout_graph.ingest.load.files.load_files`, with the cache and the command's progress line,
then analysed), :func:`add_paths` / :func:`add_limit_options` / :func:`limits_from_args` (the
reading flags: docs/limits.md), :class:`StderrProgress`, :func:`fail` and :class:`UsageError`. What
only loading needs is imported by the functions that load, so ``--help`` and a usage error stay
quick (docs/performance.md, "Start-up and the print of the cold command").
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rollout_graph.ingest.limits import Limits, parse_size

if TYPE_CHECKING:
    from rollout_graph.analysis.decode import Decoder
    from rollout_graph.core.records import LoadResult
    from rollout_graph.core.rollout import Rollout
    from rollout_graph.ingest.load.progress import LoadProgress

# What only loading needs (the loader, the analysis, the decoders) is imported by the functions
# that load, and the escaper by the functions that print trace text: building the parser of a
# verb, `--help` and a usage error import neither (docs/performance.md, "Start-up and the print").

USAGE = 2  # a path cannot be read, an unknown session or role, a bad option
OUTPUT_FAILED = 3  # the output file cannot be written (disk full, read-only folder)
INTERRUPTED = 130  # Ctrl-C


class UsageError(Exception):
    """A problem with what the user asked for: printed as one line, exit code 2."""


def terminal_safe(text: str) -> str:
    """``text`` with control characters shown as escapes (``\\x1b``), never interpreted.

    The controls are C0 but newline and tab, DEL, C1 and the bidi controls (the one list,
    ``rollout_graph.escape.CONTROLS``): trace text printed raw could move the cursor, retitle the
    terminal or reorder what the reader sees."""
    from rollout_graph.escape import CONTROLS

    return CONTROLS.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def write_text(text: str, stream=None) -> None:
    """Write trace-derived text to a terminal (stdout by default) with controls escaped."""
    stream = sys.stdout if stream is None else stream
    data = terminal_safe(text).encode("utf-8", "backslashreplace")
    stream.flush()
    stream.buffer.write(data) if hasattr(stream, "buffer") else stream.write(data.decode("utf-8"))
    stream.flush()


def fail(message: str, code: int = USAGE) -> int:
    """Print ``rollout-graph: message`` on stderr and return ``code`` (2 by default)."""
    print(f"rollout-graph: {terminal_safe(message)}", file=sys.stderr)
    return code


@dataclass
class Inputs:
    """Loaded traces and the rollouts selected by ``--session`` (all of them without it)."""

    loaded: LoadResult
    rollouts: list[Rollout]
    decoders: dict[str, Decoder] = field(default_factory=dict)  # by session id
    signals_load: dict[str, Any] | None = None  # the signals join report, with --signals

    def decoder(self, rollout: Rollout) -> Decoder:
        """The decoder the rollout was analysed with."""
        return self.decoders[rollout.session_id]


def check_paths(paths: list[str] | list[Path]) -> None:
    """Raise :class:`UsageError` unless every path exists."""
    missing = [str(p) for p in paths if not Path(p).exists()]
    if missing:
        raise UsageError(f"cannot read {', '.join(missing)}: no such file or directory")


def load_inputs(
    paths: list[str] | list[Path],
    session: str | None = None,
    limits: Limits | None = None,
    tokenizer: Path | None = None,
    hub: bool = False,
    signals: list[str] | list[Path] | None = None,
    threshold: float | None = None,
    corrections: list | None = None,
    settled: bool = False,
    use_cache: bool = True,
    cache_folder: Path | None = None,
) -> Inputs:
    """Load ``paths`` under ``limits`` and analyse the rollouts (only ``session`` when given), each
    with the best decoder found for it (``tokenizer`` or the offline resolution order of
    graph/analysis/decode.py; a tokenizer lets the near-miss analysis recognise re-tokenized
    replays), joining the ``signals`` files to them when given (docs/signals.md) with the chosen
    ``corrections`` (docs/corrections.md). ``use_cache`` False reads the traces again and caches
    nothing (``--no-cache``; also when ``ROLLOUT_GRAPH_CACHE`` is ``off``), ``cache_folder`` is the
    cache's folder (``--cache-dir``; default :func:`rollout_graph.ingest.load.cache.cache_dir`).
    ``settled``: the loaded traces live as long as the process (a console command that prints and
    ends): the garbage collector is off while they load (the console's
    :func:`rollout_graph.cli.main` turns it off at its start already, for the imports), then told
    to stop scanning them (:func:`settle`) and on again.

    Raises:
        UsageError: a path is missing, nothing could be read, the session is unknown, the
            tokenizer path holds no tokenizer, or a signals file cannot be read.
    """
    from rollout_graph.analysis.decode import decoder_for
    from rollout_graph.ingest.load.files import load_files
    from rollout_graph.ingest.load.trace_files import TRACE_SUFFIXES
    from rollout_graph.pipeline import analyse

    check_paths(paths)
    if settled:  # the load makes next to no reference cycles: see settle()
        gc.disable()
    try:
        loaded = load_files(
            paths,
            progress=StderrProgress(),
            limits=limits,
            use_cache=use_cache,
            folder=cache_folder,
            leave_messages=True,
        )
    finally:
        if settled:  # frozen before the collector is back: its first collection would walk all of it
            settle()
            gc.enable()
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
        rollouts.append(analyse(s, decoder=by_model[model]))
    _return_free_memory()
    if not signals:
        if corrections:  # trainer columns the traces carry themselves (prime-rl, NeMo-RL, verifiers ...)
            from rollout_graph.signals.join import with_corrections

            if not any(r.signals is not None for r in rollouts):
                raise UsageError(
                    "--correction needs trainer logprobs: give a signals file with --signals "
                    "(or traces that carry them, docs/formats.md)"
                )
            rollouts = with_corrections(rollouts, corrections)
        return Inputs(loaded, rollouts, decoders)
    from rollout_graph.signals.join import DEFAULT_THRESHOLD, attach_all

    joined, report = attach_all(
        rollouts,
        read_signals_files(signals),
        DEFAULT_THRESHOLD if threshold is None else threshold,
        corrections or (),
    )
    return Inputs(loaded, joined, decoders, report.as_dict())


def settle() -> None:
    """Exempt every object alive now from the garbage collector's scans (``gc.freeze``).

    For a console command whose loaded traces live until it exits. The load makes next to no
    reference cycles (78 objects in the 480 MB vLLM bench trace, 50 in 100,000 malformed lines;
    tests/cli/test_cold_start.py keeps it so), yet each collection during the load, the analysis and
    the JSON contract walks everything loaded so far: 0.04 s of CPU in the load and 0.05 s in the
    contract of 5,000 vLLM calls (docs/performance.md). So :func:`load_inputs` loads with the
    collector off when asked and freezes what it loaded before the collector is on again (the
    other order had its first collection walk every object the load made: 0.01-0.02 s). Nothing
    is kept alive by it: an object no longer referenced is still freed; only those few cycles stay
    until the exit."""
    gc.freeze()


def _return_free_memory() -> None:
    """Give the heap's free pages back to the system once the rollouts are analysed: the parse
    and the analysis leave holes that glibc keeps, and the output built next grows past them
    (docs/performance.md, "Request messages left in the file"). Nothing where there is no glibc."""
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError, TypeError):
        pass


class StderrProgress:
    """Bytes read and calls parsed while a big load runs, on stderr (a line in place on a
    terminal; a line every few seconds in a log). Small loads print nothing."""

    def __init__(self, every: float | None = None) -> None:
        from rollout_graph.ingest.load.pool import PARALLEL_MIN_BYTES

        self.min_bytes = PARALLEL_MIN_BYTES
        self.tty = sys.stderr.isatty()
        self.every = every if every is not None else (0.25 if self.tty else 5.0)
        self.last = 0.0
        self.shown = False

    def __call__(self, progress: LoadProgress) -> None:
        """Show this progress if the load is big and the last line is old enough."""
        now = time.monotonic()
        done = progress.bytes_done >= progress.bytes_total
        if progress.bytes_total < self.min_bytes or (now - self.last < self.every and not done):
            return
        self.last = now
        end = "\n" if done or not self.tty else ""
        print(f"\rrollout-graph: reading {progress.describe()}", end=end, file=sys.stderr, flush=True)


def _folder(text: str) -> Path:
    return Path(text).expanduser()


def cache_options(args: argparse.Namespace) -> dict[str, Any]:
    """``--no-cache`` and ``--cache-dir`` as :func:`load_inputs` takes them (``use_cache``,
    ``cache_folder``): the choice of this command, passed down, never an environment variable
    (a library caller of :func:`rollout_graph.cli.main` finds the cache as it left it).
    ``ROLLOUT_GRAPH_CACHE`` still chooses where none is given (rollout_graph.ingest.load.cache)."""
    return {"use_cache": not getattr(args, "no_cache", False), "cache_folder": getattr(args, "cache_dir", None)}


def read_signals_files(paths: list[str] | list[Path]):
    """Every row of the given signals files, as one :class:`rollout_graph.signals.reading.SignalsFile`.

    Raises:
        UsageError: a file is missing or holds no readable row.
    """
    from rollout_graph.signals.reading import SignalsError, SignalsFile, read_signals

    out = SignalsFile()
    for path in paths:
        try:
            out.extend(read_signals(path))
        except SignalsError as exc:
            raise UsageError(f"signals: {exc}") from exc
    return out


def correction_arg(text: str):
    """``--correction``'s type: a parsed :class:`rollout_graph.signals.corrections.Correction`."""
    from rollout_graph.signals.corrections import CorrectionError, parse_correction

    try:
        return parse_correction(text)
    except CorrectionError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_correction(command: argparse.ArgumentParser) -> None:
    """``--correction NAME[:key=value,...]`` (repeatable; docs/corrections.md)."""
    command.add_argument(
        "--correction",
        action="append",
        type=correction_arg,
        metavar="NAME[:key=value,...]",
        help="an off-policy correction to evaluate on the joined signals (repeatable): token_tis:cap=2, "
        "token_mask:low=0.5,high=5, seq_tis:cap=2, seq_mask:low=0,high=3, geo_mask:low=0.999,high=1.001 "
        "(docs/corrections.md)",
    )


def chosen_corrections(args: argparse.Namespace) -> list:
    """The ``--correction`` values, each once (same name and parameters), in the order given."""
    out: dict[str, Any] = {}
    for c in getattr(args, "correction", None) or ():
        out.setdefault(c.label, c)
    return list(out.values())


def add_signals(command: argparse.ArgumentParser) -> None:
    """``--signals FILE`` (repeatable), ``--mismatch-threshold NATS`` and ``--correction``."""
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
    add_correction(command)


def add_paths(command: argparse.ArgumentParser) -> None:
    """The positional PATH arguments and ``--session``, as every reading verb takes them, and
    the parsed-trace cache options (docs/performance.md)."""
    command.add_argument(
        "paths", nargs="+", metavar="PATH", help="trace files or directories (.jsonl, .json, .gz, .zst)"
    )
    command.add_argument("--session", help="only this session id")
    add_limit_options(command)
    command.add_argument(
        "--cache-dir",
        type=_folder,
        metavar="DIR",
        help="parsed-trace cache folder (default ~/.cache/rollout-graph)",
    )
    command.add_argument("--no-cache", action="store_true", help="parse the traces again; do not cache them")


_LIMIT_FLAGS = (
    ("--max-file-bytes", "max_file_bytes", "decompressed bytes read from one file (default 4G)"),
    ("--max-line-bytes", "max_line_bytes", "bytes in one line or one JSON document (default 256M)"),
    ("--max-depth", "max_depth", "JSON nesting depth (default 512)"),
    ("--max-ids", "max_ids", "token ids in one array (default 64M)"),
    ("--max-tool-index", "max_tool_index", "a stream chunk's tool-call index (default 1024)"),
    ("--max-expanded-ids", "max_expanded_ids", "token ids the calls of a rollout document expand to (default 64M)"),
    ("--max-sessions", "max_sessions", "rollouts in one load (default 100000; audit for more)"),
    ("--max-parquet-rows", "max_parquet_rows", "rows read from one Parquet file (default 4M)"),
    ("--max-parquet-bytes", "max_parquet_bytes", "bytes one Parquet file decodes to (default 2G)"),
    ("--max-memory", "max_memory_bytes", "stop reading a file once resident memory passes this (default: no cap)"),
)


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_limit_options(command: argparse.ArgumentParser) -> None:
    """The ``--max-*`` limits (docs/limits.md); sizes take K/M/G suffixes."""
    group = command.add_argument_group("limits (docs/limits.md; also ROLLOUT_GRAPH_MAX_* variables)")
    for flag, dest, text in _LIMIT_FLAGS:
        group.add_argument(flag, dest=dest, type=_size, default=None, metavar="N", help=text)


def limits_from_args(args: argparse.Namespace) -> Limits:
    """The defaults, then ``ROLLOUT_GRAPH_MAX_*`` variables, then ``--max-*`` flags.

    Raises:
        UsageError: an environment variable is not a size.
    """
    try:
        limits = Limits.from_env()
    except ValueError as exc:
        raise UsageError(f"ROLLOUT_GRAPH_MAX_*: {exc}") from None
    changes = {dest: getattr(args, dest) for _, dest, _ in _LIMIT_FLAGS if getattr(args, dest, None) is not None}
    return replace(limits, **changes) if changes else limits


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
        except KeyboardInterrupt:
            return fail("interrupted; no output file was left behind", INTERRUPTED)
        except BrokenPipeError:  # `rollout-graph inspect ... | head`
            return 0

    wrapper.__doc__ = run.__doc__
    return wrapper
