"""Resource limits for reading untrusted traces (docs/limits.md): a leaf every ingest layer uses.

Entry points: :class:`Limits` (with :meth:`Limits.from_env`), :data:`PUBLIC` and :func:`for_app`
(the public Space's and the app's), :func:`using` / :func:`active` (the limits of the load running
in this thread, for the record readers), :class:`SessionBudget` and :func:`may_exceed_sessions`
(``max_sessions``), :class:`LimitExceeded`. Every limit protects one resource (decompressed bytes,
a line's length, nesting, ids per array, Parquet rows and decoded bytes, sessions, resident
memory); hitting one skips that record or the rest of that file with a reason naming the limit and
its flag, and every other record still loads. Each has a ``--max-*`` flag and a
``ROLLOUT_GRAPH_MAX_*`` variable; the public Space sets far lower ones.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, fields, replace

GB = 1 << 30
MB = 1 << 20


class LimitExceeded(ValueError):
    """A record or file is over one of the :class:`Limits`; the message names the limit."""


@dataclass(frozen=True, slots=True, repr=False)
class Limits:
    """What one load may consume. ``None`` for ``max_memory_bytes`` means no cap."""

    max_file_bytes: int = 4 * GB  # decompressed bytes read from one file
    max_line_bytes: int = 256 * MB  # one JSONL line, or one whole JSON document
    max_depth: int = 512  # JSON nesting (orjson stops at 1024 whatever this says)
    max_ids: int = 64 * MB  # token ids in one array (64M ids)
    max_tool_index: int = 1024  # a stream chunk's tool_calls[].index
    max_expanded_ids: int = 64 * MB  # ids a rollout document's turns expand to (sum of n_prompt + n_sampled)
    max_parquet_rows: int = 4 * MB  # rows read from one Parquet file (signals, corpus uploads)
    max_parquet_bytes: int = 2 * GB  # uncompressed bytes one Parquet file declares in its footer
    max_sessions: int = 100_000  # rollouts (sessions) in one load; more is audit's work
    max_memory_bytes: int | None = None  # resident memory of the process while loading

    def __repr__(self) -> str:
        default = Limits()
        changed = [
            f"{f.name}={human(value) if value is not None and f.name.endswith('_bytes') else value}"
            for f in fields(self)
            if (value := getattr(self, f.name)) != getattr(default, f.name)
        ]
        return f"Limits({', '.join(changed) if changed else 'the defaults'})"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, base: Limits | None = None) -> Limits:
        """``base`` (the defaults) overridden by ``ROLLOUT_GRAPH_MAX_*`` variables.

        Raises:
            ValueError: a variable is set but is not a size.
        """
        env = os.environ if environ is None else environ
        limits = base or cls()
        changes = {}
        for f in fields(cls):
            value = env.get(f"ROLLOUT_GRAPH_{f.name.upper()}")
            if value:
                changes[f.name] = parse_size(value)
        return replace(limits, **changes) if changes else limits


# The public Space: a visitor's upload must never threaten the server (docs/deploy.md).
PUBLIC = Limits(
    max_file_bytes=512 * MB,
    max_line_bytes=64 * MB,
    max_depth=128,
    max_ids=4 * MB,
    max_tool_index=128,
    max_expanded_ids=8 * MB,
    max_parquet_rows=256 << 10,
    max_parquet_bytes=256 * MB,
    max_sessions=10_000,
    max_memory_bytes=None,
)

PUBLIC_ENV = "ROLLOUT_GRAPH_PUBLIC"  # set by `rollout-graph view --public`


def for_app(environ: Mapping[str, str] | None = None) -> Limits:
    """The app's limits: :data:`PUBLIC` on a public deployment, then ``ROLLOUT_GRAPH_MAX_*``."""
    env = os.environ if environ is None else environ
    base = PUBLIC if env.get(PUBLIC_ENV) == "1" else Limits()
    try:
        return Limits.from_env(env, base=base)
    except ValueError:  # a malformed variable must not take the app down: keep the base limits
        return base


_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*\Z", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": MB, "g": GB, "t": 1 << 40}


