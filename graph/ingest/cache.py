"""A persistent cache of parsed traces: reopening a big trace skips parsing.

One entry per load (a set of trace files read with given limits) is kept in a cache folder, never
beside the traces: ``$ROLLOUT_GRAPH_CACHE``, else ``$XDG_CACHE_HOME/rollout-graph``, else
``~/.cache/rollout-graph``. An entry is a folder of five files:

- ``arrays.bin``: the token arrays a summary reads (prompt ids, sampled ids, sampled logprobs) as
  raw little-endian bytes. Prompts that share their parent's ids in memory (views of one id arena,
  graph/ingest/id_arrays.py) are written once: the part of the arena they cover, each prompt an
  offset into it;
- ``top.bin``: the top-k alternatives of each call (ids, logprobs, texts), read only when a call's
  alternatives are first used (a checksum per call guards them);
- ``calls.jsonl``: a line per call (names, the arrays' offsets, dtypes and shapes, the free-form
  fields as JSON); ``values.jsonl``: a line per distinct request message or tool list, referenced
  by index from every call that repeats it (the loaded calls share one object, as a fresh load
  does); ``meta.json``: the load report, the sessions with their documents and their calls' links
  (:func:`rollout_graph.core.linking.link`, so a reopen does not link again: format 3), every
  file's size and CRC-32 (its own on its first line). Every file is checked when read; ``top.bin``
  per call.

A reopen reads ``arrays.bin`` into memory in one read (never memory-mapped: a file truncated
under a mapping kills the process) and makes every array a view of that buffer: the reopened
load holds what the cold path holds (shared prompts stay shared). The alternatives stay in
``top.bin``, read through a file descriptor opened at the reopen (an entry evicted or removed
afterwards is still readable; one changed in place fails its checksum and the alternatives are
empty with :attr:`TopK.unavailable` saying why, as for a trace that changed).

The key hashes, for each file, its resolved path, size, modification and change times and inode
(uploads: a hash of their bytes), the reading limits, :data:`FORMAT`, and the source of the
reading code and of the core (the records, and the linking the entry's links come from) itself,
so a change of format, parser or linking rules invalidates every entry (an entry of another
format is not found under the new key: the trace is read again and a new entry written). Entries are written
to a temporary folder and renamed into place (the old entry moved aside first, so two writers of one
key and a reader never meet a half-removed entry; a reader whose entry was replaced while it read
reads the new one); an entry that cannot be read (truncated, corrupt,
another version) is deleted with a note on the ``rollout_graph.cache`` logger (stderr by default)
and the trace parsed again. A load whose values JSON cannot carry exactly (NaN in a free-form
field, numpy arrays where JSON was expected) is simply not cached. When the folder grows past
``ROLLOUT_GRAPH_CACHE_MAX_BYTES`` (default 8 GB) the least recently used entries are removed.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
import zlib
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from dataclasses import fields
from functools import cache
from itertools import islice
from pathlib import Path
from stat import S_ISDIR
from typing import Any

import numpy as np
import orjson

from rollout_graph.core.records import Call, Finding, LoadResult, SessionInput, Skipped, TopK

# hashlib and shutil are imported by the functions that use them: a load with the cache off
# (`inspect --no-cache`) needs neither (docs/performance.md).

FORMAT = 3  # 3: the sessions' links in meta.json
DEFAULT_MAX_BYTES = 8 << 30
ENV_DIR = "ROLLOUT_GRAPH_CACHE"
ENV_MAX = "ROLLOUT_GRAPH_CACHE_MAX_BYTES"
# Every Call field, so a new field without a place fails loudly (a test checks) instead of
# being silently dropped from cached loads.
CALL_FIELDS = (
    "node_id",
    "session_id",
    "source",
    "line",
    "shape",
    "prompt_ids",
    "sampled_ids",
    "sampled_logprobs",
    "top_k",
    "token_texts",
    "request_messages",
    "response_message",
    "tools",
    "requested_params",
    "submitted_params",
    "model",
    "finish_reason",
    "timing",
    "usage",
    "harness",
    "issues",
    "claims",
)
_TEXT_FIELDS = ("node_id", "session_id", "source", "line", "shape", "model", "finish_reason", "harness")
_JSON_FIELDS = ("token_texts", "response_message", "requested_params", "submitted_params", "timing", "usage", "claims")
BATCH_CALLS = 64  # calls encoded at a time: the writer's extra memory is one batch's rows, and a page run
# waits at most one batch (about 20 ms of CPU on 5,000 vLLM calls, their alternatives read) for it to pause
_ALIGN = 16
_FILES = ("meta.json", "calls.jsonl", "values.jsonl", "arrays.bin", "top.bin")
_CHUNK = 1 << 20


def _note(message: str, *args: Any) -> None:
    """A warning on the ``rollout_graph.cache`` logger (stderr unless configured otherwise);
    logging is imported only when there is something to say."""
    import logging

    logging.getLogger("rollout_graph.cache").warning(message, *args)


class NotCacheable(ValueError):
    """A value the cache cannot store exactly; the load is used as is, uncached."""


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

    root = Path(__file__).resolve().parent
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


# ---------------------------------------------------------------------------------------------
# Encoding


def _blob(value: Any) -> bytes:
    """``value`` as JSON that decodes to exactly it; NotCacheable when JSON cannot carry it."""
    if value is None:
        return b"null"
    try:
        blob = orjson.dumps(value)
    except TypeError as exc:  # numpy arrays, non-str keys, huge ints, lone surrogates
        raise NotCacheable(str(exc)) from None
    # orjson writes NaN and infinities as null: only a blob holding a null can have lost one.
    if b"null" in blob and not _same(orjson.loads(blob), value):
        raise NotCacheable("a value JSON cannot carry exactly (NaN or infinity)")
    return blob


def _json(value: Any) -> orjson.Fragment:
    """``value`` checked as :func:`_blob` does, to embed in a bigger JSON document."""
    return _NULL if value is None else orjson.Fragment(_blob(value))


_NULL = orjson.Fragment(b"null")


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


_SCALARS = (str, int, float, bool, type(None))


def _flat_key(message: Any) -> tuple | None:
    """A hashable key for a dict of scalar values (types included: ``1`` is not ``True``)."""
    if type(message) is not dict:
        return None
    key = []
    for k, v in message.items():
        if type(v) not in _SCALARS or (type(v) is float and v != v):
            return None
        key.append((k, type(v), v.hex() if type(v) is float else v))  # -0.0 == 0.0, yet not the same
    return tuple(key)


class _Values:
    """Distinct request messages and tool lists, each encoded once (every call repeats the
    conversation; messages shared between calls are one object) and written to ``values.jsonl``
    as soon as it is met."""

    def __init__(self, sink: _Checked) -> None:
        self._sink = sink
        self._blobs: dict[bytes, int] = {}
        self._by_object: dict[int, int] = {}
        self._by_flat: dict[tuple, int] = {}

    def index(self, value: Any) -> int:
        known = self._by_object.get(id(value))
        if known is not None:
            return known
        flat = _flat_key(value)
        known = self._by_flat.get(flat) if flat is not None else None
        if known is None:
            # an exact-size copy: orjson's own result keeps its whole growth buffer (32 KB for a
            # 3 KB message), which, kept for every distinct message, was most of a store's memory
            blob = bytes(memoryview(_blob(value)))
            known = self._blobs.get(blob)
            if known is None:
                known = self._blobs[blob] = len(self._blobs)
                self._sink.write(blob + b"\n")  # orjson never writes a raw newline
            if flat is not None:
                self._by_flat[flat] = known
        self._by_object[id(value)] = known
        return known


def _plain(arr: np.ndarray) -> np.ndarray:
    if arr.dtype.kind not in "iuf" or arr.dtype.byteorder == ">":
        raise NotCacheable(f"array of dtype {arr.dtype}")
    return arr


def _raw(arr: np.ndarray) -> memoryview:
    """The array's bytes (a view unless it must be made contiguous); empty arrays too."""
    return memoryview(np.ascontiguousarray(arr).reshape(-1).view(np.uint8))  # type: ignore[arg-type]


