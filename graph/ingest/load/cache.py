"""A persistent cache of parsed traces: reopening a big trace skips parsing.

Entry points: :func:`load` (the entry under a key, or None; a damaged one is removed with a note),
:func:`store` (a load written under a key, renamed into place whole), :func:`key_for_files` /
:func:`key_for_bytes`, :func:`cache_dir` and :func:`enabled`. One entry per load (trace files read
with given limits), in ``$ROLLOUT_GRAPH_CACHE``, else ``$XDG_CACHE_HOME/rollout-graph``, else
``~/.cache/rollout-graph``, never beside the traces; least recently used entries go past
``ROLLOUT_GRAPH_CACHE_MAX_BYTES`` (8 GB). The key hashes each file's path, size, times and inode
(uploads: their bytes), the limits, :data:`FORMAT` and the reading and core code, so a parser
change never serves an old entry. ``files.py`` calls it; an entry's files are written and read by
``cache_write.py`` and ``cache_read.py``. docs/performance.md, "The cached reopen".
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path
from stat import S_ISDIR
from typing import Any

from rollout_graph.core.records import LoadResult
from rollout_graph.ingest.load.cache_format import FORMAT, NotCacheable, call_fields_covered, note
from rollout_graph.ingest.load.cache_read import read_entry
from rollout_graph.ingest.load.cache_write import write_entry

# hashlib, shutil and tempfile are imported by the functions that use them: a load with the cache
# off (`inspect --no-cache`) needs none of them (docs/performance.md, "Start-up and the print").

__all__ = [
    "DEFAULT_MAX_BYTES",
    "ENV_DIR",
    "ENV_MAX",
    "FORMAT",
    "NotCacheable",
    "cache_dir",
    "call_fields_covered",
    "enabled",
    "key_for_bytes",
    "key_for_files",
    "load",
    "store",
]


DEFAULT_MAX_BYTES = 8 << 30


ENV_DIR = "ROLLOUT_GRAPH_CACHE"


ENV_MAX = "ROLLOUT_GRAPH_CACHE_MAX_BYTES"


def enabled() -> bool:
    """False when ``ROLLOUT_GRAPH_CACHE`` is ``off`` (``--no-cache``)."""
    return os.environ.get(ENV_DIR, "").lower() not in ("off", "0", "none")


def cache_dir() -> Path:
    """The cache folder (not created here)."""
    explicit = os.environ.get(ENV_DIR)
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rollout-graph"


def _max_bytes() -> int:
    try:
        return int(os.environ.get(ENV_MAX, DEFAULT_MAX_BYTES))
    except ValueError:
        return DEFAULT_MAX_BYTES


@cache
def _code_fingerprint() -> str:
    """A hash of the reading code and the core: a parser change must not serve results of the old
    parser, nor a change of the linking rules links of the old ones."""
    import hashlib

    root = Path(__file__).resolve().parents[1]  # graph/ingest
    digest = hashlib.sha256()
    files = sorted(root.rglob("*.py")) + sorted((root.parent / "core").glob("*.py"))
    for path in files:
        digest.update(str(path.relative_to(root.parent)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def key_for_files(files: Iterable[str | Path], limits: Any = None) -> str:
    """The cache key of a load of these files (path, size, modification and change times, inode).

    The change time (``st_ctime_ns``) moves on every write even when a rewrite restores the size
    and the modification time (``touch -r``), and a file replaced by another gets a new inode.
    """
    import hashlib

    parts = [f"format {FORMAT}", _code_fingerprint(), f"limits {limits!r}"]
    for f in files:
        p = Path(f)
        stat = p.stat()
        parts.append(f"{p.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}\0{stat.st_ctime_ns}\0{stat.st_ino}")
    return hashlib.sha256("\n".join(parts).encode("utf-8", "surrogateescape")).hexdigest()[:40]


def key_for_bytes(named: Iterable[tuple[str, bytes]], limits: Any = None) -> str:
    """The cache key of a load of in-memory files (uploads): a hash of names and contents."""
    import hashlib

    digest = hashlib.sha256(f"format {FORMAT}\n{_code_fingerprint()}\nlimits {limits!r}".encode())
    for name, data in named:
        digest.update(name.encode("utf-8", "surrogateescape") + b"\0" + hashlib.sha256(data).digest())
    return digest.hexdigest()[:40]


def _entry(key: str, folder: Path | None = None) -> Path:
    return (folder or cache_dir()) / f"v{FORMAT}-{key}"


def load(key: str, folder: Path | None = None) -> LoadResult | None:
    """The cached load under ``key``, or None (missing; a corrupt entry is removed, with a note)."""
    import shutil

    entry = _entry(key, folder)
    result: LoadResult | None = None
    failure: Exception | None = None
    for _ in range(2):  # once more when another writer swapped a new entry in while this one was read
        try:
            found = os.stat(entry)
        except OSError:
            return None
        if not S_ISDIR(found.st_mode):
            return None
        inode = found.st_ino
        try:
            result = read_entry(entry)
        except Exception as exc:  # noqa: BLE001 - any unreadable entry is rebuilt, whatever broke it
            if _replaced(entry, inode):
                continue
            failure = exc
        break
    if failure is not None:
        note(
            "rollout-graph: ignored the cache entry %s (%s: %s); reading the trace again",
            entry,
            type(failure).__name__,
            failure,
        )
        shutil.rmtree(entry, ignore_errors=True)
        return None
    if result is None:
        return None
    try:
        os.utime(entry)  # recently used
    except OSError:
        pass
    return result


def _replaced(entry: Path, inode: int) -> bool:
    """True when ``entry`` is no longer the folder of that inode: a writer of the same key swapped a
    new entry in (or took the old one away) while it was read. That entry is not the reader's to
    remove."""
    try:
        return os.stat(entry).st_ino != inode
    except OSError:
        return True


def store(key: str, result: LoadResult, folder: Path | None = None, between: Callable[[], None] | None = None) -> bool:
    """Write the load under ``key``; False when it cannot be cached (values or disk). ``between``
    is called after each batch of calls is written (a server pauses the write there while a page
    runs)."""
    import shutil

    root = folder or cache_dir()
    entry = _entry(key, root)
    try:
        root.mkdir(parents=True, exist_ok=True)
        import tempfile  # only a writer needs it

        tmp = Path(tempfile.mkdtemp(prefix=".writing-", dir=root))
        try:
            write_entry(tmp, result, between)
            _swap_in(tmp, entry)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    except (NotCacheable, OSError):
        return False
    except Exception:  # noqa: BLE001 - a cache must never break a load, whatever went wrong
        return False
    _evict(root)
    return True


def _swap_in(tmp: Path, entry: Path) -> None:
    """Put the written folder ``tmp`` in place of ``entry`` by renames only: the old entry is moved
    aside first and removed after, so a reader finds either a whole entry or none (never one half
    removed), and a reader that was part way through the old one sees it replaced
    (:func:`_replaced`) instead of taking it for a corrupt entry. When another writer of the same
    key renamed its entry in between, that one is kept."""
    import shutil

    aside = entry.with_name(f".old-{tmp.name}")
    try:
        entry.rename(aside)
    except FileNotFoundError:
        pass
    try:
        tmp.rename(entry)
    except OSError:
        if not entry.is_dir():
            raise
    shutil.rmtree(aside, ignore_errors=True)


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.iterdir() if f.is_file())


def _evict(root: Path) -> None:
    """Remove the least recently used entries while the folder is over its size bound."""
    import shutil

    try:
        entries = [(e.stat().st_mtime, e) for e in root.iterdir() if e.is_dir() and not e.name.startswith(".")]
        stale = [
            e
            for e in root.iterdir()
            if e.name.startswith((".writing-", ".old-")) and time.time() - e.stat().st_mtime > 3600
        ]
    except OSError:
        return
    for e in stale:
        shutil.rmtree(e, ignore_errors=True)
    total = sum(_size(e) for _, e in entries)
    for _, e in sorted(entries):
        if total <= _max_bytes():
            break
        total -= _size(e)
        shutil.rmtree(e, ignore_errors=True)
