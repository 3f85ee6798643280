"""The C content-array scanner on vLLM 0.32's logprob entries, which carry ``bytes`` lists, held to
the Python path (tests/ingest/test_speedups_content.py ``check_against_python``).

vLLM 0.32 writes each entry as ``{"token":..,"logprob":..,"bytes":[..],"top_logprobs":[..]}`` and
each alternative as ``{"token":..,"logprob":..,"bytes":[..]}`` (``null`` where a token has no
bytes); the scanner reads that layout in its compact path (graph/ingest/csrc/logprob_entries.c
``skip_bytes``). Any other spelling of the list (spaces, a leading zero, four digits, a sign, a
fraction, another value) goes to the general path, which validates it as any JSON value: the
answer is the Python path's either way, or None.
"""

from __future__ import annotations

import json

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rollout_graph.ingest.shortcuts import logprob_entries
from rollout_graph.ingest.speedups import native
from tests.ingest.test_speedups_content import FILE, check_against_python, native_columns

pytestmark = pytest.mark.skipif(native is None, reason="the C speedups are not built")

ODD_BYTES = [
    "[01]",
    "[00]",
    "[1 ]",
    "[ 1]",
    "[1, 2]",
    "[1,]",
    "[,1]",
    "[,]",
    "[-1]",
    "[-0]",
    "[1.5]",
    "[1e2]",
    "[1000]",
    "[9999]",
    "[256]",
    '["a"]',
    "[[1]]",
    "[null]",
    "{}",
    "true",
    '"x"',
    "nul",
    "[1",
    "[",
    "",
    "[1]]",
    "[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20]",
]

byte_values = st.lists(st.integers(0, 255), max_size=20).map(lambda v: json.dumps(v, separators=(",", ":")))
bytes_text = byte_values | st.just("null") | st.just("[]") | st.sampled_from(ODD_BYTES)
token_text = st.integers(0, 200_000).map(lambda n: f"token_id:{n}") | st.text(max_size=4)
logprob_text = st.floats(-30, -1e-6).map(repr) | st.sampled_from(["-0.0", "-1e-05", "-1.5E+1", "0.0", "-1"])


@st.composite
def vllm_032_span(draw):
    """A content array in vLLM 0.32's layout, compact as it writes it, its ``bytes`` values drawn
    from valid lists, ``null`` and odd spellings; sometimes a key dropped or moved."""
    entries = []
    for _ in range(draw(st.integers(1, 4))):
        alts = []
        for _ in range(draw(st.integers(0, 3))):
            pairs = [
                ("token", json.dumps(draw(token_text))),
                ("logprob", draw(logprob_text)),
                ("bytes", draw(bytes_text)),
            ]
            if draw(st.integers(0, 9)) == 0:
                pairs = draw(st.permutations(pairs))
            alts.append("{" + ",".join(f'"{k}":{v}' for k, v in pairs) + "}")
        pairs = [
            ("token", json.dumps(draw(token_text))),
            ("logprob", draw(logprob_text)),
            ("bytes", draw(bytes_text)),
            ("top_logprobs", "[" + ",".join(alts) + "]"),
        ]
        if draw(st.integers(0, 9)) == 0:
            del pairs[draw(st.integers(0, 3))]
        if draw(st.integers(0, 9)) == 0:
            pairs = draw(st.permutations(pairs))
        entries.append("{" + ",".join(f'"{k}":{v}' for k, v in pairs) + "}")
    return ("[" + ",".join(entries) + "]").encode()


def _json(span: bytes) -> bool:
    try:
        orjson.loads(span)
    except orjson.JSONDecodeError:
        return False
    return True


@settings(deadline=None, max_examples=2000, suppress_health_check=[HealthCheck.too_slow])
@given(vllm_032_span())
@example(b'[{"token":"a","logprob":-0.5,"bytes":[97],"top_logprobs":[{"token":"a","logprob":-0.5,"bytes":[97]}]}]')
@example(b'[{"token":"a","logprob":-0.5,"bytes":null,"top_logprobs":[{"token":"a","logprob":-0.5,"bytes":null}]}]')
@example(b'[{"token":"a","logprob":-0.5,"bytes":[],"top_logprobs":[]}]')
@example(b'[{"token":"a","logprob":-0.5,"bytes":[01],"top_logprobs":[]}]')
@example(b'[{"token":"a","logprob":-0.5,"top_logprobs":[{"token":"a","logprob":-0.5,"bytes":[1,]}]}]')
@example(b'[{"token":"a","logprob":-0.5,"top_logprobs":[{"token":"a","logprob":-0.5,"bytes":[1000]}]}]')
@example(b'[{"token":"a","logprob":-0.5,"bytes":[1],"bytes":[2],"top_logprobs":[]}]')
@example(b'[{"token":"a","logprob":-0.5,"bytes":[1],"top_logprobs":[],"bytes":[2]}]')
def test_vllm_032_spans_read_as_the_python_path_reads_them(span):
    fast = check_against_python(span)
    if not _json(span):
        assert fast is None


