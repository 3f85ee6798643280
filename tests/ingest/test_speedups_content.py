"""The C content-array scanner (``_speedups.sampled_entries``) against the Python path it stands for.

For any span, the scanner either returns None (the Python path, msgspec, reads it) or columns that
equal the Python path's exactly: tokens, logprobs and their types, the joined text, the float64
bytes, the nonpositive flag, the deferred alternatives' check hash and the ``token_id:N`` flag. A
span that is not JSON (as orjson reads it) or not valid UTF-8 must give None. The generated spans
are valid shapes, odd shapes and random mutations of valid ones; the tests also hold that the
scanner is taken on the shapes it is meant for (vLLM's, plain text tokens with escapes).
"""

from __future__ import annotations

import json
import struct

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rollout_graph.ingest.files.sources import FileRef
from rollout_graph.ingest.shortcuts import logprob_entries, logprob_spans
from rollout_graph.ingest.speedups import native
from rollout_graph.ingest.tokens import joined_tokens, token_id_list

pytestmark = pytest.mark.skipif(native is None, reason="the C speedups are not built")

FILE = FileRef("x", 1 << 40, 0)


def _bits(values: list) -> list:
    """Values with their types and, for floats, their bits (-0.0 is not 0.0)."""
    return [(type(v), struct.pack("<d", v) if type(v) is float else v) for v in values]


def native_columns(span: bytes) -> logprob_entries.LogprobColumns | None:
    assert native is not None
    got = native.sampled_entries(span)
    return None if got is None else logprob_entries._from_native(got, span, FILE, 0)


def check_against_python(span: bytes) -> logprob_entries.LogprobColumns | None:
    """The scanner's columns of ``span`` held to the Python path's (None when it declines)."""
    fast = native_columns(span)
    if fast is None:
        return None
    # accepted: the span is JSON (orjson: strict, UTF-8 checked) and the Python path reads it too
    parsed = orjson.loads(span)
    assert isinstance(parsed, list) and parsed
    slow = logprob_entries._sampled_python(span, FILE, 0)
    assert slow is not None, span
    assert _bits(fast.tokens) == _bits(slow.tokens)
    assert _bits(fast.logprobs) == _bits(slow.logprobs)
    assert fast.tokens == [e["token"] for e in parsed]
    assert _bits(fast.logprobs) == _bits([e["logprob"] for e in parsed])
    assert fast.joined == slow.joined == joined_tokens(slow.tokens)
    floats, nonpositive = logprob_entries.exact_floats(slow.logprobs)
    assert floats is not None and fast.floats is not None
    assert fast.floats.tobytes() == floats.tobytes() and fast.floats.dtype == floats.dtype
    if slow.logprob_array is None:
        assert fast.logprob_array is None and not nonpositive
    else:
        assert fast.logprob_array is not None and nonpositive
        assert fast.logprob_array.tobytes() == slow.logprob_array.tobytes()
        assert fast.logprob_array.flags.writeable and fast.logprob_array.dtype == slow.logprob_array.dtype
    assert fast.top is not None and slow.top is not None
    fast_load, slow_load = fast.top._load, slow.top._load
    assert fast_load.check == slow_load.check == logprob_entries._check(slow.tokens, slow.logprobs)
    assert (fast_load.rows, fast_load.length, fast_load.head, fast_load.tail) == (
        slow_load.rows,
        slow_load.length,
        slow_load.head,
        slow_load.tail,
    )
    assert fast.id_texts == token_id_list(slow.joined)
    return fast


# -- generated spans ---------------------------------------------------------------------------

id_token = st.integers(0, 10**19).map(lambda n: f"token_id:{n}") | st.sampled_from(
    ["token_id:", "token_id:01", "token_id:-1", "token_id:1a", "token_id:" + "9" * 18, "token_id:" + "1" * 19]
)
text_token = st.text(max_size=6) | st.sampled_from([",", "a,b", "", "\u00e9", "\U0001f600", '"', "\\", "\x00", "\x1f"])
odd_token = st.integers(-5, 5) | st.none() | st.booleans() | st.floats(-1, 1)
token = id_token | text_token | odd_token

float_logprob = st.floats(-100, -1e-300) | st.sampled_from(
    [-0.0, 0.0, -1e-300, -1e-301, -5e-324, -1e300, -1.7976931348623157e308, -(2.0**53), 2.0**53 - 1]
)
odd_logprob = (
    st.floats(allow_nan=False, allow_infinity=False) | st.integers(-3, 3) | st.none() | st.just(-(2**70)) | st.just("x")
)
logprob = float_logprob | odd_logprob


