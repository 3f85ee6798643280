"""``rollout-graph search``: which calls hold a text, where, and where it first entered the context.

A ``--regex`` (or a case-insensitive search outside ASCII) runs in a capped child process with a
time limit (graph/analysis/patterns.py): over it the command prints why on stderr and exits
:data:`PATTERN_LIMIT` (4), with nothing on stdout (docs/cli.md, docs/limits.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

from rollout_graph.analysis.decode import decoder_for
from rollout_graph.analysis.patterns import ENV_SECONDS, PatternLimits
from rollout_graph.analysis.search import (
    Hit,
    Query,
    SearchError,
    SearchIndex,
    SearchLimitError,
    first_entered,
    search,
)
from rollout_graph.cli.common import (
    UsageError,
    add_paths,
    add_tokenizer_options,
    cache_options,
    fail,
    guarded,
    limits_from_args,
    load_inputs,
)

PATTERN_LIMIT = 4  # exit code: the pattern ran over its time or memory limit (docs/cli.md)


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``search``."""
    command = sub.add_parser(
        "search",
        help="find a text in request messages, responses and decoded token spans",
        description="Every call whose request messages (tool results included), response message, decoded "
        "sampled span or decoded context span contains TEXT, and per rollout the call where it first entered "
        "the context.",
    )
    command.add_argument("text", metavar="TEXT", help="the text to find (a Python regular expression with --regex)")
    add_paths(command)
    command.add_argument("--regex", action="store_true", help="TEXT is a regular expression")
    command.add_argument("-i", "--ignore-case", action="store_true", help="match regardless of case")
    command.add_argument(
        "--regex-timeout",
        type=float,
        metavar="SECONDS",
        help=f"stop a --regex search after this many seconds and exit 4 (default: ${ENV_SECONDS}, else 5)",
    )
    command.add_argument(
        "--no-tokens", action="store_true", help="search messages and responses only (no decoding of token spans)"
    )
    command.add_argument("--json", action="store_true", help='print {"hits": [...], "first_entered": [...]}')
    add_tokenizer_options(command)
    command.set_defaults(run=guarded(run))


def _line(hit: Hit) -> str:
    if hit.message_index is not None:
        place = f"message {hit.message_index} ({hit.role})"
    elif hit.token_index is not None:
        place = f"{hit.where} token {hit.token_index}"
    else:
        place = "response"
    count = f" x{hit.count}" if hit.count > 1 else ""
    return f"  {hit.node_id} #{hit.index}  {place}{count}: {hit.snippet}"


def run(args: argparse.Namespace) -> int:
    """Print the hits per rollout (text), or every hit as JSON."""
    limits = PatternLimits.from_env()
    if args.regex_timeout is not None:
        if not args.regex_timeout > 0:
            raise UsageError(f"--regex-timeout must be a positive number of seconds, not {args.regex_timeout}")
        limits = PatternLimits(args.regex_timeout, limits.memory_bytes)
    try:
        query = Query.compile(args.text, regex=args.regex, ignore_case=args.ignore_case, limits=limits)
    except SearchLimitError as exc:
        return fail(str(exc), PATTERN_LIMIT)
    except SearchError as exc:
        raise UsageError(str(exc)) from exc
    inputs = load_inputs(args.paths, args.session, limits_from_args(args), **cache_options(args))
    all_hits: list[Hit] = []
    firsts: list[Hit] = []
    out: list[str] = []
    for rollout in inputs.rollouts:
        decoder = None
        if not args.no_tokens:
            try:
                decoder = decoder_for(rollout.calls, [Path(p) for p in args.paths], args.tokenizer, args.hub)
            except FileNotFoundError as exc:
                raise UsageError(str(exc)) from exc
        index = SearchIndex(rollout, decoder)
        try:
            hits = search(index, query)
        except SearchLimitError as exc:
            return fail(f"session {rollout.session_id}: {exc}", PATTERN_LIMIT)
        except SearchError as exc:
            raise UsageError(str(exc)) from exc
        note = index.partial_note()
        if note is not None:  # the index's byte budget left calls out (docs/limits.md)
            sys.stderr.write(f"rollout-graph search: session {rollout.session_id}: {note}\n")
        all_hits += hits
        first = first_entered(hits)
        if first is not None:
            firsts.append(first)
        calls = len({h.index for h in hits})
        if not hits:
            continue
        out.append(f"session {rollout.session_id}: {len(hits)} hit(s) in {calls} call(s)")
        if first is not None:
            out.append(
                f"  first entered the context: {first.node_id} #{first.index}, message {first.message_index} ({first.role})"
            )
        out += [_line(h) for h in hits]
    if args.json:
        payload = {"hits": [h.as_dict() for h in all_hits], "first_entered": [h.as_dict() for h in firsts]}
        sys.stdout.buffer.write(orjson.dumps(payload) + b"\n")
    elif not all_hits:
        sys.stdout.write(f"no hit for {args.text!r} in {len(inputs.rollouts)} rollout(s)\n")
    else:
        sys.stdout.write("\n".join(out) + "\n")
    return 0