def parse_size(text: str) -> int:
    """``"4G"``, ``"200MB"``, ``"1.5g"``, ``"1000"`` -> bytes (or a plain count).

    Raises:
        ValueError: the text is not a non-negative size.
    """
    m = _SIZE.match(text)
    if not m:
        raise ValueError(f"not a size: {text!r} (e.g. 4G, 200M, 65536)")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def human(n: int) -> str:
    """Bytes as a short human-readable size."""
    for unit, size in (("GB", GB), ("MB", MB), ("KB", 1 << 10)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value.is_integer() else f"{value:.1f} {unit}"
    return f"{n} bytes"


_ACTIVE: ContextVar[Limits] = ContextVar("rollout_graph_limits", default=Limits())  # noqa: B039 - frozen


def active() -> Limits:
    """The limits of the load running in this thread (the defaults outside a load)."""
    return _ACTIVE.get()


class using:  # noqa: N801 - a context manager used like a function
    """``with using(limits):`` makes ``limits`` :func:`active` for the record converters."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits

    def __enter__(self) -> Limits:
        self._token = _ACTIVE.set(self.limits)
        return self.limits

    def __exit__(self, *exc: object) -> None:
        _ACTIVE.reset(self._token)


SESSIONS_PROBE = 1000  # records read before a file's rollout count is projected


class SessionBudget:
    """Refuse a file early when it would bring the load over ``max_sessions``.

    After :data:`SESSIONS_PROBE` records, the rollouts this file added so far are projected over
    the whole file (its size over the bytes of its first lines; plain files only); a projection
    over twice the limit stops the file at once. Otherwise the real count is checked as records
    arrive. Either way the reason names the limit, the flag, and ``audit``.
    """

    def __init__(self, limits: Limits, path: str | None, sessions_before: int) -> None:
        self.limit = limits.max_sessions
        self.before = sessions_before
        self.lines = _projected_lines(path) if path is not None else None  # uploads: the real count

    def check(self, records: int, sessions: int) -> str | None:
        """The refusal, or None; call with the records read from this file and the load's sessions."""
        if sessions > self.limit:
            return self._reason(f"{sessions:,} rollouts so far")
        if records == SESSIONS_PROBE and self.lines is not None:
            projected = int((sessions - self.before) / records * self.lines) + self.before
            if projected > 2 * self.limit:
                return self._reason(f"about {projected:,} rollouts, projected from its first {records:,} records")
        return None

    def _reason(self, what: str) -> str:
        return (
            f"over a limit: this load would hold {what}, more than {self.limit:,} "
            f"(limit max_sessions, --max-sessions); the rest of this file is not read. For one row per "
            f"rollout run `rollout-graph audit FILE --out audit.parquet` (it streams the file, holding only "
            f"the rollouts open at once), or split the file"
        )


def may_exceed_sessions(names: list[str], limits: Limits) -> bool:
    """Whether files could bring a load over ``max_sessions`` (lines bound rollouts from above).

    The parallel reader merges what its workers parsed, so it cannot stop a file early: a load
    this returns True for is read sequentially, where :class:`SessionBudget` is checked. A plain
    file counts its projected lines; a compressed one (unknown) its size over 40 bytes.
    """
    total = 0
    for name in names:
        lines = _projected_lines(name)
        if lines is None:
            try:
                lines = os.stat(name).st_size // 40
            except OSError:
                lines = 0
        total += lines
        if total > limits.max_sessions:
            return True
    return False


def _projected_lines(name: str) -> int | None:
    """Lines in a plain file, estimated from its size and its first megabyte; None if unknown."""
    try:  # opened non-blocking and checked with fstat: a FIFO must never block here
        fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        size = info.st_size
        head = os.read(fd, 1 << 20)
    except OSError:
        return None
    finally:
        os.close(fd)
    if head[:2] == b"\x1f\x8b" or head[:4] == b"\x28\xb5\x2f\xfd" or not head:
        return None  # compressed: the real count is checked instead
    newlines = head.count(b"\n")
    if newlines == 0:
        return None
    return int(size / (len(head) / newlines))


def resident_bytes() -> int | None:
    """This process's resident memory now (Linux ``/proc/self/statm``); None elsewhere."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None
