"""``rollout-graph audit``: one row per rollout across a corpus, written as Parquet."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from rollout_graph.cli.common import (
    OUTPUT_FAILED,
    UsageError,
    add_limit_options,
    add_signals,
    chosen_corrections,
    fail,
    guarded,
    limits_from_args,
)
from rollout_graph.reports.output import OutputError


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``audit``."""
    command = sub.add_parser("audit", help="one row per rollout across a corpus, written as Parquet")
    command.add_argument("inputs", nargs="+", metavar="INPUT", help="trace files, directories (recursive) or globs")
    command.add_argument("--out", type=Path, required=True, help="the Parquet file to write")
    command.add_argument(
        "--engine", choices=["local", "ray"], default="local", help="a process pool here (default) or Ray"
    )
    command.add_argument(
        "--workers", type=int, default=os.cpu_count() or 1, help="parallel workers (default: all cores)"
    )
    command.add_argument("--address", help="with --engine ray: join this Ray cluster instead of starting one")
    add_limit_options(command)
    add_signals(command)
    command.set_defaults(run=guarded(run))


def stderr_progress(done: int, total: int, rows: int) -> None:
    """A one-line progress bar on stderr."""
    width = 30
    filled = width * done // max(total, 1)
    sys.stderr.write(f"\raudit [{'#' * filled}{'.' * (width - filled)}] {done}/{total} files · {rows:,} rollouts")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def run(args: argparse.Namespace) -> int:
    """Audit every input file and write the rows."""
    from rollout_graph.reports import audit

    files = audit.expand_inputs(args.inputs)
    if not files:
        raise UsageError(f"no trace files in {', '.join(args.inputs)}")
    limits = limits_from_args(args)
    signals = tuple(args.signals or ())
    corrections = tuple(c.label for c in chosen_corrections(args))
    if signals:
        from rollout_graph.signals.reading import SignalsError

        try:
            audit.load_signals(signals)
        except SignalsError as exc:
            raise UsageError(f"signals: {exc}") from exc
    if args.engine == "ray":
        rows = audit.run_ray(
            files, args.workers, args.address, stderr_progress, limits, signals, args.mismatch_threshold, corrections
        )
    else:
        rows = audit.run_local(
            files, args.workers, stderr_progress, limits, signals, args.mismatch_threshold, corrections
        )
    try:
        audit.write_parquet(rows, args.out)
    except OutputError as exc:
        return fail(f"{exc} (nothing written; an older file there is unchanged)", OUTPUT_FAILED)
    failed = [r for r in rows if r["error"]]
    note = f" ({len(failed)} files could not be read)" if failed else ""
    print(f"{len(rows):,} rollouts from {len(files):,} files -> {args.out}{note}", file=sys.stderr)
    if corrections:  # what each correction does over the whole corpus (docs/corrections.md)
        from rollout_graph.signals.corrections import combine, text_lines

        for line in text_lines(combine(r["corrections"] for r in rows)):
            print(f"  correction {line}", file=sys.stderr)
    for row in failed[:10]:
        print(f"  failed {row['source_file']}: {row['error']}", file=sys.stderr)
    if len(failed) > 10:
        print(f"  ... and {len(failed) - 10} more (the error column of {args.out})", file=sys.stderr)
    return 0
