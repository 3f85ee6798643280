"""The two-part read's stream: what the forked helper parsed, sent to this process through a pipe.

Entry points: :func:`send` (the helper's side), :func:`receive` (this process's) and
:func:`extents` (the part of each id arena the helper's prompts cover). Three parts: a header
naming each id arena's extent and the spans of it the prompts cover; those spans' raw bytes,
read straight into a fresh arena (no bytes object of them is made on either side); then the
events, pickled by :class:`_Packer`: each prompt that is a view of an arena as (arena, start,
length), rebuilt as a read-only view of this process's copy (what the one-process loader's
prompts are), each request-messages span as where it is, not its values. The stream is this
library's own, between a process and the helper it forked: never a trace's bytes. Used by
``two_parts.py`` only (docs/performance.md, "Two cores").
"""

from __future__ import annotations

import bisect
import functools
import io
import pickle
import struct
from typing import IO, Any

import numpy as np

from rollout_graph.ingest.shortcuts.id_arrays import new_arena
from rollout_graph.ingest.shortcuts.messages import MessagesSpan


def _received_arena(index: int) -> np.ndarray:
    """The ``index``-th arena of a helper's stream: only :class:`_Unpacker` resolves it."""
    raise pickle.UnpicklingError("an id arena of the two-part read outside the stream that carried it")


def _received_array(at: int, dtype: Any, shape: tuple[int, ...], writeable: bool) -> np.ndarray:
    """An array from a helper stream's side bytes: only :class:`_Unpacker` resolves it."""
    raise pickle.UnpicklingError("an array of the two-part read outside the stream that carried it")


def _arena_view(arena: np.ndarray, start: int, n: int) -> np.ndarray:
    view = arena[start : start + n]
    view.flags.writeable = False
    return view


