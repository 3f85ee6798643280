"""A load -> the files of one persistent cache entry (:func:`write_entry`).

Each call becomes a row of ``calls.jsonl``; its token arrays go to ``arrays.bin`` (a shared
arena's covered part written once, each prompt an offset into it), its alternatives to
``top.bin``, its distinct messages and tool lists to ``values.jsonl``; ``meta.json`` last, with the
others' sizes and checksums and each session's links (:func:`rollout_graph.core.linking.link`, so a
reopen does not link again). A value JSON cannot carry exactly raises :class:`NotCacheable`: the
load is then used as it is, uncached. Called by ``cache.store``; the format is
``cache_format.py``'s. docs/performance.md, "The cached reopen".
"""

from __future__ import annotations

import zlib
from bisect import bisect_right
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from rollout_graph.core.linking import link
from rollout_graph.core.records import Call, Finding, LoadResult, TopK
from rollout_graph.ingest.load.cache_format import ALIGN, CHUNK, FORMAT, JSON_FIELDS, TEXT_FIELDS, NotCacheable

BATCH_CALLS = 64  # calls encoded at a time: the writer's extra memory is one batch's rows, and a page run


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
        if len(data) < CHUNK:
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
        pad = (align_to - self.size) % ALIGN
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
        pad = (-self.size) % ALIGN
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
    row: list[Any] = [v if type(v) in _DIRECT else _json(v) for v in map(call.__getattribute__, TEXT_FIELDS)]
    row.append(eager.describe(call.prompt_ids))
    row.append(eager.describe(call.sampled_ids))
    row.append(eager.describe(call.sampled_logprobs))
    row.append(tops.describe(call.top_k))
    row.append(None if call.request_messages is None else [values.index(m) for m in call.request_messages])
    row.append(None if call.tools is None else values.index(call.tools))
    row.extend(_json(getattr(call, name)) for name in JSON_FIELDS)
    row.append(_issues(call.issues))
    try:
        return orjson.dumps(row)
    except TypeError as exc:
        raise NotCacheable(str(exc)) from None


def _links(calls: list[Call]) -> tuple[list, list]:
    """The session's links as written: each call's parent (arrival index or null) and what linked
    it, computed here from its calls (the same :func:`rollout_graph.core.linking.link` a reopen would
    run, so an entry's links are those of its calls by construction)."""
    links = link(calls)
    return links.parents, links.linked_by


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


def write_entry(folder: Path, result: LoadResult, between: Callable[[], None] | None) -> None:
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
