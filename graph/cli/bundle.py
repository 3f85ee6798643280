"""``rollout-graph bundle``: one self-contained HTML file of a rollout (no server, no network)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rollout_graph.cli.common import (
    OUTPUT_FAILED,
    UsageError,
    add_paths,
    add_tokenizer_options,
    cache_options,
    fail,
    guarded,
    limits_from_args,
    load_inputs,
)
from rollout_graph.reports import notes as notes_io
from rollout_graph.reports.bundle import DETAIL_BUDGET, BundleOptions, bundle_data, left_out, page_html
from rollout_graph.reports.output import OutputError, atomic_path


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``bundle``."""
    command = sub.add_parser(
        "bundle",
        help="write one self-contained HTML file of a rollout (opens anywhere, no server, no network)",
        description="One HTML file with the headline numbers, findings, the DAG, each call's tokens, messages "
        "and diffs, the training rows and the notes: every script and style inlined, nothing fetched.",
    )
    add_paths(command)
    command.add_argument("--out", type=Path, required=True, metavar="NAME.html", help="the HTML file to write")
    command.add_argument("--node", metavar="ID", help="open the page at this call (its token detail is always in)")
    command.add_argument(
        "--calls",
        metavar="ID,...",
        help="embed the token detail of only these calls (default: every call when the file stays small, "
        "else --node and then the calls worth a look first, near misses, findings, forks, while they fit)",
    )
    command.add_argument(
        "--notes",
        type=Path,
        metavar="FILE",
        help=f"show the notes of this sidecar file (default: {notes_io.SIDECAR} beside the traces, when there)",
    )
    command.add_argument(
        "--max-detail",
        type=int,
        default=DETAIL_BUDGET,
        metavar="BYTES",
        help=f"token detail embedded when no call is named (estimated bytes; default {DETAIL_BUDGET:,})",
    )
    add_tokenizer_options(command)
    command.set_defaults(run=guarded(run))


def run(args: argparse.Namespace) -> int:
    """Write the bundle of the selected rollouts to ``--out``."""
    inputs = load_inputs(
        args.paths, args.session, limits_from_args(args), args.tokenizer, args.hub, **cache_options(args)
    )
    rollouts = inputs.rollouts
    known = {c.node_id for r in rollouts for c in r.calls}
    calls = [c.strip() for c in (args.calls or "").split(",") if c.strip()]
    unknown = [c for c in [*calls, *([args.node] if args.node else [])] if c not in known]
    if unknown:
        raise UsageError(
            f"no call {unknown[0]!r} in the rollouts read (node ids as `rollout-graph inspect --json` lists them)"
        )
    if args.node:  # the page opens in the first rollout holding the call (--session picks another)
        first = next(k for k, r in enumerate(rollouts) if args.node in {c.node_id for c in r.calls})
        rollouts = [rollouts[first], *rollouts[:first], *rollouts[first + 1 :]]
    notes_path = args.notes or notes_io.sidecar_for(args.paths)
    notes: list[dict] = []
    if notes_path is not None and (args.notes is not None or notes_path.exists()):
        try:
            notes = notes_io.read_notes(notes_path)["notes"]
        except notes_io.NotesError as exc:
            raise UsageError(str(exc)) from None
    options = BundleOptions(
        node=args.node, calls=calls, budget=args.max_detail, paths=[str(p) for p in args.paths], notes=notes
    )
    data = bundle_data(rollouts, [inputs.decoder(r) for r in rollouts], options)
    page = page_html(data)
    try:
        with atomic_path(args.out) as tmp:
            tmp.write_text(page, encoding="utf-8")
    except OutputError as exc:
        return fail(f"{exc} (nothing written)", OUTPUT_FAILED)
    size = args.out.stat().st_size
    print(
        f"{sum(len(r.calls) for r in rollouts):,} calls from {len(rollouts)} rollouts -> {args.out} ({size / 1e6:.2f} MB)",
        file=sys.stderr,
    )
    missing, total = left_out(data)
    if missing:
        print(
            f"rollout-graph: the token detail of {missing:,} of {total:,} calls is left out to keep the file small;"
            " name the calls to add with --calls ID,... (the page prints the command)",
            file=sys.stderr,
        )
    return 0