class _Packer(pickle.Pickler):
    """Pickles the helper's events: each arena as its index in the stream's header, each view of
    one inside the spans that cross as (arena, start, length), each MessagesSpan as itself."""

    def __init__(self, file: IO[bytes], spans: dict[int, list[tuple[int, int]]], index: dict[int, int]) -> None:
        super().__init__(file, protocol=5)
        self._spans = spans  # id(arena) -> the merged (start, end) spans of ids that cross
        self._starts = {key: [a for a, _ in v] for key, v in spans.items()}
        self._index = index  # id(arena) -> its place in the header
        self.side: list[memoryview] = []  # small arrays' bytes, sent after the arenas' spans
        self.side_bytes = 0

    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is MessagesSpan:  # where the messages are, not their values (its own reduce)
            return MessagesSpan, (obj.file, obj.offset, obj.length, obj.count, obj.check)
        if type(obj) is not np.ndarray:
            return NotImplemented
        key = id(obj)
        if key in self._index:  # the arena itself: its spans went ahead of the pickle
            return _received_arena, (self._index[key],)
        base = obj.base
        if type(base) is not np.ndarray or obj.dtype != np.int32 or obj.ndim != 1 or obj.strides != (4,):
            return self._owned(obj)
        spans = self._spans.get(id(base))
        if spans is None:
            return self._owned(obj)
        start = (obj.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // 4
        end = start + obj.shape[0]
        i = bisect.bisect_right(self._starts[id(base)], start) - 1
        if i < 0 or start < spans[i][0] or end > spans[i][1]:
            return self._owned(obj)  # not inside a span that crosses: its own copy
        return _arena_view, (base, start, obj.shape[0])

    def _owned(self, obj: np.ndarray) -> Any:
        """A small array of numbers (sampled ids, logprobs) as its place in the side bytes,
        rebuilt as an array owning its data, as the one-process reader's are (numpy's own reduce
        leaves each a view of a bytes object of its own, kept alive by the unpickler until the
        end: a few hundred bytes more per array). Anything else: numpy's reduce."""
        if obj.dtype.hasobject or not obj.flags.c_contiguous or obj.nbytes > _OWNED_MOST:
            return NotImplemented
        at = self.side_bytes
        if obj.nbytes:
            self.side.append(obj.data.cast("B"))
            self.side_bytes += obj.nbytes
        return _received_array, (at, obj.dtype, obj.shape, obj.flags.writeable)


_OWNED_MOST = 1 << 16  # bytes; a larger array crosses as numpy pickles it


class _Unpacker(pickle.Unpickler):
    """Reads what :class:`_Packer` wrote, its arenas those the stream's header announced."""

    def __init__(self, file: IO[bytes], arenas: list[np.ndarray], side: bytearray) -> None:
        super().__init__(file)
        # What find_class hands out goes into the unpickler's memo, so it must not refer to the
        # unpickler (a cycle: the memo, every object unpickled, would wait for the collector,
        # which a command runs without)
        self._arena_at = arenas.__getitem__
        self._array_at = functools.partial(_array_in, side)

    def find_class(self, module: str, name: str) -> Any:
        if module == __name__ and name == "_received_arena":
            return self._arena_at
        if module == __name__ and name == "_received_array":
            return self._array_at
        return super().find_class(module, name)


def _array_in(side: bytearray, at: int, dtype: Any, shape: tuple[int, ...], writeable: bool) -> np.ndarray:
    """The array of ``shape`` at byte ``at`` of a helper stream's side bytes, owning its data."""
    count = int(np.prod(shape))
    if count == 0:
        array = np.empty(shape, dtype=dtype)
    else:
        array = np.frombuffer(side, dtype=dtype, count=count, offset=at).reshape(shape).copy()
    array.flags.writeable = writeable
    return array


_HEADER = struct.Struct("<Q")


def send(
    out: IO[bytes],
    value: Any,
    arenas: dict[int, np.ndarray],
    extents: dict[int, int],
    spans: dict[int, list[tuple[int, int]]],
) -> None:
    """Write ``value`` for :func:`receive`: ``arenas`` (id -> arena) cross as the ``spans`` of
    their first ``extents`` ids. The value is pickled first (the helper's CPU, while the parent
    still reads its own part), then the header, the spans' bytes and the pickle are written."""
    keys = [key for key in extents if key in arenas]
    body = io.BytesIO()
    packer = _Packer(body, {key: spans[key] for key in keys}, {key: i for i, key in enumerate(keys)})
    packer.dump(value)
    header = pickle.dumps(([(extents[key], spans[key]) for key in keys], packer.side_bytes), protocol=5)
    out.write(_HEADER.pack(len(header)))
    out.write(header)
    for key in keys:
        arena = arenas[key]
        for a, b in spans[key]:
            if b > a:
                out.write(arena[a:b].data.cast("B"))
    for piece in packer.side:
        out.write(piece)
    out.write(body.getbuffer())


def _read_into(stream: IO[bytes], view: memoryview) -> None:
    done = 0
    while done < len(view):
        n = stream.readinto(view[done:])  # type: ignore[attr-defined]
        if not n:
            raise EOFError("the helper's stream ended early")
        done += n


def receive(stream: IO[bytes]) -> Any:
    """What :func:`send` wrote: each arena rebuilt in fresh anonymous memory
    (id_arrays.new_arena: the room between the spans stays unresident, as in the helper's
    own arena), its spans read straight into it, then the value unpickled."""
    size = bytearray(_HEADER.size)
    _read_into(stream, memoryview(size))
    header = bytearray(_HEADER.unpack(size)[0])
    _read_into(stream, memoryview(header))
    arenas = []
    announced, side_bytes = pickle.loads(header)
    for extent, spans in announced:
        arena = new_arena(max(1, extent))  # registered: held_bytes counts its views once
        for a, b in spans:
            if b > a:
                _read_into(stream, arena[a:b].data.cast("B"))
        arenas.append(arena)
    side = bytearray(side_bytes)
    _read_into(stream, memoryview(side))
    return _Unpacker(stream, arenas, side).load()


def extents(
    arenas: dict[int, np.ndarray], events: list[tuple[int, str, Any]]
) -> tuple[dict[int, int], dict[int, list[tuple[int, int]]]]:
    """For each of ``arenas`` (the helper's: id -> arena), the end of the last prompt in it and
    the merged spans its prompts cover: only those ids cross. Any other view (an array of a
    document) lies outside them and crosses as a plain array."""
    covered: dict[int, list[tuple[int, int]]] = {key: [] for key in arenas}
    for _line, kind, payload in events:
        if kind != "v":
            continue
        for call in payload[0].calls:
            ids = call.prompt_ids
            base = None if ids is None else ids.base
            if base is not None and id(base) in covered and arenas[id(base)] is base and ids.shape[0]:
                start = (ids.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // 4
                covered[id(base)].append((start, start + ids.shape[0]))
    extents: dict[int, int] = {}
    spans: dict[int, list[tuple[int, int]]] = {}
    for key, intervals in covered.items():
        merged: list[tuple[int, int]] = []
        for a, b in sorted(intervals):
            if merged and a <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], b))
            else:
                merged.append((a, b))
        extents[key] = merged[-1][1] if merged else 0
        spans[key] = merged
    return extents, spans
