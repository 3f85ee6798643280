"""``rollout-graph tail``: follow growing traces and print each call as it is linked."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from typing import Any

import orjson

from rollout_graph.cli.common import add_paths, cache_options, check_paths, guarded
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
    trace = LiveTrace(args.paths, **cache_options(args))
    log = EventLog(args.session)
    idle_since = time.monotonic()
    try:
        previous: Any = signal.signal(signal.SIGTERM, _interrupt)  # SIGTERM ends the follow like Ctrl-C
    except ValueError:  # not the main thread (run from a program): it keeps its own handlers
        previous = None
    try:
        while True:
            update = trace.poll()
            _write(log.events(trace, update), args.json)
            now = time.monotonic()
            if update.changed:
                idle_since = now
            if args.until_idle is not None and now - idle_since >= args.until_idle:
                break
            time.sleep(args.interval)
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:  # `tail ... | head`: the reader has gone
        sys.stderr.close()
        return 0
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    try:
        _write(log.finish(trace), args.json)  # the verdicts, which wait for the end (docs/live.md)
        _pending_note(trace, args.json)
    except BrokenPipeError:
        sys.stderr.close()
    except KeyboardInterrupt:
        pass
    return 0


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _write(events: list[dict[str, Any]], as_json: bool) -> None:
    out = sys.stdout
    for event in events:
        out.write(orjson.dumps(event).decode() + "\n" if as_json else event_text(event) + "\n")
    out.flush()


def _pending_note(trace: LiveTrace, as_json: bool) -> None:
    """Say which files end in an unfinished line (never counted as a bad record)."""
    for name, size in trace.pending_bytes().items():
        if as_json:
            sys.stdout.write(orjson.dumps({"event": "pending", "file": name, "bytes": size}).decode() + "\n")
        else:
            sys.stdout.write(f"· {name}: {size:,} bytes of an unfinished last line (waiting for its newline)\n")
    sys.stdout.flush()
