"""``rollout-graph compare``: two rollouts side by side (stats, findings, main sequences, signals)."""

from __future__ import annotations

import argparse
import sys

import orjson

from rollout_graph.cli.common import UsageError, add_signals, chosen_corrections, guarded, load_inputs


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``compare``."""
    command = sub.add_parser("compare", help="two rollouts side by side: stats, findings, main sequences, signals")
    command.add_argument("a", metavar="A", help="trace file or directory holding rollout A")
    command.add_argument("b", metavar="B", help="trace file or directory holding rollout B (may be A again)")
    command.add_argument("--session-a", metavar="ID", help="rollout A's session (default: the one the app opens first)")
    command.add_argument("--session-b", metavar="ID", help="rollout B's session (default: the one the app opens first)")
    command.add_argument("--json", action="store_true", help="print the comparison as JSON (docs/cli.md)")
    add_signals(command)
    command.add_argument("--signals-a", action="append", metavar="FILE", help="a signals file for A only")
    command.add_argument("--signals-b", action="append", metavar="FILE", help="a signals file for B only")
    command.set_defaults(run=guarded(run))


def _pick(path: str, session: str | None, signals: list[str], threshold: float, corrections: list):
    inputs = load_inputs([path], session, signals=signals or None, threshold=threshold, corrections=corrections)
    rollouts = inputs.rollouts
    if not rollouts:
        raise UsageError(f"no rollouts in {path}")
    # what the app opens first: the most trainable tokens, the shortest id on a tie
    return min(rollouts, key=lambda r: (-r.stats["n_trainable_tokens"], len(r.session_id), r.session_id))


def run(args: argparse.Namespace) -> int:
    """Print the comparison of A and B."""
    from rollout_graph.reports.compare import compare, compare_lines

    shared = args.signals or []
    corrections = chosen_corrections(args)
    a = _pick(args.a, args.session_a, shared + (args.signals_a or []), args.mismatch_threshold, corrections)
    b = _pick(args.b, args.session_b, shared + (args.signals_b or []), args.mismatch_threshold, corrections)
    result = compare(a, b)
    if args.json:
        sys.stdout.buffer.write(orjson.dumps(result) + b"\n")
    else:
        sys.stdout.write("\n".join(compare_lines(result)) + "\n")
    return 0
