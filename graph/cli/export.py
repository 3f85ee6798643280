"""``rollout-graph export``: training rows or trace entries as JSONL or Parquet, OpenEnv training
traces as JSONL, or the graph as GraphML. The extension of ``--out`` picks the file format (.jsonl,
.parquet, .graphml); an unknown one is refused before anything is read."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rollout_graph.cli.common import (
    OUTPUT_FAILED,
    UsageError,
    add_paths,
    add_signals,
    cache_options,
    chosen_corrections,
    fail,
    guarded,
    limits_from_args,
    load_inputs,
)
from rollout_graph.reports import export, notes


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``export``."""
    command = sub.add_parser(
        "export", help="write training rows (or trace entries) as JSONL or Parquet, or the graph as GraphML"
    )
    add_paths(command)
    command.add_argument(
        "--out",
        type=Path,
        required=True,
        help="rows.jsonl, rows.parquet or graph.graphml: the extension picks the format",
    )
    command.add_argument(
        "--roles",
        default="agent,auxiliary,discarded",
        help="with --format rows: roles to write (default: all, labelled)",
    )
    command.add_argument(
        "--format",
        choices=["rows", "trace-entries", "openenv-training-trace", "graphml"],
        default=None,
        help="training rows (default), TRL/OpenEnv trace entries, OpenEnv TrainingTrace documents (one "
        "per rollout, JSONL), or the graph as GraphML (Gephi, yEd; the default for an --out ending in .graphml)",
    )
    command.add_argument(
        "--drop-unfinished",
        action="store_true",
        help="leave out sibling attempts none continued (the unfinished_attempts finding)",
    )
    command.add_argument(
        "--notes", type=Path, metavar="FILE", help="with --format rows: apply a notes file's drop/mask actions"
    )
    command.add_argument(
        "--drop-noted", action="store_true", help="with --notes: leave out every row a note touches (but keep notes)"
    )
    command.add_argument(
        "--as",
        dest="as_framework",
        metavar="FRAMEWORK",
        help="the rows exactly as that trainer builds them: trl, nemo-gym, verifiers, openenv or nemo-rl, "
        "with :key=value parameters (docs/reconcile.md)",
    )
    add_signals(command)
    command.set_defaults(run=guarded(run))


def _framework(args: argparse.Namespace) -> tuple[str, dict] | None:
    """``--as``: one framework and its parameters (exit 2 on a bad one or a clash with other options)."""
    if args.as_framework is None:
        return None
    from rollout_graph.analysis.reconcile import parse_spec

    try:
        spec = parse_spec(args.as_framework)
    except ValueError as exc:
        raise UsageError(f"--as: {exc}") from None
    if len(spec) != 1:
        raise UsageError("--as takes one framework (inspect --reconcile compares several)")
    if args.format not in (None, "rows") or args.notes is not None or args.drop_unfinished:
        raise UsageError("--as writes that trainer's rows: it takes no --format, --notes or --drop-unfinished")
    return spec[0]