def _address(arr: np.ndarray) -> int:
    return int(arr.__array_interface__["data"][0])


def _shared_base(
    arr: np.ndarray, addresses: dict[int, tuple[np.ndarray, int]] | None = None
) -> tuple[np.ndarray, int] | None:
    """The array ``arr`` is a contiguous view of (an id arena), when its bytes lie inside it, and
    where they start in it. ``addresses``: the bases met so far and their addresses, by id (each
    held there, so no id is reused meanwhile): a base shared by thousands of prompts is asked for
    its address once."""
    base = arr.base
    if not isinstance(base, np.ndarray) or not (arr.flags.c_contiguous and base.flags.c_contiguous):
        return None
    if addresses is None:
        base_address = _address(base)
    else:
        known = addresses.get(id(base))
        if known is None:
            known = addresses[id(base)] = (base, _address(base))
        base_address = known[1]
    start = _address(arr) - base_address
    return (base, start) if 0 <= start and start + arr.nbytes <= base.nbytes else None


def _flush(pending: list, sink: _Checked) -> None:
    """Write the queued pieces: small ones joined (one checksum and one write for many arrays),
    each piece of a MB or more as it is (never copied)."""
    small: list = []
    for data in pending:
        if len(data) < _CHUNK:
            small.append(data)
            continue
        if small:
            sink.write(b"".join(small))
            small = []
        sink.write(data)
    if small:
        sink.write(b"".join(small))


