"""``rollout-graph``: the command line, a mirror of the app.

Each verb lives in its own module with two functions: ``add_parser(subparsers)`` declares its
arguments and ``run(args) -> int`` carries it out. Only this package prints progress or exits;
the library raises. Inputs are loaded and validated by :mod:`rollout_graph.cli.common` for every verb, so
a missing path or an unknown session gives the same message and exit code 2 everywhere.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from rollout_graph import __version__

# Verbs in the order `--help` lists them; each names a module of this package.
VERBS = ("inspect", "explain", "search", "export", "bundle", "audit", "run", "compare", "tail", "view", "capture")


def parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser with every verb registered (only the verb ``only`` when given: a
    command imports the modules of its own verb, not those of the ten others)."""
    top = argparse.ArgumentParser(
        prog="rollout-graph", description="Explore LLM-agent rollouts captured at the token level."
    )
    top.add_argument("--version", action="version", version=f"rollout-graph {__version__}")
    sub = top.add_subparsers(dest="command", required=True)
    for verb in VERBS if only is None else (only,):
        importlib.import_module(f"rollout_graph.cli.{verb}").add_parser(sub)
    return top


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    given = sys.argv[1:] if argv is None else argv
    verb = given[0] if given and given[0] in VERBS else None
    args = parser(verb).parse_args(given)
    return int(args.run(args))
