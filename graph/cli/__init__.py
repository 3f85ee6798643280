"""``rollout-graph``: the command line, a mirror of the app.

Each verb lives in its own module with two functions: ``add_parser(subparsers)`` declares its
arguments and ``run(args) -> int`` carries it out. Only this package prints progress or exits;
the library raises. Inputs are loaded and validated by :mod:`rollout_graph.cli.common` for every verb, so
a missing path or an unknown session gives the same message and exit code 2 everywhere.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys

from rollout_graph import __version__

# Thread-count variables OpenBLAS (numpy's BLAS) reads when it loads; any one set is the user's choice.
_BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")

# Verbs whose console process ends as soon as it has printed (:func:`_exit_now`).
_QUICK_EXIT = frozenset({"inspect"})

# Verbs in the order `--help` lists them; each names a module of this package.
VERBS = ("inspect", "explain", "search", "export", "bundle", "audit", "run", "compare", "tail", "view", "capture")


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's help formatter, asking the terminal for its width only when help is written.

    A parser builds a formatter for every argument it adds (to check its metavar), and argparse's
    asks the terminal's width at once, importing :mod:`shutil` and with it bz2 and lzma: 3 ms of
    every command's start-up (docs/performance.md). The width and the help column are worked out
    as argparse works them out, on first use (tests/cli/test_cold_start.py compares every verb's help
    and usage with argparse's own formatter at several terminal widths)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None):
        super().__init__(prog, indent_increment, max_help_position, 1 << 16 if width is None else width)
        if width is None:
            self._later = (indent_increment, max_help_position)
            del self._width, self._max_help_position

    def __getattr__(self, name: str):
        later = self.__dict__.get("_later")
        if later is None or name not in ("_width", "_max_help_position"):
            raise AttributeError(name)
        import shutil

        del self._later
        indent_increment, max_help_position = later
        self._width = shutil.get_terminal_size().columns - 2
        self._max_help_position = min(max_help_position, max(self._width - 20, indent_increment * 2))
        return self.__dict__[name]


class _Parser(argparse.ArgumentParser):
    """An argument parser whose help formatter is :class:`_HelpFormatter` unless told otherwise
    (the verbs' parsers are of this class too: argparse makes subparsers of the parent's class)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)


def parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser with every verb registered (only the verb ``only`` when given: a
    command imports the modules of its own verb, not those of the ten others)."""
    top = _Parser(prog="rollout-graph", description="Explore LLM-agent rollouts captured at the token level.")
    top.add_argument("--version", action="version", version=f"rollout-graph {__version__}")
    # The verbs' usage starts with the program's name, what argparse works out by formatting the
    # usage of a parser without positionals (given here, so no terminal width is asked for).
    sub = top.add_subparsers(dest="command", required=True, prog=top.prog)
    for verb in VERBS if only is None else (only,):
        importlib.import_module(f"rollout_graph.cli.{verb}").add_parser(sub)
    return top


def one_blas_thread() -> bool:
    """Load numpy with one BLAS thread in a command-line process (True: done here).

    numpy's OpenBLAS starts a worker thread per core when it loads, and each spins for a while
    waiting for work before it sleeps: on two cores that was 0.15-0.2 s of CPU for every command,
    one that never multiplies a matrix (docs/performance.md). Done only by the console command
    (``rollout-graph``, ``python -m rollout_graph``) before numpy is imported, never when the user
    set a thread count, and never for a process that imports the library (numpy already loaded).
    The variable is removed again once numpy is loaded: processes the command starts (the app's
    server, parse workers) choose for themselves.
    """
    if "numpy" in sys.modules or any(name in os.environ for name in _BLAS_THREADS):
        return False
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import numpy  # noqa: F401 - OpenBLAS reads the variable once, as numpy loads it
    finally:
        del os.environ["OPENBLAS_NUM_THREADS"]
    return True


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the process exit code.

    Without ``argv`` (the console command) the process is the command's own: numpy is loaded with
    one BLAS thread first (:func:`one_blas_thread`).
    """
    given = sys.argv[1:] if argv is None else argv
    verb = given[0] if given and given[0] in VERBS else None
    if argv is None and verb in _QUICK_EXIT:
        from rollout_graph.ingest.load import cpu_window  # standard library only: nothing else is imported yet

        cpu_window.mark_start()  # the start of the window the two-part read judges free cores by
        # the imports make next to no garbage either: the load turns the collector on again once
        # what it read is frozen (rollout_graph.cli.common.load_inputs), 35 collections fewer
        gc.disable()
    if argv is None:
        one_blas_thread()
    args = parser(verb).parse_args(given)
    args.console = argv is None  # the process is the command's own: it ends once it has printed
    code = int(args.run(args))
    if argv is None and verb in _QUICK_EXIT:
        _exit_now(code)
    return code


def _exit_now(code: int) -> None:
    """End the console process now that its output is written: the exit handlers run (a parse
    pool is stopped, logs flushed) but the interpreter does not take apart the loaded traces
    object by object, a tenth of a cold ``inspect``'s CPU (docs/performance.md). Returns (the
    normal exit follows) while other threads run or when the output cannot be flushed, so an
    error such as a closed pipe is reported as it always was."""
    import atexit
    import threading

    if threading.active_count() > 1:
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)
