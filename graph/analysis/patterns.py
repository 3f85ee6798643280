"""A visitor's regular expression, run where it cannot hurt the server: a capped, killable process.

Python's ``re`` backtracks: ``(\\w+\\s?)*@@@`` takes exponential time on a few hundred characters,
holds the GIL while it does (no other thread of the process runs: not the health check, not
another visitor's page, not the SIGTERM handler) and cannot be interrupted. A pattern can also
take memory in proportion to the text it runs over (about 150 bytes a character). So a search
(graph/analysis/search.py) never matches a pattern in its own process: :func:`run` hands the
pattern and the texts to ``_pattern_child.py``, a fresh ``python -I -S`` of the standard library
only (a few tens of milliseconds to start), that caps its own address space and CPU time, and is
killed at the wall-clock deadline. The parent only waits on a pipe, without the GIL.

Entry points: :class:`PatternLimits` (time and memory, from the environment; lower on a public
deployment) and :func:`run` (one batch of texts, one child). At most :data:`MAX_CHILDREN` children
run at once in a process; a search waits for a slot within its own deadline. Over a limit,
:class:`PatternLimitError` names the limit and how to raise it (docs/limits.md, "Search patterns").
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

from rollout_graph.ingest.limits import PUBLIC_ENV, human, parse_size

CHILD = Path(__file__).with_name("_pattern_child.py")
ENV_SECONDS = "ROLLOUT_GRAPH_SEARCH_REGEX_SECONDS"
ENV_MEMORY = "ROLLOUT_GRAPH_SEARCH_REGEX_MEMORY"
DEFAULT_SECONDS = 5.0
PUBLIC_SECONDS = 3.0
DEFAULT_MEMORY = 1 << 30  # the child's address space (it maps about 30 MB to start)
MAX_PATTERN_CHARS = 4096  # a longer pattern is refused before it is compiled
MAX_CHILDREN = 2  # pattern children running at once in this process
_SLOTS = threading.BoundedSemaphore(MAX_CHILDREN)
_OUT_OF_MEMORY, _BAD_PATTERN = 3, 4  # _pattern_child.py's exit codes


class PatternError(ValueError):
    """The pattern cannot be run (it does not compile, or its process could not start)."""


class PatternLimitError(PatternError):
    """The pattern ran over its time or memory limit; the message names the limit."""


@dataclass(frozen=True, slots=True)
class PatternLimits:
    """What one search's pattern may take: wall-clock seconds, and the child's address space (0: no cap)."""

    seconds: float = DEFAULT_SECONDS
    memory_bytes: int = DEFAULT_MEMORY

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> PatternLimits:
        """``ROLLOUT_GRAPH_SEARCH_REGEX_SECONDS`` and ``..._MEMORY`` (malformed values are ignored);
        the seconds default to :data:`PUBLIC_SECONDS` under ``ROLLOUT_GRAPH_PUBLIC=1``."""
        env = os.environ if environ is None else environ
        seconds = PUBLIC_SECONDS if env.get(PUBLIC_ENV) == "1" else DEFAULT_SECONDS
        memory = DEFAULT_MEMORY
        with contextlib.suppress(ValueError):
            raw = float(env.get(ENV_SECONDS, "") or "nan")
            if raw > 0:
                seconds = raw
        if env.get(ENV_MEMORY):
            with contextlib.suppress(ValueError):
                memory = parse_size(env[ENV_MEMORY])  # 0: no cap
        return cls(seconds, memory)


def _seconds(value: float) -> str:
    return f"{value:g} s"


def timed_out(pattern: str, limits: PatternLimits) -> str:
    """The message for a pattern stopped at its deadline."""
    return (
        f"the regular expression {_shown(pattern)} took longer than {_seconds(limits.seconds)} and was stopped "
        f"(limit {ENV_SECONDS}, rollout-graph search --regex-timeout). Nested repetition such as (\\w+\\s?)* "
        f"can take exponential time when the rest of the pattern does not match: simplify it"
    )


def _out_of_memory(pattern: str, limits: PatternLimits) -> str:
    return (
        f"the regular expression {_shown(pattern)} needed more than {human(limits.memory_bytes)} of memory and was "
        f"stopped (limit {ENV_MEMORY}); a pattern with repeated groups holds its place in every "
        f"character of a long text: simplify it"
    )


def _shown(pattern: str) -> str:
    text = repr(pattern)
    return text if len(text) <= 80 else text[:60] + f"…' ({len(pattern):,} characters)"


def check_length(pattern: str) -> None:
    """Refuse a pattern longer than :data:`MAX_PATTERN_CHARS` (its compile would run in this process)."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternError(
            f"the regular expression is {len(pattern):,} characters long; at most {MAX_PATTERN_CHARS:,} are searched for"
        )