def _number_text(value: float, style: int) -> str:
    if style == 0:
        return repr(value)
    if style == 1:
        return f"{value:.17e}"
    if style == 2:
        return f"{value:.25g}" if "e" in f"{value:.25g}" or "." in f"{value:.25g}" else f"{value:.25g}.0"
    return f"{value:.3E}"


@st.composite
def value_text(draw, value, ascii_only):
    """``value`` as JSON text, numbers in one of several spellings."""
    if type(value) is float:
        return _number_text(value, draw(st.integers(0, 3)))
    return json.dumps(value, ensure_ascii=ascii_only)


ws = st.sampled_from(["", "", "", " ", "\n", "\t ", "\r\n"])


@st.composite
def alternative(draw, ascii_only):
    keys = []
    if draw(st.booleans()):
        keys.append(("token", json.dumps(draw(token), ensure_ascii=ascii_only)))
    if draw(st.booleans()):
        keys.append(("logprob", draw(value_text(draw(logprob), ascii_only))))
    if draw(st.booleans()):
        keys.append(("bytes", json.dumps(draw(st.lists(st.integers(0, 255), max_size=4)))))
    return "{" + ",".join(f'"{k}":{v}' for k, v in keys) + "}"


@st.composite
def entry(draw, ascii_only):
    # mostly the shapes the scanner reads (hypothesis' one_of leans to its first strategies)
    tok = draw(odd_token if draw(st.integers(0, 9)) == 0 else id_token | text_token)
    lp = draw(odd_logprob if draw(st.integers(0, 9)) == 0 else float_logprob)
    pairs = [("token", json.dumps(tok, ensure_ascii=ascii_only)), ("logprob", draw(value_text(lp, ascii_only)))]
    if draw(st.integers(0, 29)) == 0:
        pairs = pairs[: draw(st.integers(0, 1))]  # a key missing
    tops = draw(st.integers(0, 9))
    if tops < 7:
        alts = draw(st.lists(alternative(ascii_only), max_size=3))
        pairs.append(("top_logprobs", "[" + ",".join(alts) + "]"))
    elif tops == 7:
        pairs.append(("top_logprobs", draw(st.sampled_from(["null", "[]", "5", '"x"', "[[[]]]", "{}"]))))
    if draw(st.integers(0, 5)) == 0:
        pairs.append(("bytes", json.dumps(draw(st.lists(st.integers(0, 255), max_size=4)))))
    if draw(st.integers(0, 19)) == 0:
        extra = draw(st.sampled_from(["token", "logprob", "top_logprobs", "tok\\u0065n", "other", ""]))
        pairs.insert(draw(st.integers(0, len(pairs))), (extra, draw(st.sampled_from(['"y"', "-1.5", "null", "[]"]))))
    if draw(st.integers(0, 4)) == 0:
        pairs = draw(st.permutations(pairs))
    w = draw(ws)
    return "{" + w + ("," + w).join(f'"{k}"{w}:{w}{v}' for k, v in pairs) + w + "}"


@st.composite
def span_text(draw):
    ascii_only = draw(st.booleans())
    entries = draw(st.lists(entry(ascii_only), min_size=draw(st.sampled_from([0, 1, 1, 1])), max_size=6))
    w = draw(ws)
    return ("[" + w + ("," + w).join(entries) + w + "]").encode()


@st.composite
def mutated(draw):
    span = bytearray(draw(span_text()))
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.integers(0, 4))
        if not span:
            break
        i = draw(st.integers(0, len(span) - 1))
        if kind == 0:
            span[i] ^= 1 << draw(st.integers(0, 7))
        elif kind == 1:
            del span[i]
        elif kind == 2:
            span.insert(i, draw(st.sampled_from(b'",[]{}:\\ 0e.-\x00\x80\xc3\xed\xf4\xff')))
        elif kind == 3:
            del span[i:]
        else:
            span[i] = draw(st.integers(0, 255))
    return bytes(span)


@settings(deadline=None, max_examples=1500, suppress_health_check=[HealthCheck.too_slow])
@given(span_text())
@example(b'[{"token":"a","logprob":-0.5}]')
@example(b'[{"token":"a","logprob":-0.5,"token":"b"}]')
@example(b'[{"token":"\\ud83d\\ude00,","logprob":-1e-5}]')
@example(
    b'[{"token":"a","logprob":-0.5,"top_logprobs":[{"token":"a\\n","logprob":-1.0},{"token":"b","logprob":-2.0,"x":1}]}]'
)
def test_generated_spans_read_as_the_python_path_reads_them(span):
    check_against_python(span)


