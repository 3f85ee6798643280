"""The source of an import finder that makes a child interpreter import ``rollout_graph`` from
another checkout (its ``graph/``, ``views/`` and ``sample_traces/``, as the editable install maps
this checkout's), for the scripts that run two checkouts side by side (bench_analyse.py,
same_inspect.py). The child's code starts with it and defines ``root`` (the checkout's folder)
before it, and imports ``importlib.util`` and ``sys``. Also ``named_checkouts``: the ``NAME=DIR``
arguments of the scripts that measure this checkout against others (bench_against.py,
bench_reopen.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

CHECKOUT_FINDER = """folders = {"rollout_graph": "graph", "rollout_graph.ui": "views", "rollout_graph.samples": "sample_traces"}

class Checkout:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name not in folders:
            return None
        folder = f"{root}/{folders[name]}"
        return importlib.util.spec_from_file_location(name, f"{folder}/__init__.py", submodule_search_locations=[folder])

sys.meta_path.insert(0, Checkout)
"""


def named_checkouts(parser: argparse.ArgumentParser, specs: list[str]) -> dict[str, Path]:
    """This checkout (as ``this``), then each ``NAME=DIR`` given, by name; a spec without ``=DIR``
    is the parser's error."""
    named = {"this": Path(__file__).resolve().parent.parent}
    for spec in specs:
        name, _, folder = spec.partition("=")
        if not folder:
            parser.error(f"{spec!r}: give NAME=DIR")
        named[name] = Path(folder).resolve()
    return named