class _Eager:
    """Lays out ``arrays.bin``: every part of a shared base that some array covers is written
    once (the first time an array needs it), each array an offset into what was written."""

    def __init__(self, calls: list[Call]) -> None:
        spans: dict[int, list[tuple[int, int]]] = {}
        self._bases: dict[int, np.ndarray] = {}
        self._addresses: dict[int, tuple[np.ndarray, int]] = {}  # id(base) -> (base, its address)
        for call in calls:
            for arr in (call.prompt_ids, call.sampled_ids, call.sampled_logprobs):
                found = None if arr is None or arr.nbytes == 0 else _shared_base(arr, self._addresses)
                if arr is not None and found is not None:
                    base, start = found
                    spans.setdefault(id(base), []).append((start, start + arr.nbytes))
                    self._bases[id(base)] = base
        # per base: merged covered intervals (starts, ends) and where each was written (or None)
        self._intervals: dict[int, tuple[list[int], list[int], list[int | None]]] = {}
        for key, pairs in spans.items():
            starts: list[int] = []
            ends: list[int] = []
            for a, b in sorted(pairs):
                if ends and a <= ends[-1]:
                    ends[-1] = max(ends[-1], b)
                else:
                    starts.append(a)
                    ends.append(b)
            self._intervals[key] = (starts, ends, [None] * len(starts))
        self.size = 0
        self._pending: list[memoryview] = []

    def _put(self, data: memoryview, align_to: int) -> int:
        pad = (align_to - self.size) % _ALIGN
        if pad:
            self._pending.append(memoryview(bytes(pad)))
            self.size += pad
        offset = self.size
        self._pending.append(data)
        self.size += data.nbytes
        return offset

    def describe(self, arr: np.ndarray | None) -> list | None:
        """``[offset, dtype, shape, writeable]`` of ``arr`` in ``arrays.bin`` (its bytes queued)."""
        if arr is None:
            return None
        arr = _plain(arr)
        shape = list(arr.shape)
        writeable = 1 if arr.flags.writeable else 0
        found = None if arr.nbytes == 0 else _shared_base(arr, self._addresses)
        if found is None or id(found[0]) not in self._intervals:
            data = _raw(arr)
            return [self._put(data, _address(arr)), arr.dtype.str, shape, writeable]
        base, start = found
        starts, ends, written = self._intervals[id(base)]
        i = bisect_right(starts, start) - 1
        if written[i] is None:
            flat = base.reshape(-1).view(np.uint8)
            written[i] = self._put(memoryview(flat[starts[i] : ends[i]]), self._addresses[id(base)][1] + starts[i])  # type: ignore[arg-type]
        offset = written[i]
        assert offset is not None
        return [offset + start - starts[i], arr.dtype.str, shape, writeable]

    def flush(self, sink: _Checked) -> None:
        _flush(self._pending, sink)
        self._pending = []


class _Top:
    """Lays out ``top.bin``: each call's alternatives (ids, logprobs, texts) in one checked chunk."""

    def __init__(self) -> None:
        self.size = 0
        self._pending: list[bytes | memoryview] = []

    def describe(self, top: TopK | None) -> list | None:
        if top is None:
            return None
        ids, lps = _plain(top.ids), _plain(top.logprobs)
        parts = [
            _raw(ids),
            _raw(lps),
            memoryview(bytes(memoryview(_blob(top.texts)))),  # exact size: see _Values
        ]
        crc = 0
        for part in parts:
            crc = zlib.crc32(part, crc)
        pad = (-self.size) % _ALIGN
        if pad:
            self._pending.append(bytes(pad))
            self.size += pad
        offset = self.size
        self._pending.extend(parts)
        length = sum(p.nbytes for p in parts)
        self.size += length
        return [offset, length, crc, top.rows, ids.dtype.str, list(ids.shape), lps.dtype.str, list(lps.shape)]

    def flush(self, sink: _Checked) -> None:
        _flush(self._pending, sink)
        self._pending = []


