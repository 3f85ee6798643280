"""``rollout-graph inspect``: summarise traces, print the JSON contract, or a decoded transcript."""

from __future__ import annotations

import argparse
import sys

import orjson

from rollout_graph.cli.common import (
    Inputs,
    UsageError,
    add_paths,
    add_signals,
    add_tokenizer_options,
    cache_options,
    chosen_corrections,
    guarded,
    limits_from_args,
    load_inputs,
    write_text,
)

# Each output imports the modules it needs: --json (the cold path's output) never imports the
# summary and transcript modules, the summary never the contract (docs/performance.md).

# What a console inspect loaded and built, held until the process ends: dropped when run()
# returns, the traces and the contract were taken apart object by object (0.03 s of the vLLM bench
# trace's cold inspect) just before the quick exit (rollout_graph.cli._exit_now) that skips it.
_HELD: list = []


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``inspect``."""
    command = sub.add_parser("inspect", help="summarise traces, or print the JSON contract")
    add_paths(command)
    command.add_argument("--json", action="store_true", help="print the machine-readable contract (docs/cli.md)")
    command.add_argument("--tokens", action="store_true", help="with --json: include input_ids, loss_mask, logprobs")
    command.add_argument("--decode", action="store_true", help="print a decoded transcript of one sequence per session")
    command.add_argument(
        "--node", metavar="ID", help="with --decode: the sequence through this call (default: the main agent row)"
    )
    command.add_argument(
        "--reconcile",
        metavar="FRAMEWORKS",
        help="what each trainer trains from these calls: trl,nemo-gym,verifiers,openenv,nemo-rl or all, "
        "each with :key=value parameters (docs/reconcile.md)",
    )
    add_tokenizer_options(command)
    add_signals(command)
    command.set_defaults(run=guarded(run))


def _reconcile_spec(args: argparse.Namespace):
    """The ``--reconcile`` frameworks and their parameters (exit 2 on a bad spec)."""
    if args.reconcile is None:
        return None
    from rollout_graph.analysis.reconcile import parse_spec

    try:
        return parse_spec(args.reconcile)
    except ValueError as exc:
        raise UsageError(f"--reconcile: {exc}") from None


def _tokenizer_json(inputs: Inputs, rollout):
    """The tokenizer file the rollout was decoded with, when it was a tokenizer (NeMo-RL's EOS id)."""
    path = getattr(inputs.decoders.get(rollout.session_id), "path", None)
    return path if path is not None else None


def run(args: argparse.Namespace) -> int:
    """Print the summary, the JSON contract, or decoded transcripts."""
    spec = _reconcile_spec(args)
    inputs = load_inputs(
        args.paths,
        args.session,
        limits_from_args(args),
        args.tokenizer,
        args.hub,
        signals=args.signals,
        threshold=args.mismatch_threshold,
        corrections=chosen_corrections(args),
        settled=getattr(args, "console", False),
        **cache_options(args),
    )
    held = _HELD if getattr(args, "console", False) else []
    held.append(inputs)
    if args.decode:
        return _print_transcripts(args, inputs)
    if args.json:
        from rollout_graph.reports.contract import inspect_json

        payload = inspect_json(
            inputs.loaded, inputs.rollouts, with_tokens=args.tokens, signals_load=inputs.signals_load
        )
        if spec is not None:
            from rollout_graph.reports.reconcile import session_json

            by_id = {r.session_id: r for r in inputs.rollouts}
            for session in payload["sessions"]:
                rollout = by_id[session["session_id"]]
                session["reconcile"] = session_json(rollout, spec, _tokenizer_json(inputs, rollout), args.tokens)
        held.append(payload)
        # the newline appended by orjson: no second copy of the output at the peak
        sys.stdout.buffer.write(orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_APPEND_NEWLINE))
    else:
        from rollout_graph.reports.summary import summary_text

        write_text(summary_text(inputs.loaded, inputs.rollouts, inputs.signals_load))
        if spec is not None:
            from rollout_graph.reports.reconcile import session_text

            for rollout in inputs.rollouts:
                write_text(
                    f"\nsession {rollout.session_id}\n" + session_text(rollout, spec, _tokenizer_json(inputs, rollout))
                )
    nothing = (inputs.loaded.records or inputs.loaded.pending) and not inputs.loaded.loaded
    return 2 if nothing else 0  # records, none of which loads: exit code 2 (README); the report says why


def _print_transcripts(args: argparse.Namespace, inputs: Inputs) -> int:
    from rollout_graph.reports.transcript import default_sequence, sequence_through, transcript

    for rollout in inputs.rollouts:
        decoder = inputs.decoder(rollout)
        if args.node is None:
            seq = default_sequence(rollout)
        elif args.node in {c.node_id for c in rollout.calls}:
            seq = sequence_through(rollout, args.node)
        else:
            continue
        write_text(transcript(rollout, seq, decoder) + "\n")
    return 0