@settings(deadline=None, max_examples=2000, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_spans_read_as_the_python_path_reads_them_or_not_at_all(span):
    fast = native_columns(span)
    if fast is None:
        return
    check_against_python(span)


def _malformed(span: bytes) -> bool:
    try:
        orjson.loads(span)
    except orjson.JSONDecodeError:
        return True
    return False


@settings(deadline=None, max_examples=1500, suppress_health_check=[HealthCheck.too_slow])
@given(mutated() | st.binary(max_size=64))
@example(b'[{"token":"a","logprob":-0.5}')
@example(b'[{"token":"a\xff","logprob":-0.5}]')
@example(b'[{"token":"\xed\xa0\x80","logprob":-0.5}]')
@example(b'[{"token":"\\ud800","logprob":-0.5}]')
@example(b'[{"token":"a","logprob":-0.5,"top_logprobs":["\\ud800"]}]')
@example(b'[{"token":"a","logprob":-0.5,"top_logprobs":["\x01"]}]')
@example(b'[{"token":"a","logprob":-0.5,"top_logprobs":[01]}]')
@example(b'[{"token":"a","logprob":-0.5,"top_logprobs":[1.]}]')
@example(b'[{"token":"a","logprob":-0.5,"top_logprobs":[NaN]}]')
@example(b'[{"token":"a","logprob":-.5}]')
@example(b'[{"token":"a","logprob":-0.5}] x')
@example(b'[{"token":"a","logprob":-0.5},]')
# vLLM's compact alternative, read whole, with its odd neighbours
@example(b'[{"token":"a","logprob":-0.5,"top_logprobs":[{"token":"a","logprob":-1.}]}]')
@example(b'[{"token":"a","logprob":-0.5,"top_logprobs":[{"token":"a\x01","logprob":-1.0}]}]')
@example(b'[{"token":"a","logprob":-0.5,"top_logprobs":[{"token":"a","logprob":-1.0]}]')
@example(b'[{"token":"a","logprob":-0.5,"top_logprobs":[{"token":"a","logprob":-1.0}')
@example(b'[{"token":"a","logprob":-0.5,"top_logprobs":[{"token":"a","logprob":-1.0')
@example(b'[{"token":"a","logprob":-0.5,"top_logprobs":[{"token":"a","logprob":1e999}]}]')
def test_a_malformed_span_is_left_to_the_python_path(span):
    if _malformed(span):
        assert native is not None
        assert native.sampled_entries(span) is None


def test_odd_spans_are_declined():
    assert native is not None
    for span in [
        b"[]",
        b"{}",
        b"",
        b'[{"token":"a","logprob":-1}]',  # an int
        b'[{"token":"a","logprob":null}]',
        b'[{"token":1,"logprob":-0.5}]',
        b'[{"token":"a"}]',
        b'[{"logprob":-0.5}]',
        b'[{"token":"a","token":"a","logprob":-0.5}]',  # repeated
        b'[{"tok\\u0065n":"a","logprob":-0.5}]',  # an escaped key
        b'[{"token":"a","logprob":-1e400}]',
        b'[{"token":"a","logprob":-1e-400}]',
        b'[{"token":"a","logprob":-9007199254740992.0}]',
        b'[{"token":"a","logprob":-0.' + b"1" * 60 + b"}]",
        b'[{"token":"a","logprob":-0.5,"top_logprobs":' + b"[" * 20 + b"]" * 20 + b"}]",
        b'[{"token":"a","logprob":-0.5}, 5]',
    ]:
        assert native.sampled_entries(span) is None, span


def _vllm_span(n: int, k: int = 5, text: bool = False) -> bytes:
    def tok(i: int) -> str:
        return (
            ["Hello", " wor", "ld", ",", "\u00e9t\u00e9", "\n", '"q"', "\U0001f600"][i % 8] if text else f"token_id:{i}"
        )

    entries = [
        {
            "token": tok(i),
            "logprob": -1.0 / (i + 3),
            "bytes": list(tok(i).encode()),
            "top_logprobs": [{"token": tok(i + j), "logprob": -j - 0.25, "bytes": [1, 2]} for j in range(k)],
        }
        for i in range(n)
    ]
    return json.dumps(entries, separators=(",", ":"), ensure_ascii=not text).encode()


@pytest.mark.parametrize("text", [False, True])
@pytest.mark.parametrize("n", [1, 3, 700])
def test_the_c_path_is_taken_on_the_shapes_it_is_for(n, text):
    span = _vllm_span(n, text=text)
    fast = check_against_python(span)
    assert fast is not None and fast.floats is not None and len(fast.tokens) == n
    assert fast.id_texts is (not text)
    assert (fast.joined is None) is (text and n > 3)  # the "," token
    columns = logprob_entries._sampled_only(span, FILE, 0)
    assert columns is not None and columns.floats is not None  # _sampled_only takes the C path
    # escaped (ensure_ascii) too, and with whitespace
    spaced = json.dumps(json.loads(span), indent=1).encode()
    assert check_against_python(spaced) is not None


@settings(deadline=None, max_examples=500)
@given(
    st.lists(
        st.tuples(
            id_token | st.text(max_size=5), st.floats(-50, -1e-300) | st.sampled_from([-0.0, 0.0, -1e-300, -1e-12])
        ),
        min_size=1,
        max_size=6,
    ),
    st.booleans(),
)
def test_supported_shapes_are_taken(rows, ascii_only):
    entries = [{"token": t, "logprob": v, "top_logprobs": [{"token": t, "logprob": v}]} for t, v in rows]
    text = json.dumps(entries, ensure_ascii=ascii_only)
    try:
        span = text.encode()
    except UnicodeEncodeError:  # a lone surrogate (not ensure_ascii): not UTF-8
        return
    if any(0xD800 <= ord(c) <= 0xDFFF for t, _ in rows for c in t):
        assert native_columns(span) is None  # a lone surrogate escape: declined
        return
    assert check_against_python(span) is not None


def test_switched_off_gives_the_python_path(monkeypatch):
    span = _vllm_span(5)
    monkeypatch.setattr(logprob_entries, "_native", None)
    columns = logprob_entries._sampled_only(span, FILE, 0)
    assert columns is not None and columns.floats is None and columns.id_texts is None


@st.composite
def number_text(draw):
    """JSON number texts with a fraction or an exponent, up to 21 significant digits: both the
    scanner's exact shortcuts (Clinger's, and the rounding check beyond 2**53) and its strtod."""
    sign = draw(st.sampled_from(["-", "-", ""]))
    whole = draw(st.sampled_from(["0", "1", "4", "9", "12", "99"]) | st.integers(1, 10**6).map(str))
    frac = draw(st.text("0123456789", min_size=0, max_size=21))
    exp = draw(st.sampled_from(["", "", "e-5", "E+2", "e0", "e-30", "e-22", "e-23", "E-300", "e-301", "e15", "e16"]))
    if not frac and not exp:
        frac = "0"
    return f"{sign}{whole}{'.' + frac if frac else ''}{exp}"


@settings(deadline=None, max_examples=3000)
@given(number_text() | st.floats(-60, 0).map(repr) | st.floats(-1e-3, 0).map(lambda v: f"{v:.19e}"))
@example("-1.0716049879470106")
@example("-0.07160498794701067")
@example("-9007199254740991.0")
@example("-9007199254740993.0")
@example("-1.00000000000000011102230246251565404236316680908203125")  # a tie, written out
@example("-0.1000000000000000055511151231257827021181583404541015625")
def test_logprob_doubles_are_the_correctly_rounded_ones(text):
    span = b'[{"token":"a","logprob":' + text.encode() + b',"top_logprobs":[]}]'
    fast = native_columns(span)
    if fast is None:
        return
    assert struct.pack("<d", fast.logprobs[0]) == struct.pack("<d", float(text))
    check_against_python(span)


def test_logprob_doubles_are_taken_for_what_engines_write():
    for v in [-1.0716049879470106, -0.07160498794701067, -4.071604987947011, -1e-05, -12.5, -0.0, -2.2e-8]:
        fast = native_columns(b'[{"token":"a","logprob":' + repr(v).encode() + b"}]")
        assert fast is not None and struct.pack("<d", fast.logprobs[0]) == struct.pack("<d", v)


def test_the_bundled_vllm_sample_takes_the_c_path_and_reads_the_same():
    from pathlib import Path

    sample = Path(__file__).resolve().parents[2] / "sample_traces" / "vllm" / "agent-rollouts.jsonl"
    spans = []
    for raw in sample.read_bytes().splitlines():
        at = logprob_spans.located_span(raw)  # vLLM's compact layout by bytes, else the skim's spans
        spans += [raw[a:b] for a, b in ([at] if at is not None else logprob_spans.skimmed_spans(raw))]
    assert spans
    for span in spans:
        assert check_against_python(span) is not None