_DIRECT = (str, int, type(None))  # values orjson writes exactly as they are (or refuses: TypeError)


def _issues(issues: list[Finding]) -> list:
    return [
        [v if type(v) in _DIRECT else _json(v) for v in (f.level, f.code, f.detail, f.node_id, f.leaf_id)]
        for f in issues
    ]


def _row(call: Call, eager: _Eager, tops: _Top, values: _Values) -> bytes:
    # the names, the source, the line and the model are strings, an int or None: written as they
    # are (what _json would embed; a lone surrogate or a huge int fails the dump below the same way)
    row: list[Any] = [v if type(v) in _DIRECT else _json(v) for v in map(call.__getattribute__, _TEXT_FIELDS)]
    row.append(eager.describe(call.prompt_ids))
    row.append(eager.describe(call.sampled_ids))
    row.append(eager.describe(call.sampled_logprobs))
    row.append(tops.describe(call.top_k))
    row.append(None if call.request_messages is None else [values.index(m) for m in call.request_messages])
    row.append(None if call.tools is None else values.index(call.tools))
    row.extend(_json(getattr(call, name)) for name in _JSON_FIELDS)
    row.append(_issues(call.issues))
    try:
        return orjson.dumps(row)
    except TypeError as exc:
        raise NotCacheable(str(exc)) from None


def _links(calls: list[Call]) -> tuple[list, list]:
    """The session's links as written: each call's parent (arrival index or null) and what linked
    it, computed here from its calls (the same :func:`rollout_graph.core.linking.link` a reopen would
    run, so an entry's links are those of its calls by construction)."""
    from rollout_graph.core.linking import link

    links = link(calls)
    return links.parents, links.linked_by


def _read_links(parents: Any, linked_by: Any, n_calls: int) -> Any:
    """The links of a session of ``n_calls`` calls from ``meta.json``, checked (a parent is an
    earlier or later call of the session, never the call itself; every link says how it was found)."""
    from rollout_graph.core.linking import MESSAGES, TOKENS, Links

    if type(parents) is not list or type(linked_by) is not list or len(parents) != n_calls or len(linked_by) != n_calls:
        raise ValueError("meta.json holds links of another length than the session's calls")
    for i, (parent, via) in enumerate(zip(parents, linked_by, strict=True)):
        if parent is None:
            if via is not None:
                raise ValueError("meta.json links a root")
        elif type(parent) is not int or not 0 <= parent < n_calls or parent == i or via not in (TOKENS, MESSAGES):
            raise ValueError("meta.json holds a link to no call of the session")
    return Links(parents, [TOKENS if v == TOKENS else MESSAGES if v == MESSAGES else None for v in linked_by])


def _meta(
    result: LoadResult,
    sessions: dict[str, list[Call]],
    links: dict[str, tuple[list, list]],
    n_calls: int,
    eager_bytes: int,
    top_bytes: int,
    crcs: dict[str, int],
) -> bytes:
    meta = {
        "format": FORMAT,
        "records": result.records,
        "loaded": result.loaded,
        "skipped": [[_json(s.file), s.line, _json(s.reason)] for s in result.skipped],
        "files": [_json(f) for f in result.files],
        "sessions": [
            [
                _json(sid),
                len(calls),
                _json(result.sessions[sid].document),
                [_json(n) for n in sorted(result.sessions[sid].node_ids)],
                *links[sid],
            ]
            for sid, calls in sessions.items()
        ],
        "calls": n_calls,
        "arrays_bytes": eager_bytes,
        "top_bytes": top_bytes,
        "crc32": crcs,
    }
    try:
        return orjson.dumps(meta)
    except TypeError as exc:
        raise NotCacheable(str(exc)) from None