@settings(deadline=None, max_examples=2000, suppress_health_check=[HealthCheck.too_slow])
@given(vllm_032_span(), st.data())
def test_cut_or_changed_spans_read_as_the_python_path_reads_them_or_not_at_all(span, data):
    raw = bytearray(span)
    for _ in range(data.draw(st.integers(1, 3))):
        if not raw:
            break
        i = data.draw(st.integers(0, len(raw) - 1))
        kind = data.draw(st.integers(0, 3))
        if kind == 0:
            del raw[i]
        elif kind == 1:
            raw.insert(i, data.draw(st.sampled_from(b'0123456789,[]{}" n-.e\x00')))
        elif kind == 2:
            del raw[i:]
        else:
            raw[i] = data.draw(st.integers(0, 255))
    span = bytes(raw)
    fast = native_columns(span)
    if fast is None:
        return
    assert _json(span), span
    check_against_python(span)


def _engine_span(rows: int, k: int, null: bool = False) -> bytes:
    entries = [
        {
            "token": f"token_id:{100 + i}",
            "logprob": -1.0 / (i + 3),
            "bytes": None if null else list(f"tok{i}".encode()),
            "top_logprobs": [
                {
                    "token": f"token_id:{100 + i + j}",
                    "logprob": -j - 0.25,
                    "bytes": None if null else list(f"token_id:{100 + i + j}".encode()),
                }
                for j in range(k)
            ],
        }
        for i in range(rows)
    ]
    return json.dumps(entries, separators=(",", ":")).encode()


@pytest.mark.parametrize("null", [False, True])
@pytest.mark.parametrize(("rows", "k"), [(1, 0), (3, 5), (400, 5), (50, 20)])
def test_the_engines_layout_is_read_by_the_scanner(rows, k, null):
    span = _engine_span(rows, k, null)
    fast = check_against_python(span)
    assert fast is not None and len(fast.tokens) == rows and fast.id_texts
    if k:  # alternatives present: the loader's sampled-only read, by the C path (not msgspec's)
        columns = logprob_entries._sampled_only(span, FILE, 0)
        assert columns is not None and columns.floats is not None


@pytest.mark.parametrize("odd", ODD_BYTES)
def test_odd_bytes_values_are_read_as_the_python_path_reads_them(odd):
    for span in (
        b'[{"token":"a","logprob":-0.5,"bytes":' + odd.encode() + b',"top_logprobs":[]}]',
        b'[{"token":"a","logprob":-0.5,"top_logprobs":[{"token":"b","logprob":-1.5,"bytes":' + odd.encode() + b"}]}]",
    ):
        fast = check_against_python(span)
        assert (fast is not None) == _json(span), span


LONG = [0, 7, 10, 99, 100, 255, 5, 0, 0, 123, 45, 6, 78, 9, 200, 1, 0, 31, 64, 128]


def _long_lists() -> list[str]:
    """A long list (several 16-byte blocks of the scanner), and each way of breaking it at each
    place: the checks carried from one block to the next meet every position."""
    valid = json.dumps(LONG, separators=(",", ":"))
    lists = [valid, "[" + ",".join("7" for _ in range(40)) + "]", "[" + ",".join("100" for _ in range(20)) + "]"]
    for at in range(1, len(valid) - 1):
        for insert in ("0", "5", ",", " ", "]", "a"):
            lists.append(valid[:at] + insert + valid[at:])
        lists.append(valid[:at] + valid[at + 1 :])
    return lists


@pytest.mark.parametrize("pad", range(17))
def test_bytes_lists_at_every_offset_read_as_the_python_path_reads_them(pad):
    token = json.dumps("x" * pad)
    for odd in [*_long_lists(), *ODD_BYTES, "[]", "null", "[0]", "[0,0]", "[255]"]:
        for span in (
            b'[{"token":' + token.encode() + b',"logprob":-0.5,"bytes":' + odd.encode() + b',"top_logprobs":[]}]',
            b'[{"token":"a","logprob":-0.5,"top_logprobs":[{"token":'
            + token.encode()
            + b',"logprob":-1.5,"bytes":'
            + odd.encode()
            + b"}]}]",
        ):
            fast = check_against_python(span)
            assert (fast is not None) == _json(span), span
