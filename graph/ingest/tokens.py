"""Token fields of a record -> validated numpy arrays: ids, logprobs, top-k alternatives, texts.

Entry points: :func:`token_ids`, :func:`logprobs`, :func:`top_k`, :func:`split_tokens` (a choice's
``token_id:N`` texts or plain texts), :func:`joined_tokens` / :func:`token_id_list` and
:class:`Problems` (the finding-ready messages a record's conversion collects). Validation never
drops a position: an invalid id becomes -1 and an invalid logprob NaN, so spans keep their lengths
and the graph its shape, while the problem is reported as a finding. A leaf of ingest: the format
readers and the logprob shortcut use it (docs/architecture.md, "Ingest: one way").
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from rollout_graph.core.records import TopK
from rollout_graph.ingest import limits, speedups
from rollout_graph.ingest.speedups import native

INVALID_ID = -1
_INT32_MAX = np.iinfo(np.int32).max
# The reductions themselves: ``arr.max()`` goes through a Python wrapper first (about 0.5 us a
# call). Along the first axis only: for the 1-D arrays built here from lists.
_MAX, _MIN = np.maximum.reduce, np.minimum.reduce
_TOKEN_ID_TEXT = re.compile(r"token_id:(-?\d+)\Z")


@dataclass(slots=True)
class Problems:
    """Finding-ready messages collected while converting one record."""

    invalid_ids: list[str] = field(default_factory=list)
    invalid_logprobs: list[str] = field(default_factory=list)
    positive_logprobs: list[str] = field(default_factory=list)
    malformed: list[str] = field(default_factory=list)


def _describe(values: list, bad: list[int], what: str) -> str:
    first = bad[0]
    more = f" ({len(bad)} positions)" if len(bad) > 1 else ""
    value = values[first]
    big = type(value) is int or (type(value) is float and math.isfinite(value))
    if big and abs(value) >= _MAX_ID:
        # orjson (3.13 and later) reads an integer beyond 64 bits as a float, the typed decoder as
        # an int: one wording for both, whichever parser read the line (Decimal formats either)
        from decimal import Decimal  # only for this rare message (docs/performance.md)

        text = f"{Decimal(value):.4g} (a number beyond 64 bits)"
    else:
        text = repr(value)
    text = text if len(text) <= 60 else f"{text[:40]}… ({len(text)} characters)"
    return f"{what}[{first}] = {text}{more}"


_MAX_ID = 2**63
# A list of exact ints from 0 to 2**31 - 1 as int32 in one C pass (what the type scan and
# np.array below give it), else None; tests/ingest/test_speedups_ids.py holds it to them.
_NATIVE_INT32 = None if native is None else native.int32_ids  # (speedups.FUNCTIONS has it)


def _valid_id(value) -> bool:
    return type(value) is int and 0 <= value < _MAX_ID


def token_ids(value, what: str, problems: Problems) -> np.ndarray | None:
    """Convert a JSON list of token ids; ``None`` when the field is absent or not a list."""
    if value is None:
        return None
    if isinstance(value, np.ndarray):  # already parsed and checked (ids from token_id:N text)
        return _narrow(value)
    if not isinstance(value, list):
        problems.malformed.append(f"{what} is a {type(value).__name__}, not a list")
        return None
    if not value:
        return np.empty(0, dtype=np.int32)
    max_ids = limits.active().max_ids
    if len(value) > max_ids:
        raise limits.LimitExceeded(f"{what} holds {len(value):,} ids (limit max_ids {max_ids:,}, --max-ids)")
    if _NATIVE_INT32 is not None:
        buffer = _NATIVE_INT32(value)
        if buffer is not None:
            return np.frombuffer(buffer, dtype=np.int32)
    if set(map(type, value)) != {int}:
        if any(isinstance(v, (list, dict)) for v in value):
            problems.malformed.append(f"{what} is not a flat list of ids (it nests lists or objects); ignored")
            return None
        arr = np.empty(0, dtype=object)
    else:
        try:  # int32 at once when every id fits (numpy refuses an int beyond it: then int64)
            arr = np.array(value, dtype=np.int32)
            if int(_MIN(arr)) >= 0:
                return arr
        except OverflowError:
            pass
        try:
            arr = np.array(value, dtype=np.int64)
        except OverflowError:  # an id beyond 64 bits
            arr = np.empty(0, dtype=object)
    # numpy reads JSON true/false as 1/0 without a word: look at the types of those positions.
    clean = arr.dtype.kind == "i" and arr.ndim == 1
    if clean and int(_MIN(arr)) >= 0:
        return _narrow(arr)
    # Slow path: mixed types, negatives, bools or ids beyond int64.
    bad = [i for i, v in enumerate(value) if not _valid_id(v)]
    if bad:
        problems.invalid_ids.append(_describe(value, bad, what))
    return _narrow(np.array([v if _valid_id(v) else INVALID_ID for v in value], dtype=np.int64))


def _narrow(ids: np.ndarray) -> np.ndarray:
    """int32 when every id fits (4 bytes a token), else int64."""
    if ids.dtype == np.int32 and not ids.flags.writeable:
        return ids  # a read-only view of the id arena (ingest/shortcuts/id_arrays.py): never copied
    if ids.shape[0] == 0 or int(ids.max()) <= _INT32_MAX:  # any shape: every axis
        return ids.astype(np.int32)
    return ids.astype(np.int64)


def _valid_logprob(value) -> bool:
    if type(value) is float:
        return math.isfinite(value)
    return type(value) is int and -_BIG_NUMBER < value < _BIG_NUMBER


_BIG_NUMBER = 10**300  # ints beyond this cannot be a float (a 400-digit "logprob")
_MINUS_INF = -math.inf


def _float_array(values: list) -> np.ndarray:
    """Floats with NaN wherever a value is not a finite JSON number (bools included)."""
    if set(map(type, values)) <= {float, int}:
        try:
            arr = np.array(values, dtype=np.float64)
        except OverflowError:
            arr = np.array([v if _valid_logprob(v) else np.nan for v in values], dtype=np.float64)
        finite = np.isfinite(arr)
        if not finite.all():
            arr[~finite] = np.nan
        return arr
    return np.array([v if _valid_logprob(v) else np.nan for v in values], dtype=np.float64)


def logprobs(values: list, what: str, problems: Problems, numbers: bool = False) -> np.ndarray:
    """Convert logprob values; invalid ones become NaN and are reported.

    ``numbers``: every value is known to be an int, a float or None (the typed decoder's types,
    graph/ingest/shortcuts/logprob_entries.py), so the values' types need no look: when the array read at once holds
    no NaN (None reads as NaN: the ``max`` is then NaN), nothing positive (that ``max``) and no
    -inf (one ``min``), it is what the full check gives; anything else takes the full check.
    """
    if numbers and values:
        try:
            arr = np.array(values, dtype=np.float64)
        except OverflowError:  # an int beyond the floats: the full check
            pass
        else:
            if _MAX(arr) <= 0 and _MIN(arr) > _MINUS_INF:
                return arr
    arr = _float_array(values)
    if not arr.size or _MAX(arr) <= 0:  # the common case in one reduction (a NaN makes max NaN)
        return arr
    bad = np.flatnonzero(np.isnan(arr))
    if bad.size:
        problems.invalid_logprobs.append(_describe(values, bad.tolist(), what))
    positive = np.flatnonzero(arr > 0)
    if positive.size:
        problems.positive_logprobs.append(_describe(values, positive.tolist(), what))
    return arr


def parse_token_id_text(token) -> int | None:
    """``"token_id:123"`` -> 123 (vLLM's ``return_tokens_as_token_ids``); anything else -> None."""
    if isinstance(token, str) and len(token) < 40:
        m = _TOKEN_ID_TEXT.match(token)
        if m:
            value = int(m.group(1))
            return value if value < _MAX_ID else None
    return None


def _is_token_id_text(token) -> bool:
    """``token_id:N`` whatever N is (a number beyond 64 bits is an invalid id, not token text)."""
    return isinstance(token, str) and token.startswith("token_id:") and token[9:].lstrip("-").isdigit()


@dataclass(frozen=True, slots=True)
class SplitTokens:
    """Logprob-entry tokens split into ids (-1 where unknown) and, when any was text, texts.

    ``invalid`` lists positions written as ids that are not valid ones (negative, or beyond 64
    bits): they are -1 in ``ids`` and must be reported, never clamped.
    """

    ids: np.ndarray
    texts: list[str] | None
    invalid: tuple[int, ...] = ()
    valid: bool = False  # every id is known to be valid (read by the token_id:N shortcut)

    @property
    def all_ids(self) -> bool:
        """Every token was written as an id (an invalid one is -1 and listed in ``invalid``)."""
        if self.valid or self.invalid:
            return self.texts is None
        return self.texts is None and bool((self.ids >= 0).all())

    def describe_invalid(self, tokens: list, what: str) -> str | None:
        """The invalid-id finding detail, or None when every id is valid."""
        return _describe(tokens, list(self.invalid), what) if self.invalid else None


def split_tokens(tokens: list, texts: list | None = None) -> SplitTokens:
    """Ids from ints or ``token_id:N`` strings; anything else is token text.

    The common case (every token a ``token_id:N`` string) is parsed in one vectorised pass.
    """
    n = len(tokens)
    ids = _token_id_texts(tokens) if n and type(tokens[0]) is str else None
    if ids is not None:  # every token a valid id: no -1 to look for
        return SplitTokens(ids, texts if texts is not None and any(texts) else None, valid=True)
    if ids is None and n and type(tokens[0]) is not str and set(map(type, tokens)) == {int}:
        try:
            ids = np.array(tokens, dtype=np.int64)
            ids[ids < 0] = INVALID_ID
        except OverflowError:  # an id beyond 64 bits: the slow path below
            ids = None
    if ids is None and not n:
        ids = np.empty(0, dtype=np.int64)
    if ids is None:
        ids = np.array([_one_id(tok) for tok in tokens], dtype=np.int64)
    invalid: tuple[int, ...] = ()
    if (ids == INVALID_ID).any():
        invalid = tuple(i for i in np.flatnonzero(ids == INVALID_ID).tolist() if _looks_like_id(tokens[i]))
        if texts is None:
            texts = ["" if tok is None or _looks_like_id(tok) else str(tok) for tok in tokens]
    return SplitTokens(ids, texts if texts is not None and any(texts) else None, invalid)


_PREFIX = b"token_id:"
_DIGITS = b"0123456789"


def _token_id_texts(tokens: list) -> np.ndarray | None:
    """The ids when every token is ``token_id:`` and 1 to 18 ASCII digits without a leading zero
    (``0`` alone is one: an engine's id 0), in a few C passes over the joined bytes; None otherwise: the per-token path then reads each
    token exactly as :func:`parse_token_id_text` does (a sign, a space, a newline, a comma, a
    non-ASCII digit, a leading zero or a number of 19 digits or more all land there).

    Joined with commas, the bytes must:

    1. start with ``token_id:``, and hold ``,token_id:`` n - 1 times;
    2. hold the bytes of ``token_id:`` (``t o k e n _ i d :``) nowhere but in those n prefixes:
       deleting every such byte (one ``translate``) removes exactly 9n of them;
    3. then hold only digits and commas, in pieces never empty and never starting with 0 unless
       the piece is ``0`` itself (``token_id:007`` is exact on the per-token path);
    4. read as exactly n numbers, each below 10**18.

    So no token holds a comma (each would add a number to 4.), every comma is a separator followed
    by the prefix (1.), every token starts with it, and the rest of each token is its digits (2.
    and 3.). A ``replace`` of the prefix searched for it n times; a count of the commas is implied
    by 4.
    """
    n = len(tokens)
    try:
        joined = ",".join(tokens).encode()
    except (TypeError, UnicodeEncodeError):  # not all strings; a lone surrogate
        return None
    if not joined.startswith(_PREFIX) or joined.count(b",token_id:") != n - 1:
        return None
    digits = joined.translate(None, _PREFIX)  # every byte of the prefix's letters, wherever it is
    if len(digits) != len(joined) - len(_PREFIX) * n:  # such a byte outside the n prefixes
        return None
    if (
        not digits
        or digits.translate(None, _DIGITS + b",")  # anything but digits and the separators
        or digits[:1] == b","
        or (digits[:1] == b"0" and digits[1:2].isdigit())
        or digits[-1:] == b","
        or b",," in digits
        or (b",0" in digits and _LEADING_ZERO.search(digits) is not None)  # ",0" then a digit
    ):
        return None
    ids = np.fromstring(digits, dtype=np.int64, sep=",")  # only digits and commas here: no warning
    # 18 digits at most (no leading zero): numpy clamps larger numbers to int64's maximum.
    if ids.shape[0] != n or int(_MAX(ids)) >= _EIGHTEEN_DIGITS:
        return None
    return ids


_LEADING_ZERO = re.compile(rb",0[0-9]")
_EIGHTEEN_DIGITS = 10**18
# What _token_id_texts accepts, joined with commas: the ASCII classes match nothing else. Possessive
# (no backtracking kept: a digit never matches the comma or the end that must follow), a quarter
# less CPU than the plain pattern for the same language.
_TOKEN_ID_LIST = re.compile(r"token_id:(?:0|[1-9][0-9]{0,17}+)(?:,token_id:(?:0|[1-9][0-9]{0,17}+))*+")


def joined_tokens(tokens: list) -> str | None:
    """The tokens joined with commas when every one is a string and none holds a comma (exactly
    ``len(tokens) - 1`` commas: the text split at them is the tokens again); None otherwise (an
    empty list included)."""
    try:
        joined = ",".join(tokens)
    except TypeError:  # not all strings
        return None
    return joined if joined.count(",") == len(tokens) - 1 else None


def all_token_id_texts(tokens: list) -> bool:
    """Whether :func:`_token_id_texts` reads every token as an id (``token_id:`` and 1 to 18
    ASCII digits without a leading zero, or ``0``), without reading the ids: for a choice whose
    ``token_ids`` are read instead, one regex match of the joined tokens (about half the CPU).

    The joined text holds exactly n - 1 commas, so no token holds one: the commas are the n - 1
    separators, and the match then reads each token, whole, as one id.
    """
    return token_id_list(joined_tokens(tokens))


def token_id_list(joined: str | None) -> bool:
    """:func:`all_token_id_texts` of tokens already joined (``joined``: :func:`joined_tokens`' text,
    None when they are not all strings or one holds a comma, where all_token_id_texts says False too)."""
    if joined is None:
        return False
    native = speedups.native  # the same pattern read in one C pass
    return native.token_id_list(joined) if native is not None else _TOKEN_ID_LIST.fullmatch(joined) is not None


def _one_id(tok) -> int:
    if type(tok) is int:
        return tok if 0 <= tok < _MAX_ID else INVALID_ID
    t = parse_token_id_text(tok)
    return INVALID_ID if t is None else t


def _looks_like_id(tok) -> bool:
    """Written as a token id (a number or ``token_id:N``), valid or not.

    orjson reads an integer beyond 64 bits as a float, so a float here is an id that was too big.
    """
    return type(tok) in (int, float) or _is_token_id_text(tok)


def top_k(
    lengths: list[int], tokens: list, logprob_values: list, texts: list | None = None, numbers: bool = False
) -> TopK | None:
    """Pack alternatives recorded per position (``lengths[i]`` of them, flattened in order).

    ``numbers``: every logprob is known to be an int, a float or None (the typed decoder's types,
    graph/ingest/shortcuts/logprob_entries.py): when the values read at once hold no NaN, none was None (nor could
    anything else be), so they are what :func:`_float_array` reads too; else it reads them.
    When every position has the same number of alternatives (what engines write), the flat
    columns are the rows already: reshaped, not scattered (the same arrays either way).
    """
    width = max(lengths, default=0)
    if width == 0:
        return None
    n = len(lengths)
    split = split_tokens(tokens, texts)
    values = _known_floats(logprob_values) if numbers else None
    if values is None:
        values = _float_array(logprob_values)
    size = n * width
    uniform = min(lengths) == width and split.ids.shape[0] == size == values.shape[0]
    if uniform and (split.texts is None or len(split.texts) == size):  # row-major order is the flat order
        ids = split.ids.astype(np.int64, copy=False).reshape(n, width)
        if int(_MAX(ids.reshape(-1))) <= _INT32_MAX:
            ids = ids.astype(np.int32)
        elif ids.base is not None:
            ids = ids.copy()  # an array of its own, as np.full gives below
        with np.errstate(over="ignore"):  # the same cast (and -inf beyond float32) as the scatter
            lps = values.astype(np.float32).reshape(n, width)
        full = None if split.texts is None else list(split.texts)
        return TopK(ids=ids, logprobs=lps, texts=full)
    counts = np.array(lengths, dtype=np.int64)
    rows = np.repeat(np.arange(n), counts)
    cols = np.arange(rows.shape[0]) - np.repeat(np.cumsum(counts) - counts, counts)
    ids = np.full((n, width), INVALID_ID, dtype=np.int64)
    lps = np.full((n, width), np.nan, dtype=np.float32)
    ids[rows, cols] = split.ids
    if int(ids.max()) <= _INT32_MAX:  # 4 bytes an alternative when every id fits, like token ids
        ids = ids.astype(np.int32)
    # float32 holds the alternatives: a logprob beyond its range (-1e39) is -inf there, as it is in
    # probability; numpy's overflow warning would reach the user's terminal (and fail the tests).
    with np.errstate(over="ignore"):
        lps[rows, cols] = values
    flat_texts = None
    if split.texts is not None:
        flat_texts = [""] * (n * width)
        for r, c, text in zip(rows.tolist(), cols.tolist(), split.texts, strict=True):
            flat_texts[r * width + c] = text
    return TopK(ids=ids, logprobs=lps, texts=flat_texts)


def _known_floats(values: list) -> np.ndarray | None:
    """:func:`_float_array` of ints, floats and Nones, when none is None; None otherwise (or when
    an int is beyond the floats). A None reads as NaN, and JSON has no NaN of its own (nor does
    an int convert to one), so an array without NaN means every value was an int or a float:
    _float_array's own first read, non-finite values then NaN as there."""
    try:
        arr = np.array(values, dtype=np.float64)
    except (OverflowError, TypeError, ValueError):
        return None
    if arr.ndim != 1 or arr.shape[0] != len(values):
        return None
    finite = np.isfinite(arr)
    if not finite.all():
        if np.isnan(arr).any():
            return None
        arr[~finite] = np.nan
    return arr
