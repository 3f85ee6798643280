"""The child process that runs one search's regular expression (graph/analysis/patterns.py).

Started as ``python -I -S _pattern_child.py`` (isolated, no site packages: only the standard
library is imported, so it starts in a few tens of milliseconds). It caps itself first (address
space and CPU time, from its header), dies with the thread that started it, then reads:

- a header: 4-byte little-endian length, then JSON ``{"pattern", "flags", "mode", "memory_bytes",
  "cpu_seconds", "parent"}``;
- texts until end of input: 4-byte little-endian length, then the text as UTF-8 (``surrogatepass``).

and writes, once its input has ended, one little-endian int64 array: ``mode`` ``scan`` gives
``start, end, count`` per text (``-1, -1, 0`` for no match), ``spans`` gives ``n`` then ``n``
``start, end`` pairs per text, ``empty`` gives ``1`` when the pattern matches the empty string.
Offsets are in characters. Exit code 0 when done, :data:`OUT_OF_MEMORY` on a MemoryError.
Nothing here trusts its input beyond the pattern: it is compiled with ``re`` and only matched.
"""

import json
import os
import re
import sys
from array import array

OUT_OF_MEMORY = 3
BAD_PATTERN = 4


def _cap(header: dict) -> None:
    try:
        import resource
    except ImportError:  # not POSIX: the parent's wall-clock deadline still holds
        return
    memory = header.get("memory_bytes")
    if memory:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    cpu = header.get("cpu_seconds")
    if cpu:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 2))


def _die_with_parent(parent: int) -> None:
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - not Linux: the CPU limit still ends it
        pass
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def _read_exact(stream, n: int) -> bytes | None:
    data = stream.read(n)
    if not data:
        return None
    while len(data) < n:
        more = stream.read(n - len(data))
        if not more:
            raise EOFError("the input ended inside a frame")
        data += more
    return data


def _frames(stream):
    while True:
        head = _read_exact(stream, 4)
        if head is None:
            return
        yield _read_exact(stream, int.from_bytes(head, "little")) or b""


def main() -> int:
    """Read the header and the texts, match, write the answers."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    head = _read_exact(stdin, 4)
    if head is None:
        return BAD_PATTERN
    header = json.loads(_read_exact(stdin, int.from_bytes(head, "little")) or b"{}")
    _cap(header)
    if header.get("parent"):
        _die_with_parent(int(header["parent"]))
    try:
        pattern = re.compile(header["pattern"], int(header.get("flags", 0)))
    except (re.error, RecursionError, OverflowError, ValueError) as exc:
        sys.stderr.write(f"{exc}\n")
        return BAD_PATTERN
    mode = header.get("mode", "scan")
    out = array("q")
    try:
        if mode == "empty":
            out.append(1 if pattern.search("") is not None else 0)
        for frame in _frames(stdin):
            text = frame.decode("utf-8", "surrogatepass")
            del frame
            if mode == "spans":
                spans = [m.span() for m in pattern.finditer(text)]
                out.append(len(spans))
                for start, end in spans:
                    out.extend((start, end))
                continue
            found = pattern.search(text)
            if found is None:
                out.extend((-1, -1, 0))
                continue
            # counted from the start again: a pattern can match empty (a lookbehind) where a count
            # resumed at the first match's end would meet that match's end again
            out.extend((found.start(), found.end(), sum(1 for _ in pattern.finditer(text))))
    except MemoryError:
        out = array("q")
        return OUT_OF_MEMORY
    if sys.byteorder != "little":
        out.byteswap()
    stdout.write(out.tobytes())
    stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
