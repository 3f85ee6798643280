"""The deferred alternatives' decode (``logprob_entries.decode_top``, ``tokens.top_k``) against reference
copies of the code it replaced, on odd inputs.

The faster decode builds only the alternatives' columns when no check is asked (C-level maps, no
sampled columns), reshapes the flat columns when every position has the same number of
alternatives instead of scattering them, reads the typed decoder's logprobs with one
``np.array`` when none is None (``tokens._known_floats``), and reads ``token_id:0`` as the id 0 in
the joined-text shortcut. Each must give exactly the arrays the old code gave: dtype, shape,
bytes (NaN, -inf, -1 padding, float32 rounding and its overflow to -inf), texts and refusals.
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rollout_graph.core.records import TopK
from rollout_graph.ingest import tokens
from rollout_graph.ingest.shortcuts import logprob_entries
from tests.ingest.test_parse_fast_paths import ODD_TOKENS

# ----- reference copies of the code before this change -------------------------------------------


def _old_top_k(lengths: list[int], toks: list, logprob_values: list, texts: list | None = None) -> TopK | None:
    width = max(lengths, default=0)
    if width == 0:
        return None
    n = len(lengths)
    counts = np.array(lengths, dtype=np.int64)
    rows = np.repeat(np.arange(n), counts)
    cols = np.arange(rows.shape[0]) - np.repeat(np.cumsum(counts) - counts, counts)
    split = tokens.split_tokens(toks, texts)
    ids = np.full((n, width), tokens.INVALID_ID, dtype=np.int64)
    lps = np.full((n, width), np.nan, dtype=np.float32)
    ids[rows, cols] = split.ids
    if int(ids.max()) <= tokens._INT32_MAX:
        ids = ids.astype(np.int32)
    with np.errstate(over="ignore"):
        lps[rows, cols] = tokens._float_array(logprob_values)
    flat_texts = None
    if split.texts is not None:
        flat_texts = [""] * (n * width)
        for r, c, text in zip(rows.tolist(), cols.tolist(), split.texts, strict=True):
            flat_texts[r * width + c] = text
    return TopK(ids=ids, logprobs=lps, texts=flat_texts)


def _old_decode_top(span: bytes, rows: int, check: int | None = None) -> TopK | None:
    """decode_top's typed branch as it was (the generic branch is unchanged and shared)."""
    t = logprob_entries.typed()
    try:
        entries = t.ENTRIES.decode(span)
    except (t.DecodeError, ValueError):
        entries = None
    if entries is None:
        return logprob_entries.decode_top(span, rows, check)  # the generic path: not changed
    if len(entries) != rows:
        return None
    c = logprob_entries._columns(entries)
    if check is not None and logprob_entries._check(c.tokens, c.logprobs, c.joined) != check:
        return None
    top = _old_top_k(c.lengths, c.alt_tokens, c.alt_logprobs)
    if top is None:
        return TopK(np.full((rows, 0), -1, dtype=np.int32), np.full((rows, 0), np.nan, dtype=np.float32))
    return top


def _old_split_ids(toks: list) -> np.ndarray:
    """The ids as the per-token path reads them (what the joined-text shortcut must agree with)."""
    return np.array([tokens._one_id(tok) for tok in toks], dtype=np.int64)


# ----- comparison ---------------------------------------------------------------------------------


def _same(a: TopK | None, b: TopK | None) -> None:
    assert (a is None) == (b is None)
    if a is None or b is None:
        return
    for x, y in ((a.ids, b.ids), (a.logprobs, b.logprobs)):
        assert x.dtype == y.dtype and x.shape == y.shape, (x.dtype, y.dtype, x.shape, y.shape)
        assert x.tobytes() == y.tobytes()
        assert x.flags.c_contiguous and x.flags.writeable == y.flags.writeable
    assert a.texts == b.texts
    assert a.unavailable == b.unavailable


# ----- strategies ---------------------------------------------------------------------------------

odd_float = st.one_of(
    st.floats(allow_nan=False),  # infinities included: an eager read of 1e400 gives inf
    st.floats(min_value=-1e-40, max_value=1e-40),
    st.sampled_from([0.0, -0.0, -1e39, -3.5e38, -3.4028235e38, -3.4028236e38, 1e39, -1e-46, 5e-324, -1e308]),
)
odd_int = st.one_of(
    st.integers(-5, 5),
    st.integers(-(2**70), 2**70),
    st.sampled_from([2**53, 2**53 + 1, -(2**63), 2**64, 10**300, -(10**300), 10**301, 10**308, -(10**309)]),
)
logprob_value = st.one_of(odd_float, odd_int, st.none())
alt_token = st.one_of(
    st.integers(1, 200_000).map(lambda i: f"token_id:{i}"),
    st.just("token_id:0"),
    st.sampled_from(ODD_TOKENS),
    st.integers(-3, 2**64 + 3),
    st.text(max_size=6),
    st.none(),
)