class _Checked:
    """A file being written, with the CRC-32 of what was written so far."""

    def __init__(self, path: Path) -> None:
        self.file = open(path, "wb")  # noqa: SIM115 - closed by the writer's finally
        self.crc = 0

    def write(self, data: bytes | memoryview) -> None:
        self.crc = zlib.crc32(data, self.crc)
        self.file.write(data)


def _write(folder: Path, result: LoadResult, between: Callable[[], None] | None) -> None:
    """Write the entry's files into ``folder`` (``meta.json`` last: it holds the others' sizes
    and checksums, and its own on its first line).

    Raises:
        NotCacheable: a value JSON cannot carry exactly.
        OSError: the disk refused.
    """
    # the calls as they are now, for the rows, the counts and the links alike (a followed trace's
    # session may grow while its first read is written; such an entry's key no longer matches it)
    sessions = {sid: list(s.calls) for sid, s in list(result.sessions.items())}
    calls = [c for session_calls in sessions.values() for c in session_calls]
    sinks = {name: _Checked(folder / name) for name in ("calls.jsonl", "arrays.bin", "top.bin", "values.jsonl")}
    eager, tops, values = _Eager(calls), _Top(), _Values(sinks["values.jsonl"])
    try:
        rows, arrays, top = sinks["calls.jsonl"], sinks["arrays.bin"], sinks["top.bin"]
        for i in range(0, len(calls), BATCH_CALLS):
            rows.write(b"".join([_row(c, eager, tops, values) + b"\n" for c in calls[i : i + BATCH_CALLS]]))
            eager.flush(arrays)
            tops.flush(top)
            if between is not None:
                between()
    finally:
        for sink in sinks.values():
            sink.file.close()
    crcs = {name: sink.crc for name, sink in sinks.items() if name != "top.bin"}  # top.bin: per call
    links = {}
    for sid, session_calls in sessions.items():
        links[sid] = _links(session_calls)
        if between is not None:
            between()
    meta = _meta(result, sessions, links, len(calls), eager.size, tops.size, crcs)
    (folder / "meta.json").write_bytes(b"%d\n" % zlib.crc32(meta) + meta)


# ---------------------------------------------------------------------------------------------
# Decoding


_SEEK_LOCK = threading.Lock()


class _TopFile:
    """``top.bin`` of one entry, open from the reopen on (an entry removed later stays readable);
    pickled by path."""

    def __init__(self, path: str, size: int, fd: int | None = None) -> None:
        self.path, self.size = path, size
        self._fd = fd
        if fd is not None:
            weakref.finalize(self, os.close, fd)

    def read(self, offset: int, length: int) -> bytearray:
        if self._fd is None:
            fd = os.open(self.path, os.O_RDONLY)
            self._fd = fd
            weakref.finalize(self, os.close, fd)
        if os.fstat(self._fd).st_size != self.size:
            raise ValueError("it was truncated or rewritten")
        buf = bytearray(length)
        if hasattr(os, "preadv"):  # positional: threads reading other calls' chunks do not interfere
            done = os.preadv(self._fd, [buf], offset)
        else:  # Windows
            with _SEEK_LOCK:
                os.lseek(self._fd, offset, os.SEEK_SET)
                data = os.read(self._fd, length)
            buf[: len(data)] = data
            done = len(data)
        if done != length:
            raise ValueError("it was truncated or rewritten")
        return buf

    def drop(self) -> None:
        """Remove the entry this file belongs to (it was changed in place): the next load parses
        the trace again. An entry written anew under the same key since is left alone."""
        import shutil

        try:
            if self._fd is not None and os.fstat(self._fd).st_ino != os.stat(self.path).st_ino:
                return
        except OSError:
            return
        _note("rollout-graph: the cache entry %s changed after it was read; removed", Path(self.path).parent)
        shutil.rmtree(Path(self.path).parent, ignore_errors=True)

    def __getstate__(self) -> tuple[str, int]:
        return self.path, self.size

    def __setstate__(self, state: tuple[str, int]) -> None:
        self.path, self.size = state
        self._fd = None


