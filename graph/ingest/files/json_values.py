"""One JSON text -> a value (:func:`parse_json`), and :class:`RawValue`: a value or why not.

:func:`parse_json` is orjson first, the standard library as a fallback (NaN and Infinity, numbers
beyond 64 bits, lone surrogates made U+FFFD), with the nesting depth bounded before the
recursive parser sees a line (:func:`nesting`: a linear scan outside strings). :class:`RawValue`
is what every reader above yields per line, row or item. Bottom of ingest: the values layer
parses cut lines with it, the shortcuts read spans back with it. docs/formats.md, docs/limits.md.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from rollout_graph.ingest.limits import LimitExceeded

ORJSON_DEPTH = 1024  # orjson refuses deeper documents whatever the limit says


@dataclass(frozen=True, slots=True)
class RawValue:
    """One parsed JSON value, or the reason it could not be parsed.

    ``pending`` marks the last line of a file that has no newline yet and does not parse: a file
    still being written, reported apart from bad records.
    """

    line: int
    value: Any = None
    error: str | None = None
    pending: bool = False
    notes: tuple[str, ...] = ()  # what the value holds that a reader warns about (a repeated metadata id)


def reason(exc: BaseException, limit: int = 160) -> str:
    """An exception's first line, cut to ``limit`` characters: a skip reason's tail."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def depth(raw: bytes) -> int:
    """Deepest bracket nesting outside strings: linear time, bounded memory, no regex."""
    return nesting(raw, ())[0]


def nesting(raw: bytes, probes: tuple[int, ...] | list[int]) -> tuple[int, list[tuple[int, bool]]]:
    """The deepest nesting outside strings, and for each probe position (ascending) the nesting
    depth there and whether a real quote opening a string stands there.

    Only lines the stdlib must parse (or rare checks) come here. The line is scanned in blocks
    with numpy; the state carried from one block to the next is three numbers (the depth, whether
    a string is open, how many backslashes end the block), so temporaries stay a small multiple of
    the block size whatever the line's length. A quote opens or closes a string unless an odd run
    of backslashes precedes it.
    """
    deep = deepest = 0
    in_string = 0  # 1 while a string is open at the block boundary
    trailing = 0  # backslashes that end the previous block
    block = 1 << 20
    at_probe: list[tuple[int, bool]] = []
    wanted = np.asarray(probes, dtype=np.int64)
    next_probe = 0
    for at in range(0, len(raw), block):
        arr = np.frombuffer(raw, dtype=np.uint8, count=min(block, len(raw) - at), offset=at)
        n = arr.shape[0]
        backslash = arr == 0x5C
        positions = np.arange(n, dtype=np.int64)
        # Index of the last non-backslash byte at or before each position (-1 - trailing before it).
        last_plain = np.where(backslash, np.int64(-1 - trailing), positions)
        np.maximum.accumulate(last_plain, out=last_plain)
        run_before = np.empty(n, dtype=np.int64)  # backslashes right before each byte
        run_before[0] = trailing
        run_before[1:] = positions[:-1] - last_plain[:-1]
        quote = (arr == 0x22) & (run_before % 2 == 0)
        opened = (np.cumsum(quote, dtype=np.int64) + in_string) % 2  # odd: inside a string
        outside = opened == 0
        opens = ((arr == 0x5B) | (arr == 0x7B)) & outside
        closes = ((arr == 0x5D) | (arr == 0x7D)) & outside
        running = np.cumsum(opens.astype(np.int64) - closes, dtype=np.int64) + deep
        deepest = max(deepest, int(running.max()))
        upto = int(np.searchsorted(wanted, at + n, side="left"))
        if upto > next_probe:
            k = wanted[next_probe:upto] - at
            at_probe += zip(running[k].tolist(), (quote[k] & (opened[k] == 1)).tolist(), strict=True)
            next_probe = upto
        deep = int(running[-1])
        in_string = int(opened[-1])
        trailing = int(n - 1 - last_plain[-1]) if backslash[-1] else 0
    return deepest, at_probe


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE_BYTES = re.compile(rb"\xed[\xa0-\xbf]")  # a surrogate written as raw UTF-8 (CESU-8)


def _clean_surrogates(value: Any) -> Any:
    """Lone UTF-16 surrogates (valid JSON escapes, invalid text) become U+FFFD."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, dict):
        return {_clean_surrogates(k): _clean_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean_surrogates(v) for v in value]
    return value


def parse_json(raw: bytes, max_depth: int | None = None) -> Any:
    """orjson first (fast); the stdlib as a fallback for NaN/Infinity, big numbers and surrogates.

    Raises:
        ValueError: not JSON, or nested deeper than ``max_depth`` (LimitExceeded).
    """
    limit = ORJSON_DEPTH if max_depth is None else min(max_depth, ORJSON_DEPTH)
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if "depth" in str(exc) or "recursion" in str(exc).lower():
            raise LimitExceeded(f"JSON nested deeper than {ORJSON_DEPTH} levels") from None
        if depth(raw) > limit:
            raise LimitExceeded(f"JSON nested deeper than {limit} levels (limit max_depth, --max-depth)") from None
        try:
            value = json.loads(raw)
        except RecursionError:
            raise LimitExceeded(f"JSON nested too deep (limit max_depth {limit})") from None
        # The stdlib decodes bytes with surrogatepass: raw surrogate bytes (ED A0 80 ...) and
        # \\ud800 escapes both become lone surrogates, which no encoder downstream accepts.
        dirty = _SURROGATE_ESCAPE.search(raw) or _SURROGATE_BYTES.search(raw)
        return _clean_surrogates(value) if dirty else value