def run(args: argparse.Namespace) -> int:
    """Write the selected rollouts' rows to ``--out``."""
    try:
        written_as = export.out_format(args.out)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.format is None:
        args.format = "graphml" if written_as == "graphml" else "rows"
    if (args.format == "graphml") != (written_as == "graphml"):
        raise UsageError(
            f"--format {args.format} cannot be written to {args.out.name}: "
            + ("GraphML needs an --out ending in .graphml" if args.format == "graphml" else "use .jsonl or .parquet")
        )
    if args.format == "openenv-training-trace" and written_as != "jsonl":
        raise UsageError(f"--format openenv-training-trace is written as JSONL (one trace a line): not {args.out.name}")
    framework = _framework(args)
    roles = tuple(r.strip() for r in args.roles.split(",") if r.strip())
    unknown = set(roles) - set(export.ALL_ROLES)
    if unknown:
        raise UsageError(f"unknown roles {', '.join(sorted(unknown))} (known: {', '.join(export.ALL_ROLES)})")
    inputs = load_inputs(
        args.paths,
        args.session,
        limits_from_args(args),
        signals=args.signals,
        threshold=args.mismatch_threshold,
        corrections=chosen_corrections(args),
        **cache_options(args),
    )
    if args.format == "graphml":
        from rollout_graph.reports.graphml import write_graphml

        try:
            nodes = write_graphml(inputs.rollouts, args.out)
        except export.OutputError as exc:
            return fail(f"{exc} (nothing written)", OUTPUT_FAILED)
        except OSError as exc:
            return fail(f"cannot write {args.out}: {exc.strerror or exc} (nothing written)", OUTPUT_FAILED)
        print(f"{nodes:,} calls from {len(inputs.rollouts)} rollouts -> {args.out}", file=sys.stderr)
        return 0
    if framework is not None:
        return _write_as(args, inputs, framework)
    noted = _notes(args, inputs.rollouts)
    tally: Counter[str] = Counter()
    left_out: list[str] = []
    records: Iterator[dict[str, Any]]
    if args.format == "openenv-training-trace":
        traces = (export.training_trace(r, args.drop_unfinished, left_out) for r in inputs.rollouts)
        records = (trace for trace in traces if trace is not None)
    else:
        records = (
            record
            for rollout in inputs.rollouts
            for record in (
                notes.apply_notes(
                    rollout, export.iter_training_rows(rollout, roles, args.drop_unfinished), *noted, tally
                )
                if args.format == "rows"
                else export.iter_trace_entries(rollout, args.drop_unfinished, left_out)
            )
        )
    try:
        # joined signals add columns: let the Parquet schema follow the rows
        written = export.write_records(records, args.out, kind=None if args.signals else args.format)
    except export.OutputError as exc:
        return fail(f"{exc} (nothing written; an older file there is unchanged)", OUTPUT_FAILED)
    print(f"{written.records:,} {args.format} -> {args.out}", file=sys.stderr)
    if left_out:
        shown = "; ".join(left_out[:3]) + (f"; ... ({len(left_out) - 3:,} more)" if len(left_out) > 3 else "")
        print(
            f"rollout-graph: {len(left_out):,} agent call(s) left out: OpenEnv's trainer contract refuses their "
            f"tokens ({shown})",
            file=sys.stderr,
        )
    if args.notes is not None:
        print(
            f"rollout-graph: notes from {args.notes}: {tally['dropped']:,} row(s) left out, {tally['masked']:,} masked",
            file=sys.stderr,
        )
    if written.failed:
        print(
            f"rollout-graph: {written.failed} records could not be written ({written.first_failure})", file=sys.stderr
        )
    return 0


def _notes(args: argparse.Namespace, rollouts) -> tuple[list[dict], bool]:
    """The notes of ``--notes`` and whether ``--drop-noted`` (docs/cli.md, "Notes")."""
    if args.notes is None:
        if args.drop_noted:
            raise UsageError("--drop-noted needs --notes FILE")
        return [], False
    if args.format != "rows":
        raise UsageError("--notes applies to --format rows")
    try:
        found = notes.read_notes(args.notes)["notes"]
    except notes.NotesError as exc:
        raise UsageError(str(exc)) from None
    for warning in notes.check_targets(rollouts, found, str(args.notes)):
        print(f"rollout-graph: {warning}", file=sys.stderr)
    return found, args.drop_noted


def _write_as(args: argparse.Namespace, inputs, framework: tuple[str, dict]) -> int:
    """``export --as``: every row the framework builds, labelled with whether its trainer trains it."""
    from rollout_graph.reports.reconcile import iter_rows

    name, params = framework
    records = (
        record
        for rollout in inputs.rollouts
        for record in iter_rows(rollout, name, params, getattr(inputs.decoders.get(rollout.session_id), "path", None))
    )
    try:
        written = export.write_records(records, args.out)
    except export.OutputError as exc:
        return fail(f"{exc} (nothing written; an older file there is unchanged)", OUTPUT_FAILED)
    print(f"{written.records:,} {name} rows -> {args.out}", file=sys.stderr)
    return 0
