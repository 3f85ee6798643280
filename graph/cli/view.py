"""``rollout-graph view``: start the explorer app (Streamlit) on traces or the bundled samples."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from rollout_graph.cli.common import add_correction, check_paths, chosen_corrections, guarded
from rollout_graph.ingest.limits import PUBLIC_ENV
from rollout_graph.resources import SIGNALS_ENV, app_script

# The app's settings, passed as flags so they hold from any working folder (an installed wheel has
# no .streamlit/config.toml beside it). Traces are untrusted: never show a traceback in the page.
BASE_FLAGS = [
    "--client.showErrorDetails", "none",
    "--client.toolbarMode", "minimal",
    "--browser.gatherUsageStats", "false",
    "--theme.base", "light",
    "--theme.primaryColor", "#2563eb",
    "--server.maxUploadSize", "200",
    # no watching of the app's source files: on every page run Streamlit otherwise resolves the path
    # of every loaded module on the server's event loop (0.3 s with numpy, pandas, pyarrow, plotly
    # loaded), delaying every answer; edits to the app's code then need a restart
    "--server.fileWatcherType", "none",
    # no full garbage collection after every page run: with a big trace loaded (millions of objects)
    # it held the interpreter 0.2 to 0.8 s after each run, while the page's last messages waited
    "--runner.postScriptGC", "false",
]  # fmt: skip

# A public deployment (a Hugging Face Space): listen on every interface, let uploads work inside
# the Space's cross-origin iframe (the XSRF cookie must be SameSite=None; Secure, served over
# HTTPS by the Space's proxy) and cap upload size.
PUBLIC_FLAGS = [
    "--server.address", "0.0.0.0",
    "--server.headless", "true",
    "--server.xsrfCookieSameSite", "none",
    "--server.maxUploadSize", "25",
    "--browser.gatherUsageStats", "false",
]  # fmt: skip


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``view``."""
    command = sub.add_parser("view", help="open the explorer app on these traces")
    command.add_argument(
        "paths", nargs="*", metavar="PATH", help="trace files or directories (default: bundled samples)"
    )
    command.add_argument("--port", type=int, default=8501)
    command.add_argument(
        "--address", default=None, help="interface to listen on (default: 127.0.0.1; 0.0.0.0 with --public)"
    )
    command.add_argument("--headless", action="store_true", help="do not open a browser")
    command.add_argument(
        "--public", action="store_true", help="serve a public deployment (Hugging Face Space): see docs/deploy.md"
    )
    command.add_argument(
        "--signals",
        action="append",
        metavar="FILE",
        help="join this signals file to the command-line traces (docs/signals.md); the app also takes uploads",
    )
    command.add_argument(
        "--max-load-seconds",
        type=float,
        default=None,
        metavar="S",
        help="stop analysing an upload after S seconds (default 60; docs/limits.md)",
    )
    add_correction(command)
    command.set_defaults(run=guarded(run))


def streamlit_command(args: argparse.Namespace) -> list[str]:
    """The ``streamlit run`` command line this verb becomes."""
    script = app_script()
    # the app's launcher beside its script (views/serve.py): `streamlit run` in-process, the
    # command-line traces read as the server starts; else Streamlit's own command
    server = script.with_name("serve.py")
    launcher = [str(server)] if server.is_file() else ["-m", "streamlit"]
    command = [sys.executable, *launcher, "run", str(script), "--server.port", str(args.port)]
    command += BASE_FLAGS
    if args.public:
        command += PUBLIC_FLAGS
    else:
        command += ["--server.address", args.address or "127.0.0.1"]
        if args.headless:
            command += ["--server.headless", "true"]
    if args.public and args.address:
        command += ["--server.address", args.address]
    return [*command, "--", *map(str, args.paths)]


def run(args: argparse.Namespace) -> int:
    """Become the Streamlit server (no child left behind when this process is stopped)."""
    check_paths(args.paths)
    if args.signals:
        check_paths(args.signals)
        # read by views/state/signals.py; an environment variable, so trace paths stay positional
        os.environ[SIGNALS_ENV] = os.pathsep.join(str(Path(p).resolve()) for p in args.signals)
    corrections = chosen_corrections(args)
    if corrections:  # the Corrections panel starts with these chosen (docs/corrections.md)
        from rollout_graph.signals.corrections import CORRECTIONS_ENV

        os.environ[CORRECTIONS_ENV] = ";".join(c.label for c in corrections)
    command = streamlit_command(args)
    if args.max_load_seconds is not None:  # read by rollout_graph.worker (each upload's child process)
        from rollout_graph.worker import ENV_SECONDS

        if not args.max_load_seconds > 0:
            print("rollout-graph view: --max-load-seconds must be more than 0", file=sys.stderr)
            return 2
        os.environ[ENV_SECONDS] = str(args.max_load_seconds)
    if args.public:  # the app reads traces under the public limits (docs/limits.md)
        os.environ[PUBLIC_ENV] = "1"
    os.execv(sys.executable, command)
    return 0  # not reached