class _CachedTop:
    """One call's alternatives, read from ``top.bin`` when first used; never raises."""

    __slots__ = ("file", "desc")

    def __init__(self, file: _TopFile, desc: list) -> None:
        self.file, self.desc = file, desc

    def __call__(self) -> TopK:
        offset, length, crc, rows, ids_dtype, ids_shape, lps_dtype, lps_shape = self.desc
        try:
            buf = self.file.read(offset, length)
            if zlib.crc32(buf) != crc:
                self.file.drop()
                raise ValueError("they do not match their checksum (the entry is removed)")
            ids = np.frombuffer(buf, dtype=np.dtype(ids_dtype), count=int(np.prod(ids_shape))).reshape(ids_shape)
            n_ids = ids.nbytes
            lps = np.frombuffer(buf, dtype=np.dtype(lps_dtype), count=int(np.prod(lps_shape)), offset=n_ids)
            texts = orjson.loads(bytes(buf[n_ids + lps.nbytes :]))
            return TopK(ids, lps.reshape(lps_shape), texts)
        except (OSError, ValueError, TypeError) as exc:
            top = TopK(np.full((rows, 0), -1, dtype=np.int32), np.full((rows, 0), np.nan, dtype=np.float32))
            top.unavailable = f"cannot read the alternatives from the cache entry {self.file.path}: {exc}"
            return top

    def __getstate__(self) -> tuple[_TopFile, list]:
        return self.file, self.desc

    def __setstate__(self, state: tuple[_TopFile, list]) -> None:
        self.file, self.desc = state


def _array(buf: np.ndarray, desc: list | None) -> np.ndarray | None:
    if desc is None:
        return None
    offset, dtype, shape, writeable = desc
    dt = np.dtype(dtype)
    count = 1
    for n in shape:
        count *= n
    if offset < 0 or offset + count * dt.itemsize > buf.nbytes:
        raise ValueError("an array lies outside arrays.bin")
    arr = np.frombuffer(buf, dtype=dt, count=count, offset=offset).reshape(shape)
    if not writeable:
        arr.flags.writeable = False
    return arr


def _read_exactly(path: Path, size: int, crc: int) -> np.ndarray:
    """The file's bytes in a buffer of this process (read, never mapped), checked."""
    buf = np.empty(size, dtype=np.uint8)
    with open(path, "rb", buffering=0) as f:
        if os.fstat(f.fileno()).st_size != size or f.readinto(memoryview(buf)) != size:  # type: ignore[arg-type]
            raise ValueError(f"{path.name} has another size than written")
    if zlib.crc32(buf) != crc:  # type: ignore[arg-type]
        raise ValueError(f"{path.name} does not match its checksum")
    return buf


def _lines(path: Path, crc: int) -> Iterator[Any]:
    """Each line's JSON value, read a chunk at a time (the text is never held whole); the
    checksum is checked at the end."""
    rest = b""
    seen = 0
    with open(path, "rb", buffering=0) as f:
        while chunk := f.read(_CHUNK):
            seen = zlib.crc32(chunk, seen)
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()
            for line in lines:
                yield orjson.loads(line)
    if rest:
        raise ValueError(f"{path.name} ends in an unfinished line")
    if seen != crc:
        raise ValueError(f"{path.name} does not match its checksum")


def _decode(entry: Path) -> LoadResult:
    head, _, blob = (entry / "meta.json").read_bytes().partition(b"\n")
    if not head.isdigit() or int(head) != zlib.crc32(blob):
        raise ValueError("meta.json does not match its checksum")
    meta = orjson.loads(blob)
    if meta.get("format") != FORMAT:
        raise ValueError(f"cache format {meta.get('format')} is not {FORMAT}")
    crcs = meta["crc32"]
    buf = _read_exactly(entry / "arrays.bin", meta["arrays_bytes"], crcs["arrays.bin"])
    top_path = entry / "top.bin"
    fd = os.open(top_path, os.O_RDONLY)
    top_file = _TopFile(str(top_path), meta["top_bytes"], fd)
    if os.fstat(fd).st_size != meta["top_bytes"]:
        raise ValueError("top.bin has another size than written")
    values = list(_lines(entry / "values.jsonl", crcs["values.jsonl"]))
    rows = _lines(entry / "calls.jsonl", crcs["calls.jsonl"])
    result = LoadResult(
        records=meta["records"],
        loaded=meta["loaded"],
        skipped=[Skipped(f, line, reason) for f, line, reason in meta["skipped"]],
        files=list(meta["files"]),
    )
    for sid, n_calls, document, node_ids, parents, linked_by in meta["sessions"]:
        session = SessionInput(sid, document=document)
        session.node_ids = set(node_ids)
        session.links = _read_links(parents, linked_by, n_calls)
        session.calls = [_call(row, buf, top_file, values) for row in islice(rows, n_calls)]
        if len(session.calls) != n_calls:
            raise ValueError("calls.jsonl holds fewer calls than its sessions")
        result.sessions[sid] = session
    if next(rows, None) is not None:
        raise ValueError("calls.jsonl holds more calls than its sessions")
    return result


