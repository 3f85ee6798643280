"""``rollout-graph``: the command line mirror of the app."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import orjson

from graph.contract import inspect_json
from graph.decode import decoder_for
from graph.loading import load_paths
from graph.rollout import analyse
from graph.summary import summary_text
from graph.transcript import default_sequence, sequence_through, transcript

APP = Path(__file__).resolve().parent.parent / "app.py"


def _inspect(args: argparse.Namespace) -> int:
    missing = [p for p in args.paths if not Path(p).exists()]
    if missing:
        print(f"rollout-graph: cannot read {', '.join(map(str, missing))}: no such file or directory", file=sys.stderr)
        return 2
    loaded = load_paths(args.paths)
    if loaded.nothing_readable:
        reason = loaded.skipped[0].reason if loaded.skipped else "no trace files (.jsonl, .json, .ndjson, .gz, .zst)"
        print(f"rollout-graph: cannot read {', '.join(args.paths)}: {reason}", file=sys.stderr)
        return 2
    sessions = list(loaded.sessions.values())
    if args.session is not None:
        sessions = [s for s in sessions if s.session_id == args.session]
        if not sessions:
            known = ", ".join(list(loaded.sessions)[:10]) or "none"
            print(f"rollout-graph: no session {args.session!r} (sessions: {known})", file=sys.stderr)
            return 2
    rollouts = [analyse(s) for s in sessions]
    if args.decode:
        return _print_transcripts(args, rollouts)
    if args.json:
        payload = inspect_json(loaded, rollouts, with_tokens=args.tokens)
        sys.stdout.buffer.write(orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
    else:
        sys.stdout.write(summary_text(loaded, rollouts))
    return 0


def _print_transcripts(args: argparse.Namespace, rollouts) -> int:
    for rollout in rollouts:
        try:
            decoder = decoder_for(rollout.calls, [Path(p) for p in args.paths], args.tokenizer, args.hub)
        except FileNotFoundError as exc:
            print(f"rollout-graph: {exc}", file=sys.stderr)
            return 2
        if args.node is None:
            seq = default_sequence(rollout)
        elif args.node in {c.node_id for c in rollout.calls}:
            seq = sequence_through(rollout, args.node)
        else:
            continue
        sys.stdout.write(transcript(rollout, seq, decoder) + "\n")
    return 0


# A public deployment (a Hugging Face Space): listen on every interface, let uploads work inside
# the Space's cross-origin iframe (the XSRF cookie must be SameSite=None; Secure, served over
# HTTPS by the Space's proxy) and cap upload size.
PUBLIC_FLAGS = [
    "--server.address", "0.0.0.0",
    "--server.headless", "true",
    "--server.xsrfCookieSameSite", "none",
    "--server.maxUploadSize", "50",
    "--browser.gatherUsageStats", "false",
]  # fmt: skip


def _explain(args: argparse.Namespace) -> int:
    from graph.explain import explain_text, origin_lines

    loaded = load_paths(args.paths)
    if loaded.nothing_readable:
        print(f"rollout-graph: cannot read {', '.join(args.paths)}", file=sys.stderr)
        return 2
    for session in loaded.sessions.values():
        if args.session is not None and session.session_id != args.session:
            continue
        rollout = analyse(session)
        decoder = decoder_for(rollout.calls, [Path(p) for p in args.paths], args.tokenizer, args.hub)
        if args.origin is not None:
            if args.origin in {c.node_id for c in rollout.calls}:
                sys.stdout.write("\n".join(origin_lines(rollout, rollout.index_of(args.origin))) + "\n")
            continue
        sys.stdout.write(explain_text(rollout, decoder) + "\n")
    return 0


def _export(args: argparse.Namespace) -> int:
    from graph import export

    loaded = load_paths(args.paths)
    if loaded.nothing_readable:
        print(f"rollout-graph: cannot read {', '.join(args.paths)}", file=sys.stderr)
        return 2
    roles = tuple(r.strip() for r in args.roles.split(",") if r.strip())
    unknown = set(roles) - set(export.ALL_ROLES)
    if unknown:
        print(f"rollout-graph: unknown roles {', '.join(sorted(unknown))} (known: {', '.join(export.ALL_ROLES)})", file=sys.stderr)
        return 2
    records = []
    for session in loaded.sessions.values():
        if args.session is None or session.session_id == args.session:
            rollout = analyse(session)
            records += export.training_rows(rollout, roles) if args.format == "rows" else export.trace_entries(rollout)
    export.write_records(records, args.out)
    print(f"{len(records):,} {args.format} -> {args.out}", file=sys.stderr)
    return 0


def _audit(args: argparse.Namespace) -> int:
    from graph import audit

    files = audit.expand_inputs(args.inputs)
    if not files:
        print(f"rollout-graph: no trace files in {', '.join(args.inputs)}", file=sys.stderr)
        return 2
    if args.engine == "ray":
        rows = audit.run_ray(files, args.workers, args.address, audit.stderr_progress)
    else:
        rows = audit.run_local(files, args.workers, audit.stderr_progress)
    audit.write_parquet(rows, args.out)
    failed = sum(1 for r in rows if r["error"])
    print(f"{len(rows):,} rollouts from {len(files):,} files -> {args.out}" + (f" ({failed} files could not be read)" if failed else ""), file=sys.stderr)
    return 0


def _view(args: argparse.Namespace) -> int:
    command = [sys.executable, "-m", "streamlit", "run", str(APP), "--server.port", str(args.port)]
    if args.public:
        command += PUBLIC_FLAGS
    elif args.headless:
        command += ["--server.headless", "true"]
    command += ["--", *map(str, args.paths)]
    # Become the server (no child left behind when this process is stopped).
    os.execv(sys.executable, command)
    return 0  # not reached


def _tokenizer_options(command: argparse.ArgumentParser) -> None:
    command.add_argument("--tokenizer", type=Path, metavar="PATH", help="tokenizer.json, or a folder holding one")
    command.add_argument("--hub", action="store_true", help="allow downloading the tokenizer from the Hugging Face Hub")


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="rollout-graph", description="Explore LLM-agent rollouts captured at the token level.")
    sub = top.add_subparsers(dest="command", required=True)

    inspect = sub.add_parser("inspect", help="summarise traces, or print the JSON contract")
    inspect.add_argument("paths", nargs="+", metavar="PATH", help="trace files or directories (.jsonl, .json, .gz, .zst)")
    inspect.add_argument("--session", help="only this session id")
    inspect.add_argument("--json", action="store_true", help="print the machine-readable contract (SPEC 6)")
    inspect.add_argument("--tokens", action="store_true", help="with --json: include input_ids, loss_mask, logprobs")
    inspect.add_argument("--decode", action="store_true", help="print a decoded transcript of one sequence per session")
    inspect.add_argument("--node", metavar="ID", help="with --decode: the sequence through this call (default: the main agent row)")
    _tokenizer_options(inspect)
    inspect.set_defaults(run=_inspect)

    explain = sub.add_parser("explain", help="where the tokens went, why a rollout split, forks and retries, retokenization")
    explain.add_argument("paths", nargs="+", metavar="PATH")
    explain.add_argument("--session", help="only this session id")
    explain.add_argument("--origin", metavar="NODE", help="only: where each token of this call's prompt came from")
    _tokenizer_options(explain)
    explain.set_defaults(run=_explain)

    export = sub.add_parser("export", help="write training rows (or trace entries) as JSONL or Parquet")
    export.add_argument("paths", nargs="+", metavar="PATH")
    export.add_argument("--out", type=Path, required=True, help="rows.jsonl or rows.parquet")
    export.add_argument("--roles", default="agent,auxiliary,discarded", help="with --format rows: roles to write (default: all, labelled)")
    export.add_argument("--format", choices=["rows", "trace-entries"], default="rows")
    export.add_argument("--session", help="only this session id")
    export.set_defaults(run=_export)

    audit = sub.add_parser("audit", help="one row per rollout across a corpus, written as Parquet")
    audit.add_argument("inputs", nargs="+", metavar="INPUT", help="trace files, directories (recursive) or globs")
    audit.add_argument("--out", type=Path, required=True, help="the Parquet file to write")
    audit.add_argument("--engine", choices=["local", "ray"], default="local", help="a process pool here (default) or Ray")
    audit.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="parallel workers (default: all cores)")
    audit.add_argument("--address", help="with --engine ray: join this Ray cluster instead of starting one")
    audit.set_defaults(run=_audit)

    view = sub.add_parser("view", help="open the explorer app on these traces")
    view.add_argument("paths", nargs="*", metavar="PATH", help="trace files or directories (default: bundled samples)")
    view.add_argument("--port", type=int, default=8501)
    view.add_argument("--headless", action="store_true", help="do not open a browser")
    view.add_argument("--public", action="store_true", help="serve a public deployment (Hugging Face Space): see docs/deploy.md")
    view.set_defaults(run=_view)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    raise SystemExit(main())
