"""``rollout-graph run``: a training run step by step (what the app's Run page charts)."""

from __future__ import annotations

import argparse
import os
import sys

import orjson

from rollout_graph.cli.audit import stderr_progress
from rollout_graph.cli.common import UsageError, add_limit_options, check_paths, guarded, limits_from_args, write_text


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``run``."""
    command = sub.add_parser(
        "run", help="a training run per step: rollouts, tokens, rewards, discard and break rates, mismatch"
    )
    command.add_argument("paths", nargs="+", metavar="DIR", help="the run's output folder(s), files or globs")
    command.add_argument("--json", action="store_true", help="print the per-step table as JSON (docs/cli.md)")
    command.add_argument("--step", type=int, metavar="N", help="list the rollouts of step N instead, worst first")
    command.add_argument(
        "--engine", choices=["local", "ray"], default="local", help="a process pool here (default) or Ray"
    )
    command.add_argument(
        "--workers", type=int, default=os.cpu_count() or 1, help="parallel workers (default: all cores)"
    )
    command.add_argument("--address", help="with --engine ray: join this Ray cluster instead of starting one")
    command.add_argument(
        "--no-cache", action="store_true", help="recompute every rollout's summary (it is cached by default)"
    )
    add_limit_options(command)
    command.set_defaults(run=guarded(run))


def run(args: argparse.Namespace) -> int:
    """Summarise the run (cached) and print its steps, or one step's rollouts."""
    from rollout_graph.reports.run import rollout_rows, run_table, run_text, step_rollouts

    check_paths(args.paths)
    options = {
        "workers": args.workers,
        "engine": args.engine,
        "address": args.address,
        "progress": stderr_progress if sys.stderr.isatty() else None,
    }
    limits, use_cache = limits_from_args(args), not args.no_cache
    if args.step is None:
        table, summary = run_table(args.paths, limits=limits, use_cache=use_cache, **options)
        if not table.num_rows:
            raise UsageError(f"no trace files in {', '.join(args.paths)}")
        if args.json:
            sys.stdout.buffer.write(orjson.dumps(summary) + b"\n")
        else:
            write_text(run_text(summary))
        return 0
    rows, _ = rollout_rows(args.paths, limits=limits, use_cache=use_cache, **options)
    if not rows:
        raise UsageError(f"no trace files in {', '.join(args.paths)}")
    picked = step_rollouts(rows, args.step)
    if not picked:
        steps = sorted({r["step"] for r in rows if r.get("step") is not None})
        shown = ", ".join(map(str, steps[:10])) + (" ..." if len(steps) > 10 else "")
        raise UsageError(f"no rollouts at step {args.step} (steps: {shown or 'none'})")
    if args.json:
        sys.stdout.buffer.write(orjson.dumps({"step": args.step, "rollouts": picked}) + b"\n")
    else:
        write_text(
            "".join(
                f"{r['session_id']}  {r['source_file']}  calls {r['n_turns']} · reward "
                f"{'—' if r['reward'] is None else format(r['reward'], '.3g')} · FATAL {r['n_fatal']}"
                f" · WARN {r['n_warn']} · {r['fidelity']}\n"
                for r in picked
            )
        )
    return 0