def run(
    pattern: str,
    flags: int,
    texts: Sequence[str],
    mode: str = "scan",
    limits: PatternLimits | None = None,
) -> array:
    """Match ``pattern`` (compiled with ``re`` and ``flags``) against ``texts`` in a child process.

    ``mode`` ``scan``: ``start, end, count`` per text (``-1, -1, 0``: no match); ``spans``: per
    text ``n`` then its ``n`` ``start, end`` pairs; ``empty`` (no texts): ``[1]`` when the pattern
    matches the empty string. Offsets are in characters.

    Raises:
        PatternLimitError: over ``limits.seconds`` (waiting for a slot included) or ``limits.memory_bytes``.
        PatternError: the pattern does not compile, or the child could not run.
    """
    limits = limits or PatternLimits.from_env()
    check_length(pattern)
    deadline = time.monotonic() + limits.seconds
    if not _SLOTS.acquire(timeout=limits.seconds):
        raise PatternLimitError(
            f"the regular expression {_shown(pattern)} waited {_seconds(limits.seconds)} for other searches "
            f"to finish and was not run (at most {MAX_CHILDREN} run at once; limit {ENV_SECONDS})"
        )
    try:
        return _run(pattern, flags, texts, mode, limits, deadline)
    finally:
        _SLOTS.release()


def _frame(data: bytes) -> bytes:
    return len(data).to_bytes(4, "little") + data


def _run(pattern: str, flags: int, texts: Sequence[str], mode: str, limits: PatternLimits, deadline: float) -> array:
    header = {
        "pattern": pattern,
        "flags": int(flags),
        "mode": mode,
        "memory_bytes": limits.memory_bytes,
        "cpu_seconds": max(1, int(limits.seconds) + 1),
        "parent": os.getpid(),
    }
    payload = b"".join([_frame(orjson.dumps(header)), *(_frame(t.encode("utf-8", "surrogatepass")) for t in texts)])
    try:
        child = subprocess.Popen(
            [sys.executable, "-I", "-S", str(CHILD)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            close_fds=True,
            start_new_session=True,
            env={"MALLOC_ARENA_MAX": "1", "LC_ALL": "C.UTF-8"},
        )
    except OSError as exc:
        raise PatternError(f"the regular expression could not be run: {exc.strerror or exc}") from None
    try:
        out, err = child.communicate(payload, timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        _kill(child)
        raise PatternLimitError(timed_out(pattern, limits)) from None
    finally:
        del payload
        if child.poll() is None:
            _kill(child)
    code = child.returncode
    if code == 0:
        answer = array("q")
        answer.frombytes(out[: len(out) // 8 * 8])
        if sys.byteorder != "little":
            answer.byteswap()
        return answer
    if code == _OUT_OF_MEMORY or code in (-signal.SIGKILL, -signal.SIGSEGV, -signal.SIGABRT):
        raise PatternLimitError(_out_of_memory(pattern, limits))
    if code == -signal.SIGXCPU:
        raise PatternLimitError(timed_out(pattern, limits))
    detail = err.decode("utf-8", "replace").strip().splitlines()
    if code == _BAD_PATTERN:
        raise PatternError(f"bad regular expression {_shown(pattern)}: {detail[-1] if detail else 'does not compile'}")
    if any("MemoryError" in line for line in detail):
        raise PatternLimitError(_out_of_memory(pattern, limits))
    raise PatternError(
        f"the regular expression could not be run (its process exited {code}: {detail[-1][:200] if detail else ''})"
    )


def _kill(child: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        child.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        child.communicate(timeout=5)