@st.composite
def columns(draw):
    """(lengths, tokens, logprobs): ragged or uniform rows, empty rows, every row empty."""
    n = draw(st.integers(0, 8))
    width = draw(st.integers(0, 6))
    if draw(st.booleans()):
        lengths = [width] * n
    else:
        lengths = draw(st.lists(st.integers(0, 6), min_size=n, max_size=n))
    total = sum(lengths)
    toks = draw(st.lists(alt_token, min_size=total, max_size=total))
    values = draw(st.lists(logprob_value, min_size=total, max_size=total))
    return lengths, toks, values


@settings(deadline=None, max_examples=600)
@given(columns(), st.booleans())
def test_top_k_equals_the_old_packing(cols, numbers):
    lengths, toks, values = cols
    if not numbers:  # the generic path's values may be anything JSON holds
        values = [v if i % 3 else (bool(v) if v is not None else "x") for i, v in enumerate(values)]
    with warnings.catch_warnings():  # no warning may leak (numpy's defaults, as a user runs)
        warnings.simplefilter("error")
        new = tokens.top_k(lengths, toks, values, numbers=numbers)
    _same(new, _old_top_k(lengths, toks, values))


@settings(deadline=None, max_examples=300)
@given(columns(), st.data())
def test_top_k_with_texts_equals_the_old_packing(cols, data):
    lengths, toks, values = cols
    texts = data.draw(st.lists(st.text(max_size=4), min_size=len(toks), max_size=len(toks)))
    assume(any(texts))
    _same(tokens.top_k(lengths, toks, values, texts), _old_top_k(lengths, toks, values, texts))


def test_a_uniform_top_k_with_big_ids_has_its_own_int64_array():
    top = tokens.top_k([2, 2], [1, 2**40, 3, 4], [-1.0, -2.0, -3.0, -4.0], numbers=True)
    assert top is not None and top.ids.dtype == np.int64 and top.ids.base is None
    _same(top, _old_top_k([2, 2], [1, 2**40, 3, 4], [-1.0, -2.0, -3.0, -4.0]))


def test_the_float32_overflow_is_minus_inf_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        top = tokens.top_k([2], ["token_id:1", "token_id:2"], [-1e39, 1e39], numbers=True)
    assert top is not None and top.logprobs.tolist() == [[-math.inf, math.inf]]


@settings(deadline=None, max_examples=400)
@given(st.lists(logprob_value, max_size=12))
def test_known_floats_is_float_array_whenever_it_answers(values):
    got = tokens._known_floats(values)
    if got is None:
        assume(False)
    want = tokens._float_array(values)
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


def test_known_floats_leaves_nones_and_huge_ints_to_float_array():
    assert tokens._known_floats([-1.0, None]) is None
    assert tokens._known_floats([10**400]) is None
    # an int beyond 10**300 that is still a float: kept as _float_array keeps it (no None beside it)
    assert tokens._known_floats([10**301]).tolist() == tokens._float_array([10**301]).tolist()


@settings(deadline=None, max_examples=400)
@given(
    st.lists(
        st.one_of(st.integers(0, 10**19).map(lambda i: f"token_id:{i}"), st.sampled_from(ODD_TOKENS)),
        min_size=1,
        max_size=8,
    )
)
def test_the_joined_id_shortcut_reads_token_id_zero_as_the_per_token_path(toks):
    toks = toks + ["token_id:0"]
    fast = tokens._token_id_texts(toks)
    if fast is not None:
        assert fast.tolist() == _old_split_ids(toks).tolist()
    split = tokens.split_tokens(toks)
    assert split.ids.tolist() == _old_split_ids(toks).tolist()
    assert tokens.all_token_id_texts(toks) == (fast is not None)


def test_token_id_zero_takes_the_shortcut_and_leading_zeros_do_not():
    assert tokens._token_id_texts(["token_id:0", "token_id:10", "token_id:0"]).tolist() == [0, 10, 0]
    assert tokens._token_id_texts(["token_id:0"]).tolist() == [0]
    for odd in (["token_id:00"], ["token_id:01"], ["token_id:5", "token_id:05"], ["token_id:0", "token_id:007"]):
        assert tokens._token_id_texts(odd) is None, odd
        assert tokens.split_tokens(odd).ids.tolist() == _old_split_ids(odd).tolist()


# ----- whole spans ----------------------------------------------------------------------------------

alt_object = st.one_of(
    st.fixed_dictionaries({"token": alt_token, "logprob": logprob_value}),
    st.fixed_dictionaries({}, optional={"token": alt_token, "logprob": logprob_value}),  # missing fields
    st.fixed_dictionaries({"token": st.just(["a"]), "logprob": st.just(-1.0)}),  # a wrong type
    st.fixed_dictionaries({"token": st.just("token_id:3"), "logprob": st.just("-1.0")}),
    st.fixed_dictionaries({"token": st.just("token_id:3"), "logprob": st.just(True)}),
)


@st.composite
def content(draw):
    rows = draw(st.integers(0, 6))
    uniform = draw(st.booleans())
    width = draw(st.integers(0, 5))
    entries = []
    for _ in range(rows):
        entry: dict = {"token": draw(alt_token), "logprob": draw(logprob_value)}
        how = draw(st.sampled_from(["list", "list", "null", "absent", "empty"]))
        if how == "list":
            k = width if uniform else draw(st.integers(0, 5))
            entry["top_logprobs"] = [draw(alt_object) for _ in range(k)]
        elif how == "null":
            entry["top_logprobs"] = None
        elif how == "empty":
            entry["top_logprobs"] = []
        entries.append(entry)
    return entries


