"""A persistent, columnar cache of parsed traces: reopening a big trace skips parsing.

One entry per load (a set of trace files read with given limits) is kept in a cache folder, never
beside the traces: ``$ROLLOUT_GRAPH_CACHE``, else ``$XDG_CACHE_HOME/rollout-graph``, else
``~/.cache/rollout-graph``. An entry is a folder holding two Arrow IPC files (``calls.arrow``: one
row per call, token arrays as raw little-endian bytes; ``messages.arrow``: each distinct request
message once, as JSON) and ``meta.json`` (the load report, the sessions with their documents).

The key hashes, for each file, its resolved path, size and modification time (uploads: a hash of
their bytes), the reading limits, :data:`FORMAT`, and the source of the reading code itself, so a
change of format or parser invalidates every entry. Entries are written to a temporary folder and
renamed into place; an entry that cannot be read (truncated, corrupt, another version) is deleted
and the trace parsed again. A load whose values JSON cannot carry exactly (NaN in a free-form
field, numpy arrays where JSON was expected) is simply not cached. When the folder grows past
``ROLLOUT_GRAPH_CACHE_MAX_BYTES`` (default 8 GB) the least recently used entries are removed.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import fields
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson

from rollout_graph.core.records import Call, Finding, LoadResult, SessionInput, Skipped, TopK


class _LazyModule:
    """A module imported when one of its names is first looked up."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        module = importlib.import_module(self._name)
        return getattr(module, attr)


if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.ipc as ipc
else:  # imported on first use: a load that never reads nor writes an entry never pays for pyarrow
    pa = _LazyModule("pyarrow")
    ipc = _LazyModule("pyarrow.ipc")


