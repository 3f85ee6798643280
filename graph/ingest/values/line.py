"""One raw JSONL line -> one JSON value (:func:`parse_line`), never an exception.

How: every shortcut's span is found on the original line (the prompt-id arrays, the chat logprob
content arrays, the request's ``messages`` array: ``shortcuts/``), all are cut in one pass (each
replaced by its marker, ``shortcuts/markers.py``), the shortened line is parsed (orjson; the
validating :func:`~rollout_graph.ingest.files.json_values.parse_json` when the messages cut does
not hold) and the cut values are put back. A content array found by its bytes that the parsed
record does not confirm sends the line through once more, skimmed. A line naming its session or
call twice is refused (an escaped key too); an id its ``metadata`` names twice is a note. Called by ``values/read.py`` (every line of a file), the two-part read's
helper and the live follower; above ``shortcuts/`` and ``files/``. docs/performance.md, "The cold
path"; docs/formats.md for the rules.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

from rollout_graph.core.records import short
from rollout_graph.ingest import speedups
from rollout_graph.ingest.files.json_values import RawValue, nesting, parse_json, reason
from rollout_graph.ingest.files.sources import FileRef
from rollout_graph.ingest.limits import LimitExceeded, Limits
from rollout_graph.ingest.shortcuts.id_arrays import IdArrayCutter
from rollout_graph.ingest.shortcuts.logprob_entries import LogprobColumns, columns_for
from rollout_graph.ingest.shortcuts.logprob_spans import holds_alternatives, located_span, placed, skimmed_spans
from rollout_graph.ingest.shortcuts.markers import BYTES, MESSAGES, SKIM, as_json, marker, restore
from rollout_graph.ingest.shortcuts.messages import KnownSpan, MessageCutter

MESSAGES_MARKER = marker(MESSAGES)
Cut = tuple[int, int, str, Any]  # raw[start:end] (an array with its brackets) becomes the marker; its value


def parse_line(
    line: int,
    raw: bytes,
    cutter: IdArrayCutter,
    limits: Limits | None = None,
    file: FileRef | None = None,
    offset: int = -1,
    messages: MessageCutter | None = None,
) -> RawValue:
    """One JSONL line -> a value, or an error value naming why it is not one. Never raises.

    ``cutter`` (one per file read in order) remembers recent prompt-id arrays. With ``file`` (the
    plain file on disk the line is read from) and ``offset`` (where the line starts in it), chat
    logprob alternatives are left in the file until read. With ``messages`` (one per file read in
    order) a ``messages`` array whose start was seen in a recent line reuses those values.
    """
    limits = limits or Limits()
    try:
        at = offset if offset >= 0 else None
        known = None if messages is None else messages.known
        cuts, located = _find_cuts(raw, cutter, limits.max_ids, file, at, known, locate=True)
        value, parsed = _parse_cut(raw, cuts, limits, messages, file, at)
        if located is not None and not placed(value, [located]):  # found by its bytes, not confirmed
            cuts, _ = _find_cuts(raw, cutter, limits.max_ids, file, at, known, locate=False)
            value, parsed = _parse_cut(raw, cuts, limits, messages, file, at)
        # The cut messages array is a nested value: the top-level keys are those of ``parsed``.
        duplicate, notes = _identity_problems(parsed) if isinstance(value, dict) else (None, ())
        if duplicate is not None:
            return RawValue(line, error=f"duplicate key {duplicate!r} in one object: which value counts is ambiguous")
        if notes:
            return RawValue(line, value, notes=notes)
    except LimitExceeded as exc:
        return RawValue(line, error=f"over a limit: {reason(exc)}")
    except (ValueError, UnicodeDecodeError, OverflowError) as exc:
        return RawValue(line, error=f"not JSON: {reason(exc)}")
    except (RecursionError, MemoryError) as exc:
        return RawValue(line, error=f"cannot parse: {type(exc).__name__}")
    return RawValue(line, value)


def cut_line(
    raw: bytes,
    cutter: IdArrayCutter,
    max_ids: int | None = None,
    file: FileRef | None = None,
    offset: int | None = None,
    locate: bool = True,
    known: Any = None,
) -> tuple[bytes, dict[str, Any]]:
    """The line with every shortcut's span but the messages array cut (each replaced by its marker
    as a JSON string), and what each marker stands for: what :func:`parse_line` parses when the
    messages shortcut does not hold (its ``locate`` and ``known`` as there).

    Raises:
        LimitExceeded: an id array holds more than ``max_ids`` ids.
    """
    cuts, _ = _find_cuts(raw, cutter, max_ids, file, offset, known, locate)
    return (_joined(raw, cuts) if cuts else raw), {name: value for _, _, name, value in cuts}


def _find_cuts(
    raw: bytes,
    cutter: IdArrayCutter,
    max_ids: int | None,
    file: FileRef | None,
    at: int | None,
    known: Any,
    locate: bool,
) -> tuple[list[Cut], LogprobColumns | None]:
    """Every span of the original line the shortcuts cut but the messages array, in order, and
    the content array found by its bytes when there is one (the parsed record must confirm it).

    ``locate``: a one-choice content array is first looked for by its bytes (then only the id
    arrays around it are looked for); without it, or when that finds none it can read, the id
    arrays are found first and the content arrays by the skim. ``known``: the messages cutter's
    remembered span, which the id and content searches pass over.
    """
    span_of = None if known is None else KnownSpan(known)
    ask = None if span_of is None else span_of.ask
    if locate:
        span = located_span(raw, None if span_of is None else lambda: span_of.near_start(raw))
        if span is not None:
            start, end = span
            columns = columns_for(raw[start:end], file, None if at is None else at + start, located=True)
            if columns is not None:
                before = cutter.spans(raw, 0, start, ask, max_ids, before=start)
                after = cutter.spans(raw, end, len(raw), ask, max_ids)
                # numbered as the arrays met: those before 1.., the content array 0, those after on
                cuts: list[Cut] = [(a, b, marker(BYTES, i + 1), ids) for i, (a, b, ids) in enumerate(before)]
                cuts.append((start, end, marker(BYTES, 0), columns))
                first = len(before) + 2
                cuts += [(a, b, marker(BYTES, first + j), ids) for j, (a, b, ids) in enumerate(after)]
                return cuts, columns
    cuts = [(a, b, marker(BYTES, i), ids) for i, (a, b, ids) in enumerate(cutter.spans(raw, 0, None, ask, max_ids))]
    if not holds_alternatives(raw, cuts, None if span_of is None else span_of.span):
        return cuts, None
    content: list[Cut] = []
    for start, end in skimmed_spans(raw):
        columns = columns_for(raw[start:end], file, None if at is None else at + start, located=False)
        if columns is not None:
            content.append((start, end, marker(SKIM, len(content)), columns))
    return (_merged(cuts, content) if content else cuts), None


def _merged(ids: list[Cut], content: list[Cut]) -> list[Cut]:
    """Both lists of cuts in order; an id array inside a content array goes with it."""
    kept = [cut for cut in ids if not any(a <= cut[0] and cut[1] <= b for a, b, _, _ in content)]
    return sorted(kept + content, key=lambda cut: cut[0])


def _joined(raw: bytes, cuts: list[Cut]) -> bytes:
    """The line with each cut replaced by its marker (as a JSON string): one copy of the line."""
    view = memoryview(raw)  # pieces of the line as views: the join is their one copy
    pieces: list[bytes | memoryview] = []
    pos = 0
    for a, b, name, _ in cuts:
        pieces += [view[pos:a], as_json(name)]
        pos = b
    pieces.append(view[pos:])
    return b"".join(pieces)


def _parse_cut(
    raw: bytes,
    cuts: list[Cut],
    limits: Limits,
    messages: MessageCutter | None,
    file: FileRef | None,
    at: int | None,
) -> tuple[Any, bytes]:
    """The value of the line with ``cuts`` (and its ``messages`` array, when that shortcut holds)
    cut, and the bytes it was parsed from. When the shortened line does not parse, the line with
    ``cuts`` alone is parsed the validating way (its error is that path's)."""
    arrays = {name: value for _, _, name, value in cuts}
    if messages is not None:
        found = messages.cut(raw, cuts, file, at)
        if found is not None:
            start, end, items = found
            at_cut = next((i for i, cut in enumerate(cuts) if cut[0] > start), len(cuts))
            with_messages = [*cuts[:at_cut], (start, end, MESSAGES_MARKER, items), *cuts[at_cut:]]
            short = _joined(raw, with_messages)
            try:
                value = orjson.loads(short)
            except orjson.JSONDecodeError:
                del items, short  # the whole line, the validating way (its error is that path's)
            else:
                messages.keep()
                restore(value, {**arrays, MESSAGES_MARKER: items})
                return value, short
    cut = _joined(raw, cuts) if cuts else raw
    value = parse_json(cut, limits.max_depth)
    if arrays:
        restore(value, arrays)
    return value, cut


_IDENTITY_KEYS = (b'"session_id"', b'"call_id"', b'"node_id"')  # top-level keys that place a record
_IDENTITY_NAMES = ("session_id", "call_id", "node_id")
_KEY_AFTER = re.compile(rb"[ \t\r\n]*:")
# Every quote that starts an identity key, overlapping ones included (the match takes the quote
# only): the line's identity-key occurrences, in order, in one scan by the regex engine.
_IDENTITY_KEY_AT = re.compile(rb'"(?=(session_id|call_id|node_id)")')
# An escaped "_" or lower-case letter: the only escapes that can spell an identity key another way
# ("session_\u0069d"). JSON writers never escape them, so a line holding one is parsed once more.
_ESCAPED_KEY_CHAR = re.compile(rb"\\u00(?:5[fF]|[67][0-9a-fA-F])")


def _duplicate_identity_key(raw: bytes) -> str | None:
    """A top-level key placing the record (session or call id) that the object holds twice."""
    return _identity_problems(raw)[0]


def _identity_problems(raw: bytes) -> tuple[str | None, tuple[str, ...]]:
    """A top-level key placing the record (session or call id) that the object holds twice, and
    the notes on an id its ``metadata`` object holds twice (which the readers may take from there).

    JSON parsers keep the last silently, which would move the record to another session. The
    bytes are searched first (in C where built: ``_speedups.identity_repeats``); only a line where
    such a key occurs twice is scanned for where each occurrence is (inside a string, nested, or a
    key of the top-level object). A line holding an escaped key character, or an id twice one
    level down beside a ``metadata`` key, is parsed once more keeping every key
    (:func:`_exact_identity_problems`).
    """
    if _ESCAPED_KEY_CHAR.search(raw) is not None:
        return _exact_identity_problems(raw)
    native = speedups.native
    if native is not None and type(raw) is bytes:
        if not native.identity_repeats(raw):
            return None, ()
    else:
        found = _IDENTITY_KEY_AT.findall(raw)
        if len(found) < 2 or len(set(found)) == len(found):
            return None, ()
    nested = False  # an id twice one level down: perhaps twice in the metadata object
    for key in _IDENTITY_KEYS:
        if raw.count(key) < 2:
            continue
        spots = []
        at = raw.find(key)
        while at >= 0:
            if _KEY_AFTER.match(raw, at + len(key)):
                spots.append(at)
            at = raw.find(key, at + 1)
        if len(spots) < 2:
            continue
        depths = [depth for depth, opens in nesting(raw, spots)[1] if opens]
        if depths.count(1) > 1:
            return key.decode().strip('"'), ()
        nested = nested or depths.count(2) > 1
    if nested and b'"metadata"' in raw:
        return _exact_identity_problems(raw)
    return None, ()


def _exact_identity_problems(raw: bytes) -> tuple[str | None, tuple[str, ...]]:
    """:func:`_identity_problems` read from the value itself: the line parsed with every object's
    keys kept in order (escapes decoded), for the rare lines the byte search cannot decide."""
    twice: dict[int, dict[str, Any]] = {}  # id(object) -> its identity keys given twice, last values

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) < len(pairs):
            names = [k for k, _ in pairs if k in _IDENTITY_NAMES]
            repeated = {k: obj[k] for k in names if names.count(k) > 1}
            if repeated:
                twice[id(obj)] = repeated
        return obj

    try:  # the line parsed already: only a deeper nesting than the stdlib's could refuse it
        value = json.loads(raw, object_pairs_hook=pairs_hook)
    except (ValueError, RecursionError):
        return None, ()
    if not isinstance(value, dict):
        return None, ()
    top = twice.get(id(value), {})
    for name in _IDENTITY_NAMES:
        if name in top:
            return name, ()
    meta = value.get("metadata")
    repeated = twice.get(id(meta), {}) if isinstance(meta, dict) else {}
    return None, tuple(
        f"metadata.{name} given twice; the last, {short(repeated[name], 80)}, is used"
        for name in _IDENTITY_NAMES
        if name in repeated
    )