def _call(row: list, buf: np.ndarray, top_file: _TopFile, values: list) -> Call:
    (node_id, session_id, source, line, shape, model, finish_reason, harness, prompt, sampled, logprobs, top) = row[:12]
    call = Call(node_id, session_id, source, line, shape, _array(buf, prompt))
    sampled_ids = _array(buf, sampled)
    if sampled_ids is not None:
        call.sampled_ids = sampled_ids
    call.sampled_logprobs = _array(buf, logprobs)
    if top is not None:
        call.top_k = TopK.deferred(top[3], _CachedTop(top_file, top))
    call.model, call.finish_reason, call.harness = model, finish_reason, harness
    messages, tools = row[12], row[13]
    call.request_messages = None if messages is None else [values[m] for m in messages]
    call.tools = None if tools is None else values[tools]
    (
        call.token_texts,
        call.response_message,
        call.requested_params,
        call.submitted_params,
        call.timing,
        call.usage,
        call.claims,
    ) = row[14:21]
    call.issues = [Finding(*f) for f in row[21]]
    return call


# ---------------------------------------------------------------------------------------------
# The folder


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
            result = _decode(entry)
        except Exception as exc:  # noqa: BLE001 - any unreadable entry is rebuilt, whatever broke it
            if _replaced(entry, inode):
                continue
            failure = exc
        break
    if failure is not None:
        _note(
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
            _write(tmp, result, between)
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


def call_fields_covered() -> bool:
    """Every field of :class:`Call` has a place in the cache (checked by a test)."""
    return {f.name for f in fields(Call)} == set(CALL_FIELDS)


def load_files(
    files: list[Path],
    progress: Any = None,
    limits: Any = None,
    workers: int | None = None,
    use_cache: bool = True,
    folder: Path | None = None,
    background_store: bool = False,
    store_delay: float = 0.0,
    defer_store: Callable[[str, LoadResult], None] | None = None,
    leave_messages: bool = False,
) -> LoadResult:
    """These trace files, from the cache when they were read before, else parsed (on several cores where that wins)
    (:func:`rollout_graph.ingest.parallel.load_files_parallel`) and cached.

    ``background_store`` writes the new cache entry in a thread of its own, so the caller can go
    on (analyse, draw) meanwhile; the thread is not a daemon, so a process ends only once the
    entry is complete (an interrupted write leaves no entry: it is renamed into place at the end).
    With ``store_delay`` (seconds) the write starts that much later, so it does not compete with
    the caller's next steps for the CPU (the app draws its first screen meanwhile); a process that
    ends before then writes no entry. ``defer_store(key, result)``, when given, is handed the new
    entry instead and writes it (with :func:`store`) when it chooses: the app, after the first paint.
    ``leave_messages`` (a one-shot command) leaves request messages in plain files when nothing is
    cached (rollout_graph.ingest.message_prefix.leave_messages_in_file).
    """
    from rollout_graph.ingest.parallel import load_files_parallel

    key = None
    if use_cache and (folder is not None or enabled()):  # a folder given (--cache-dir) is used
        try:
            key = key_for_files(files, limits)
        except OSError:  # a file vanished or cannot be read: the loader reports it
            key = None
    if key is not None:
        cached = load(key, folder)
        if cached is not None:
            return cached
    if key is None and leave_messages:  # nothing will be cached: the messages can stay in the files
        from rollout_graph.ingest.message_prefix import leave_messages_in_file

        with leave_messages_in_file():
            result = load_files_parallel(files, progress, workers, limits)
    else:
        result = load_files_parallel(files, progress, workers, limits)
    if key is not None and defer_store is not None:
        defer_store(key, result)
    elif key is not None and background_store:
        writer = threading.Thread(target=store, args=(key, result, folder), name="rg-cache-store")
        if store_delay > 0:  # a daemon timer: waiting never holds a process that wants to end
            timer = threading.Timer(store_delay, writer.start)
            timer.daemon, timer.name = True, "rg-cache-store-timer"
            timer.start()
        else:
            writer.start()
    elif key is not None:
        store(key, result, folder)
    return result
