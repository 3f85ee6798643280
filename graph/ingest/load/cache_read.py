"""The files of one persistent cache entry -> the load they hold (:func:`read_entry`).

``arrays.bin`` is read into memory in one read (never memory-mapped: a file truncated under a
mapping kills the process) and every array is a view of that buffer, so a reopened load holds
what the cold path holds; the alternatives stay in ``top.bin``, read through a descriptor opened
now (an entry removed later stays readable; one changed in place fails its checksum and the
alternatives are empty with ``TopK.unavailable`` saying why). Every file is checked when read:
any damage raises, and ``cache.load`` removes the entry. Format: ``cache_format.py``.
"""

from __future__ import annotations

import os
import threading
import weakref
import zlib
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from rollout_graph.core.linking import MESSAGES, TOKENS, Links
from rollout_graph.core.records import Call, Finding, LoadResult, SessionInput, Skipped, TopK
from rollout_graph.ingest.load.cache_format import CHUNK, FORMAT, note


def _read_links(parents: Any, linked_by: Any, n_calls: int) -> Any:
    """The links of a session of ``n_calls`` calls from ``meta.json``, checked (a parent is an
    earlier or later call of the session, never the call itself; every link says how it was found)."""
    if type(parents) is not list or type(linked_by) is not list or len(parents) != n_calls or len(linked_by) != n_calls:
        raise ValueError("meta.json holds links of another length than the session's calls")
    for i, (parent, via) in enumerate(zip(parents, linked_by, strict=True)):
        if parent is None:
            if via is not None:
                raise ValueError("meta.json links a root")
        elif type(parent) is not int or not 0 <= parent < n_calls or parent == i or via not in (TOKENS, MESSAGES):
            raise ValueError("meta.json holds a link to no call of the session")
    return Links(parents, [TOKENS if v == TOKENS else MESSAGES if v == MESSAGES else None for v in linked_by])


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
        note("rollout-graph: the cache entry %s changed after it was read; removed", Path(self.path).parent)
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
        while chunk := f.read(CHUNK):
            seen = zlib.crc32(chunk, seen)
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()
            for line in lines:
                yield orjson.loads(line)
    if rest:
        raise ValueError(f"{path.name} ends in an unfinished line")
    if seen != crc:
        raise ValueError(f"{path.name} does not match its checksum")


def read_entry(entry: Path) -> LoadResult:
    """The load an entry's folder holds, every file checked.

    Raises:
        ValueError: a file is missing its checksum, its size or its format (damaged, another version).
        OSError: a file cannot be read.
    """
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
