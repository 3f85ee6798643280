"""``rollout-graph explain``: where the tokens went, why a rollout split, forks, retries."""

from __future__ import annotations

import argparse

from rollout_graph.cli.common import (
    UsageError,
    add_paths,
    add_tokenizer_options,
    cache_options,
    guarded,
    limits_from_args,
    load_inputs,
    write_text,
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``explain``."""
    command = sub.add_parser(
        "explain", help="where the tokens went, why a rollout split, forks and retries, retokenization"
    )
    add_paths(command)
    command.add_argument("--origin", metavar="NODE", help="only: where each token of this call's prompt came from")
    add_tokenizer_options(command)
    command.set_defaults(run=guarded(run))


def run(args: argparse.Namespace) -> int:
    """Print the audit explanations for each selected rollout."""
    from rollout_graph.reports.explain import explain_text, origin_lines

    inputs = load_inputs(
        args.paths, args.session, limits_from_args(args), args.tokenizer, args.hub, **cache_options(args)
    )
    if args.origin is not None and not any(args.origin in r.node_ids for r in inputs.rollouts):
        raise UsageError(f"no call {args.origin!r} in the selected rollouts")
    for rollout in inputs.rollouts:
        decoder = inputs.decoder(rollout)
        if args.origin is not None:
            if args.origin in rollout.node_ids:
                write_text("\n".join(origin_lines(rollout, rollout.index_of(args.origin), decoder)) + "\n")
            continue
        write_text(explain_text(rollout, decoder) + "\n")
    return 0
