"""``rollout-graph capture``: a recording proxy in front of a vLLM or SGLang engine (docs/live.md)."""

from __future__ import annotations

import argparse
import socket
import sys
from pathlib import Path

from rollout_graph.cli.common import UsageError, _size, guarded


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``capture``."""
    command = sub.add_parser(
        "capture",
        help="record a harness's model calls through an OpenAI/Anthropic/Gemini-compatible proxy",
        description=(
            "Serve /v1/chat/completions, /v1/completions, /v1/messages (Anthropic), /v1/responses "
            "(OpenAI Responses) and /v1beta/models/<model>:generateContent / :streamGenerateContent (the Gemini "
            "API) in front of UPSTREAM, recording every call with its token ids and logprobs to a new "
            "capture-<time>.jsonl in DIR (the engine is probed first: capture-<time>.probe.json). Name a rollout "
            "with the base URL http://HOST:PORT/session/<id> or an X-Session-Id header. Ctrl-C stops it "
            "(in-flight calls finish)."
        ),
    )
    command.add_argument("--upstream", required=True, metavar="URL", help="the engine, e.g. http://127.0.0.1:8000")
    command.add_argument("--out", required=True, type=Path, metavar="DIR", help="folder for capture files")
    command.add_argument("--host", default="127.0.0.1", help="interface to listen on (default: 127.0.0.1)")
    command.add_argument("--port", type=int, default=8100, help="port to listen on (default: 8100)")
    command.add_argument(
        "--top-logprobs", type=int, default=5, metavar="K", help="alternatives recorded per token (default: 5)"
    )
    command.add_argument(
        "--timeout", type=float, default=600.0, metavar="S", help="fail a call after S seconds of upstream silence"
    )
    command.add_argument(
        "--drain", type=float, default=30.0, metavar="S", help="on Ctrl-C, let in-flight calls finish for S seconds"
    )
    command.add_argument(
        "--session-header",
        action="append",
        default=[],
        metavar="NAME",
        help="also take the session id from this request header (checked first; repeatable)",
    )
    command.add_argument(
        "--max-tokens",
        type=int,
        metavar="N",
        help="lower a harness's max_tokens above N to N (Claude Code asks 32000; recorded, and flagged on load)",
    )
    command.add_argument(
        "--max-body-bytes",
        type=_size,
        default=64 << 20,
        metavar="N",
        help="answer 413 to a request body over N (default 64M; docs/limits.md)",
    )
    command.add_argument(
        "--client-timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="answer 408 when a harness stalls S seconds while sending a request (default 60)",
    )
    command.add_argument(
        "--max-response-bytes",
        type=_size,
        default=256 << 20,
        metavar="N",
        help="fail a call whose engine answer (decompressed, or a whole stream) is over N (default 256M)",
    )
    command.add_argument(
        "--max-event-bytes",
        type=_size,
        default=64 << 20,
        metavar="N",
        help="fail a call one of whose engine stream lines is over N (default 64M)",
    )
    command.add_argument(
        "--call-budget",
        type=int,
        metavar="N",
        help="per session: after N model calls, answer a plain stop instead of forwarding (recorded)",
    )
    command.add_argument(
        "--pin-sampling",
        metavar="KEY=V,...",
        help="set these sampling keys on every call whatever the harness asked, e.g. temperature=1,top_p=1 (recorded)",
    )
    command.add_argument(
        "--model",
        metavar="NAME",
        help="ask the engine for this model on every recorded call (default: the harness's; a Gemini or "
        "Claude model name becomes the engine's only model)",
    )
    command.add_argument(
        "--no-probe",
        action="store_true",
        help="skip the engine probes at start-up (token ids, raw or processed logprobs, tool calling, model)",
    )
    command.add_argument("--harness", metavar="NAME", help="harness name stamped on every record (e.g. opencode)")
    command.add_argument("--quiet", action="store_true", help="do not print a line per recorded call")
    command.set_defaults(run=guarded(run))


def run(args: argparse.Namespace) -> int:
    """Serve until Ctrl-C / SIGTERM, then report what was written."""
    from rollout_graph.capture.server import CaptureConfig, serve
    from rollout_graph.capture.tokens import parse_pins

    if not args.upstream.startswith(("http://", "https://")):
        raise UsageError(f"--upstream {args.upstream!r} is not an http(s) URL")
    if args.max_tokens is not None and args.max_tokens < 1:
        raise UsageError("--max-tokens must be 1 or more")
    if args.top_logprobs < 0:
        raise UsageError("--top-logprobs must be 0 or more")
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out} is a file, not a folder")
    if args.call_budget is not None and args.call_budget < 1:
        raise UsageError("--call-budget must be 1 or more")
    pins = None
    if args.pin_sampling is not None:
        try:
            pins = parse_pins(args.pin_sampling)
        except ValueError as exc:
            raise UsageError(f"--pin-sampling {exc}") from None
    _check_port(args.host, args.port)
    config = CaptureConfig(
        upstream=args.upstream,
        out=args.out,
        top_logprobs=args.top_logprobs,
        timeout=args.timeout,
        drain_seconds=args.drain,
        session_headers=tuple(h.lower() for h in args.session_header),
        harness=args.harness,
        max_tokens=args.max_tokens,
        max_body_bytes=args.max_body_bytes,
        client_timeout=args.client_timeout,
        max_response_bytes=args.max_response_bytes,
        max_event_bytes=args.max_event_bytes,
        call_budget=args.call_budget,
        pin_sampling=pins,
        model=args.model,
    )

    if args.host not in ("127.0.0.1", "localhost", "::1"):
        say(f"listening on {args.host}: anyone who can reach it can use the engine through it")

    def started(path: Path) -> None:
        say(
            f"http://{args.host}:{args.port} -> {config.upstream_base}, recording to {path}\n"
            f"  name a rollout with the base URL http://{args.host}:{args.port}/session/<id>/v1; Ctrl-C stops"
        )

    def probed(report: dict) -> None:
        from rollout_graph.core.engine import describe

        say(f"engine probe ({report.get('seconds', 0):.1f} s): {describe(config.engine or {})}")
        for finding in report.get("findings") or ():
            say(f"  {finding}")
        for error in report.get("errors") or ():
            say(f"  probe: {error}")

    writer = serve(
        config,
        host=args.host,
        port=args.port,
        on_start=started,
        on_record=None if args.quiet else lambda record: say(call_line(record)),
        probe=not args.no_probe,
        on_probe=probed,
    )
    say(f"stopped; {writer.written} call(s) recorded in {writer.path}")
    for error in writer.errors[:3]:
        say(f"write error: {error}")
    return 0 if not writer.errors else 1


def say(message: str) -> None:
    """One status line on stderr."""
    print(f"rollout-graph capture: {message}", file=sys.stderr, flush=True)


def call_line(record: dict) -> str:
    """``session call dialect [stream] status seconds [error]`` for one recorded call."""
    parts = [
        str(record.get("session_id")),
        str(record.get("call_id")),
        str(record.get("dialect")) + (" stream" if record.get("stream") else ""),
        str(record.get("status", "-")),
        f"{record.get('latency_s', 0):.2f}s",
    ]
    if record.get("error"):
        parts.append(f"FAILED: {record['error']}")
    return " · ".join(parts)


def _check_port(host: str, port: int) -> None:
    """Fail with one line (before a capture file is made) when the address cannot be bound."""
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as exc:
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
