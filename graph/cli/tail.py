"""``rollout-graph tail``: follow growing traces and print each call as it is linked."""

from __future__ import annotations

import argparse
import sys
import time

import orjson

from rollout_graph.cli.common import add_paths, check_paths, guarded
from rollout_graph.live.events import EventLog, event_text
from rollout_graph.live.trace import LiveTrace

POLL_SECONDS = 0.5


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``tail``."""
    command = sub.add_parser("tail", help="follow growing traces: print each call as it is linked")
    add_paths(command)
    command.add_argument("--json", action="store_true", help="one JSON object per event and line (docs/cli.md)")
    command.add_argument(
        "--until-idle",
        type=float,
        metavar="SECONDS",
        help="exit once nothing new has arrived for SECONDS (0: print what is there now and exit)",
    )
    command.add_argument(
        "--interval", type=float, default=POLL_SECONDS, metavar="SECONDS", help="how often to look (default 0.5)"
    )
    command.set_defaults(run=guarded(run))


def run(args: argparse.Namespace) -> int:
    """Poll the paths until Ctrl-C (or until idle), printing every event as it happens."""
    check_paths(args.paths)
    trace = LiveTrace(args.paths)
    log = EventLog(args.session)
    out = sys.stdout
    idle_since = time.monotonic()
    try:
        while True:
            update = trace.poll()
            for event in log.events(trace, update):
                if args.json:
                    out.write(orjson.dumps(event).decode() + "\n")
                else:
                    out.write(event_text(event) + "\n")
            out.flush()
            now = time.monotonic()
            if update.changed:
                idle_since = now
            if args.until_idle is not None and now - idle_since >= args.until_idle:
                _pending_note(trace, args.json)
                return 0
            time.sleep(args.interval)
    except KeyboardInterrupt:
        _pending_note(trace, args.json)
        return 0
    except BrokenPipeError:  # `tail ... | head`: the reader has gone
        sys.stderr.close()
        return 0


def _pending_note(trace: LiveTrace, as_json: bool) -> None:
    """Say which files end in an unfinished line (never counted as a bad record)."""
    for name, size in trace.pending_bytes().items():
        if as_json:
            sys.stdout.write(orjson.dumps({"event": "pending", "file": name, "bytes": size}).decode() + "\n")
        else:
            sys.stdout.write(f"· {name}: {size:,} bytes of an unfinished last line (waiting for its newline)\n")
    sys.stdout.flush()