FORMAT = 1
DEFAULT_MAX_BYTES = 8 << 30
ENV_DIR = "ROLLOUT_GRAPH_CACHE"
ENV_MAX = "ROLLOUT_GRAPH_CACHE_MAX_BYTES"
# Every Call field, so a new field without a column fails loudly (a test checks) instead of
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
_JSON_FIELDS = (
    "token_texts",
    "response_message",
    "tools",
    "requested_params",
    "submitted_params",
    "timing",
    "usage",
    "claims",
)
_TEXT_FIELDS = ("node_id", "session_id", "source", "shape", "model", "finish_reason", "harness")


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
    """A hash of the reading code: a parser change must not serve results of the old parser."""
    root = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    files = sorted(root.rglob("*.py")) + [root.parent / "core" / "records.py"]
    for path in files:
        digest.update(str(path.relative_to(root.parent)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def key_for_files(files: Iterable[str | Path], limits: Any = None) -> str:
    """The cache key of a load of these files (path, size, modification and change times, inode).

    The change time (``st_ctime_ns``) moves on every write even when a rewrite restores the size
    and the modification time (``touch -r``), and a file replaced by another gets a new inode.
    """
    parts = [f"format {FORMAT}", _code_fingerprint(), f"limits {limits!r}"]
    for f in files:
        p = Path(f)
        stat = p.stat()
        parts.append(f"{p.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}\0{stat.st_ctime_ns}\0{stat.st_ino}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:40]


def key_for_bytes(named: Iterable[tuple[str, bytes]], limits: Any = None) -> str:
    """The cache key of a load of in-memory files (uploads): a hash of names and contents."""
    digest = hashlib.sha256(f"format {FORMAT}\n{_code_fingerprint()}\nlimits {limits!r}".encode())
    for name, data in named:
        digest.update(name.encode("utf-8", "surrogateescape") + b"\0" + hashlib.sha256(data).digest())
    return digest.hexdigest()[:40]


# ---------------------------------------------------------------------------------------------
# Encoding


def _json(value: Any) -> bytes | None:
    """JSON bytes that decode to exactly ``value``; NotCacheable when JSON cannot carry it."""
    if value is None:
        return None
    try:
        blob = orjson.dumps(value)
    except TypeError as exc:  # numpy arrays, non-str keys, huge ints, lone surrogates
        raise NotCacheable(str(exc)) from None
    # orjson writes NaN and infinities as null: only a blob holding a null can have lost one.
    if b"null" in blob and not _same(orjson.loads(blob), value):
        raise NotCacheable("a value JSON cannot carry exactly (NaN or infinity)")
    return blob


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _array(arr: np.ndarray | None) -> tuple[memoryview | None, str | None, list[int] | None]:
    """The array's bytes (a view: copied once, into the column), dtype and shape."""
    if arr is None:
        return None, None, None
    if arr.dtype.kind not in "iuf" or arr.dtype.byteorder == ">":
        raise NotCacheable(f"array of dtype {arr.dtype}")
    view = memoryview(np.ascontiguousarray(arr)).cast("B")  # type: ignore[arg-type]
    return view, arr.dtype.str, list(arr.shape)


def _issues(issues: list[Finding]) -> bytes:
    return orjson.dumps([[f.level, f.code, f.detail, f.node_id, f.leaf_id] for f in issues])


def _message_table(calls: list[Call]) -> tuple[list[bytes], list[list[int] | None]]:
    ids: dict[bytes, int] = {}
    per_call: list[list[int] | None] = []
    by_object: dict[int, int] = {}  # messages shared between calls (n > 1 choices) encode once
    by_flat: dict[tuple, int] = {}  # every call repeats the conversation: equal messages encode once
    for call in calls:
        if call.request_messages is None:
            per_call.append(None)
            continue
        row = []
        for message in call.request_messages:
            known = by_object.get(id(message))
            if known is None:
                flat = _flat_key(message)
                known = by_flat.get(flat) if flat is not None else None
                if known is None:
                    blob = _json(message)
                    assert blob is not None
                    known = ids.setdefault(blob, len(ids))
                    if flat is not None:
                        by_flat[flat] = known
                by_object[id(message)] = known
            row.append(known)
        per_call.append(row)
    return list(ids), per_call


_SCALARS = (str, int, float, bool, type(None))


def _flat_key(message: dict) -> tuple | None:
    """A hashable key for a message of scalar values (types included: ``1`` is not ``True``)."""
    key = []
    for k, v in message.items():
        if type(v) not in _SCALARS or (type(v) is float and v != v):
            return None
        key.append((k, type(v), v))
    return tuple(key)


def _column(values: list, type_: pa.DataType) -> pa.Array:
    """An Arrow column; binary ones from one joined buffer (far faster than item by item)."""
    if type_ != pa.large_binary():
        return pa.array(values, type=type_)
    valid = np.array([v is not None for v in values], dtype=bool)
    lengths = np.array([0 if v is None else len(v) for v in values], dtype=np.int64)
    offsets = np.zeros(len(values) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = b"".join(v for v in values if v is not None)
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little").tobytes())
    return pa.LargeBinaryArray.from_buffers(
        type_, len(values), [bitmap, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data)], int((~valid).sum())
    )


_ARRAYS = ("prompt", "sampled", "logprobs", "top_ids", "top_logprobs")
BATCH_CALLS = 256  # calls encoded at a time: the encoder's extra memory is one batch's arrays


def _schema() -> pa.Schema:
    types: dict[str, pa.DataType] = {name: pa.string() for name in _TEXT_FIELDS}
    types.update({name: pa.large_binary() for name in _JSON_FIELDS})
    types.update({"line": pa.int64(), "issues": pa.large_binary(), "messages": pa.list_(pa.int32())})
    for kind in _ARRAYS:
        types[f"{kind}_bytes"] = pa.large_binary()
        types[f"{kind}_dtype"] = pa.string()
        types[f"{kind}_shape"] = pa.list_(pa.int64())
    types["top_texts"] = pa.large_binary()
    return pa.schema(list(types.items()))


def _calls_table(calls: list[Call], message_rows: list[list[int] | None], schema: pa.Schema) -> pa.Table:
    columns: dict[str, list] = {name: [] for name in schema.names}
    for call, row in zip(calls, message_rows, strict=True):
        for name in _TEXT_FIELDS:
            columns[name].append(getattr(call, name))
        for name in _JSON_FIELDS:
            columns[name].append(_json(getattr(call, name)))
        columns["line"].append(call.line)
        columns["issues"].append(_issues(call.issues))
        columns["messages"].append(row)
        top = call.top_k
        arrays = {
            "prompt": call.prompt_ids,
            "sampled": call.sampled_ids,
            "logprobs": call.sampled_logprobs,
            "top_ids": None if top is None else top.ids,
            "top_logprobs": None if top is None else top.logprobs,
        }
        for kind, arr in arrays.items():
            data, dtype, shape = _array(arr)
            columns[f"{kind}_bytes"].append(data)
            columns[f"{kind}_dtype"].append(dtype)
            columns[f"{kind}_shape"].append(shape)
        columns["top_texts"].append(None if top is None else _json(top.texts))
    try:
        return pa.Table.from_arrays([_column(columns[f.name], f.type) for f in schema], schema=schema)
    except (pa.ArrowException, UnicodeEncodeError) as exc:
        raise NotCacheable(str(exc)) from None


def encode(result: LoadResult) -> tuple[pa.Schema, Iterator[pa.Table], pa.Table, bytes]:
    """The load as Arrow tables and metadata: the calls' schema, their tables (built one batch
    at a time as the iterator is consumed), the messages table and the metadata JSON.

    Raises:
        NotCacheable: a value JSON or Arrow cannot carry exactly (also while iterating).
    """
    calls = [c for s in result.sessions.values() for c in s.calls]
    messages, per_call = _message_table(calls)
    message_table = pa.table({"json": pa.array(messages, type=pa.large_binary())})
    meta = {
        "format": FORMAT,
        "records": result.records,
        "loaded": result.loaded,
        "skipped": [[s.file, s.line, s.reason] for s in result.skipped],
        "files": result.files,
        "sessions": [[sid, len(s.calls), _json(s.document), sorted(s.node_ids)] for sid, s in result.sessions.items()],
    }
    try:
        meta_blob = orjson.dumps(meta, default=lambda b: b.decode() if isinstance(b, bytes) else None)
    except TypeError as exc:
        raise NotCacheable(str(exc)) from None
    schema = _schema()

    def tables() -> Iterator[pa.Table]:
        for i in range(0, len(calls), BATCH_CALLS):
            yield _calls_table(calls[i : i + BATCH_CALLS], per_call[i : i + BATCH_CALLS], schema)

    return schema, tables(), message_table, meta_blob


# ---------------------------------------------------------------------------------------------
# Decoding


def _np(data: Any, dtype: str | None, shape: list[int] | None) -> np.ndarray | None:
    if data is None or dtype is None or shape is None:
        return None
    return np.frombuffer(data, dtype=np.dtype(dtype)).reshape(shape).copy()


def _loads(blob: bytes | None) -> Any:
    return None if blob is None else orjson.loads(blob)


def _binary_views(column: pa.Array) -> list[np.ndarray | None]:
    """Each row of a binary column as a view into the column's data (no copy per row)."""
    _, offsets_buf, data_buf = column.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int64)[column.offset : column.offset + len(column) + 1]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.empty(0, dtype=np.uint8)
    valid = column.is_valid().to_numpy(zero_copy_only=False)
    bounds = offsets.tolist()
    return [data[bounds[i] : bounds[i + 1]] if valid[i] else None for i in range(len(column))]


def _rows(batches: Iterable[pa.RecordBatch], messages: list[dict]) -> Iterator[Call]:
    """The calls of each batch in order; a batch's columns are dropped once its calls are built."""
    for batch in batches:
        cols: dict[str, list] = {}
        for name in batch.schema.names:
            column = batch.column(name)
            cols[name] = _binary_views(column) if name.endswith("_bytes") else column.to_pylist()
        for i in range(batch.num_rows):
            yield _call(cols, i, messages)


def decode(batches: Iterable[pa.RecordBatch], message_table: pa.Table, meta_blob: bytes) -> LoadResult:
    """The LoadResult that :func:`encode` was given (batches: the calls tables' record batches)."""
    meta = orjson.loads(meta_blob)
    if meta.get("format") != FORMAT:
        raise ValueError(f"cache format {meta.get('format')} is not {FORMAT}")
    messages = [orjson.loads(m) for m in message_table.column("json").to_pylist()]
    result = LoadResult(
        records=meta["records"],
        loaded=meta["loaded"],
        skipped=[Skipped(f, line, reason) for f, line, reason in meta["skipped"]],
        files=list(meta["files"]),
    )
    calls = _rows(batches, messages)
    for sid, n_calls, document, node_ids in meta["sessions"]:
        session = SessionInput(sid, document=None if document is None else orjson.loads(document))
        session.node_ids = set(node_ids)
        session.calls = [next(calls) for _ in range(n_calls)]
        result.sessions[sid] = session
    if next(calls, None) is not None:
        raise ValueError("cache entry: session sizes do not match the calls table")
    return result


def _call(cols: dict[str, list], i: int, messages: list[dict]) -> Call:
    def arr(kind: str) -> np.ndarray | None:
        return _np(cols[f"{kind}_bytes"][i], cols[f"{kind}_dtype"][i], cols[f"{kind}_shape"][i])

    call = Call(
        node_id=cols["node_id"][i],
        session_id=cols["session_id"][i],
        source=cols["source"][i],
        line=cols["line"][i],
        shape=cols["shape"][i],
    )
    call.prompt_ids = arr("prompt")
    sampled = arr("sampled")
    if sampled is not None:
        call.sampled_ids = sampled
    call.sampled_logprobs = arr("logprobs")
    top_ids = arr("top_ids")
    if top_ids is not None:
        top_lps = arr("top_logprobs")
        assert top_lps is not None
        call.top_k = TopK(top_ids, top_lps, _loads(cols["top_texts"][i]))
    for name in ("model", "finish_reason", "harness"):
        setattr(call, name, cols[name][i])
    for name in _JSON_FIELDS:
        value = _loads(cols[name][i])
        if value is not None or name not in ("requested_params", "timing", "claims"):
            setattr(call, name, value)
    rows = cols["messages"][i]
    call.request_messages = None if rows is None else [dict(messages[m]) for m in rows]
    call.issues = [Finding(*f) for f in orjson.loads(cols["issues"][i])]
    return call


# ---------------------------------------------------------------------------------------------
# The folder


def _entry(key: str, folder: Path | None = None) -> Path:
    return (folder or cache_dir()) / f"v{FORMAT}-{key}"


def load(key: str, folder: Path | None = None) -> LoadResult | None:
    """The cached load under ``key``, or None (missing; a corrupt entry is removed)."""
    entry = _entry(key, folder)
    if not entry.is_dir():
        return None
    try:
        # Read into memory, not mapped: a file changed under a mapping could kill the process.
        with pa.OSFile(str(entry / "messages.arrow")) as source:
            message_table = ipc.open_file(source).read_all()
        with pa.OSFile(str(entry / "calls.arrow")) as source:
            reader = ipc.open_file(source)
            batches = (reader.get_batch(i) for i in range(reader.num_record_batches))
            result = decode(batches, message_table, (entry / "meta.json").read_bytes())
    except Exception:  # noqa: BLE001 - any unreadable entry is rebuilt, whatever broke it
        shutil.rmtree(entry, ignore_errors=True)
        return None
    os.utime(entry)  # recently used
    return result


def store(key: str, result: LoadResult, folder: Path | None = None, between: Callable[[], None] | None = None) -> bool:
    """Write the load under ``key``; False when it cannot be cached (values or disk). ``between``
    is called before each batch of calls is encoded (a server pauses the write there while a page
    runs)."""
    root = folder or cache_dir()
    entry = _entry(key, root)
    try:
        schema, tables, message_table, meta = encode(result)
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".writing-", dir=root))
        try:
            with pa.OSFile(str(tmp / "calls.arrow"), "wb") as sink, ipc.new_file(sink, schema) as writer:
                for table in tables:
                    writer.write_table(table)
                    if between is not None:
                        between()
            with pa.OSFile(str(tmp / "messages.arrow"), "wb") as sink, ipc.new_file(sink, message_table.schema) as w:
                w.write_table(message_table, max_chunksize=4096)
            (tmp / "meta.json").write_bytes(meta)
            if entry.exists():
                shutil.rmtree(entry, ignore_errors=True)
            tmp.rename(entry)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    except (NotCacheable, OSError):
        return False
    except Exception:  # noqa: BLE001 - a cache must never break a load, whatever went wrong
        return False
    _evict(root)
    return True


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.iterdir() if f.is_file())


def _evict(root: Path) -> None:
    """Remove the least recently used entries while the folder is over its size bound."""
    try:
        entries = [(e.stat().st_mtime, e) for e in root.iterdir() if e.is_dir() and not e.name.startswith(".")]
        stale = [e for e in root.iterdir() if e.name.startswith(".writing-") and time.time() - e.stat().st_mtime > 3600]
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
    if use_cache and enabled():
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