def _dump(entries: list) -> bytes | None:
    try:  # huge ints are written as digits; infinities as 1e400 (what an engine's JSON could hold)
        text = json.dumps(entries, ensure_ascii=False, allow_nan=True)
    except ValueError:
        return None
    return text.replace("-Infinity", "-1e400").replace("Infinity", "1e400").encode("utf-8", "surrogatepass")


@settings(deadline=None, max_examples=500)
@given(content(), st.integers(-1, 1), st.booleans())
def test_decode_top_equals_the_old_decode(entries, extra_rows, with_check):
    span = _dump(entries)
    assume(span is not None and b"NaN" not in span)
    rows = len(entries) + extra_rows
    check = None
    if with_check:
        columns = logprob_entries._columns(logprob_entries.typed().ENTRIES.decode(span)) if _typed_ok(span) else None
        check = logprob_entries._check(columns.tokens, columns.logprobs, columns.joined) if columns else 12345
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = logprob_entries.decode_top(span, rows, check)
    _same(new, _old_decode_top(span, rows, check))
    if check is not None and new is not None:  # a wrong check is refused, as before
        assert (
            logprob_entries.decode_top(span, rows, check ^ 1) is None and _old_decode_top(span, rows, check ^ 1) is None
        )


def _typed_ok(span: bytes) -> bool:
    t = logprob_entries.typed()
    try:
        t.ENTRIES.decode(span)
    except (t.DecodeError, ValueError):
        return False
    return True


def test_decode_top_on_engine_shaped_spans_equals_the_old_decode():
    rng = np.random.default_rng(7)
    entries = []
    for i in range(300):
        base = int(rng.integers(0, 5000)) if i % 17 else 0  # token_id:0 sometimes
        lp = float(-rng.exponential())
        entries.append(
            {
                "token": f"token_id:{base}",
                "logprob": lp,
                "top_logprobs": [{"token": f"token_id:{base + j}", "logprob": lp - j} for j in range(5)],
            }
        )
    span = json.dumps(entries, separators=(",", ":")).encode()
    _same(logprob_entries.decode_top(span, 300), _old_decode_top(span, 300))
    ragged = [dict(e, top_logprobs=e["top_logprobs"][: i % 6]) for i, e in enumerate(entries)]
    span = json.dumps(ragged, separators=(",", ":")).encode()
    _same(logprob_entries.decode_top(span, 300), _old_decode_top(span, 300))


# ----- reading the span again: one pread against the stream it replaced ----------------------------


def _deferred(tmp_path) -> tuple[list[logprob_entries.DeferredTop], object]:
    import dataclasses
    import os

    from rollout_graph.ingest.load.files import load_paths
    from tests.ingest.test_cold_path import _calls, _vllm_lines

    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\n".join(_vllm_lines(4)) + b"\n")
    loads = [c.top_k._load for c in _calls(load_paths([path]))]
    assert all(isinstance(d, logprob_entries.DeferredTop) for d in loads)
    return [dataclasses.replace(d) for d in loads], (path, os)


def _both(d: logprob_entries.DeferredTop) -> tuple:
    """What the pread path and the stream path give (the value or the error's text), and _untouched."""
    import copy

    out = []
    for read in ("_read", "_read_stream"):
        e = copy.copy(d)
        try:
            got: object = getattr(e, read)()
        except OSError as exc:
            got = ("error", type(exc).__name__, exc.strerror, exc.filename)
        out.append((got, e._untouched))
    return tuple(out)


def test_the_pread_reads_what_the_stream_read_whatever_became_of_the_file(tmp_path):
    loads, (path, os) = _deferred(tmp_path)
    original = path.read_bytes()
    fast, slow = _both(loads[1])
    assert fast == slow and isinstance(fast[0], bytes) and fast[1] is True
    _same(loads[1](), logprob_entries.decode_top(fast[0], loads[1].rows))
    cases = [
        original + b"appended\n",  # a capture still writing: readable, no longer untouched
        original.replace(b"token_id:1001", b"token_id:7777"),  # same size, other bytes
        original[: len(original) // 2],  # truncated
        b"x" * len(original),  # rewritten
    ]
    for data in cases:
        path.write_bytes(data)
        for d in loads:
            fast, slow = _both(d)
            assert fast == slow, data[:40]
    path.unlink()
    os.mkdir(path)  # a folder in its place
    assert _both(loads[0])[0] == _both(loads[0])[1] and _both(loads[0])[0][0][0] == "error"
    os.rmdir(path)
    assert _both(loads[0])[0][0][:2] == ("error", "FileNotFoundError") and len(set(_both(loads[0]))) == 1
    os.mkfifo(path)  # a FIFO: never blocks, refused by name
    fast, slow = _both(loads[0])
    assert fast == slow and "FIFO" in str(fast[0])
    assert "FIFO" in (loads[0]().unavailable or "")
