"""Resource limits for reading untrusted traces (docs/limits.md).

Every limit protects one resource: decompressed bytes per file (a gzip or zstd bomb), the length
of one line (a file of one endless line), JSON nesting depth (the stdlib parser recurses), ids per
array and the tool-call index (both size an allocation), and the resident memory of the whole
load. Hitting a limit skips that record, or the rest of that file, with a reason naming the limit;
every other record still loads.

Defaults suit a workstation. Each can be set by a command-line flag (``--max-file-bytes`` ...) or
an environment variable (``ROLLOUT_GRAPH_MAX_FILE_BYTES`` ...); the public Space sets far lower
ones (:data:`PUBLIC`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, fields, replace

GB = 1 << 30
MB = 1 << 20


class LimitExceeded(ValueError):
    """A record or file is over one of the :class:`Limits`; the message names the limit."""


@dataclass(frozen=True, slots=True)
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
    max_memory_bytes: int | None = None  # resident memory of the process while loading

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


def resident_bytes() -> int | None:
    """This process's resident memory now (Linux ``/proc/self/statm``); None elsewhere."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None
