"""``rollout-graph export``: training rows or trace entries as JSONL or Parquet."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from graph.cli.common import UsageError, add_paths, add_signals, guarded, load_inputs
from graph.reports import export


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``export``."""
    command = sub.add_parser("export", help="write training rows (or trace entries) as JSONL or Parquet")
    add_paths(command)
    command.add_argument("--out", type=Path, required=True, help="rows.jsonl or rows.parquet")
    command.add_argument(
        "--roles",
        default="agent,auxiliary,discarded",
        help="with --format rows: roles to write (default: all, labelled)",
    )
    command.add_argument("--format", choices=["rows", "trace-entries"], default="rows")
    add_signals(command)
    command.set_defaults(run=guarded(run))


def run(args: argparse.Namespace) -> int:
    """Write the selected rollouts' rows to ``--out``."""
    roles = tuple(r.strip() for r in args.roles.split(",") if r.strip())
    unknown = set(roles) - set(export.ALL_ROLES)
    if unknown:
        raise UsageError(f"unknown roles {', '.join(sorted(unknown))} (known: {', '.join(export.ALL_ROLES)})")
    inputs = load_inputs(args.paths, args.session, args.signals, args.mismatch_threshold)
    records = []
    for rollout in inputs.rollouts:
        records += export.training_rows(rollout, roles) if args.format == "rows" else export.trace_entries(rollout)
    export.write_records(records, args.out)
    print(f"{len(records):,} {args.format} -> {args.out}", file=sys.stderr)
    return 0
