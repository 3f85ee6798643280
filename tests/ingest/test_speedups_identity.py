"""The C identity-key scan (graph/ingest/csrc/identity_keys.c, ``identity_repeats``) against the regex it
stands for (``values/line._IDENTITY_KEY_AT``'s findall listing one key twice), and
``values/line._duplicate_identity_key`` with it on and off: keys overlapping and cut short, nested,
inside strings, escaped, next to ``tool_call_id``, at the line's ends, random and mutated bytes."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rollout_graph.ingest import speedups
from rollout_graph.ingest.values import line as reading
from tests.support.builders import examples

pytestmark = pytest.mark.skipif(speedups.native is None, reason="the C speedups are not built")
CHECKED = settings(max_examples=examples(3000), deadline=None, suppress_health_check=[HealthCheck.too_slow])

PIECES = [b'"session_id"', b'"call_id"', b'"node_id"', b'"session', b'"call', b'"node', b'_id"', b"_id", b'"']
PIECES += [
    b'session_id"',
    b'"tool_call_id"',
    b'\\"call_id\\"',
    b'"session_id""call_id"',
    b":1,",
    b"{",
    b"}",
    b"[",
    b"]",
]
PIECES += [b'"x":', b"_", b"id", b'""', b"\xff", b"\0", b'"Call_id"']


def regex_repeats(raw: bytes) -> bool:
    found = reading._IDENTITY_KEY_AT.findall(raw)
    return not (len(found) < 2 or len(set(found)) == len(found))


@CHECKED
@given(st.lists(st.one_of(st.sampled_from(PIECES), st.binary(max_size=4)), max_size=16))
def test_repeats_are_the_regex(pieces):
    raw = b"".join(pieces)
    assert speedups.native.identity_repeats(raw) == regex_repeats(raw)
    for cut in range(0, len(raw), max(1, len(raw) // 8)):
        assert speedups.native.identity_repeats(raw[cut:]) == regex_repeats(raw[cut:])
        assert speedups.native.identity_repeats(raw[:cut]) == regex_repeats(raw[:cut])


@CHECKED
@given(st.binary(max_size=200))
def test_random_bytes(raw):
    assert speedups.native.identity_repeats(raw) == regex_repeats(raw)


@CHECKED
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=12), st.data())
def test_duplicate_key_verdict_on_and_off(pieces, data):
    """Lines shaped as records: the verdict (which key, or None) is the same with the scan off."""
    keys = data.draw(st.lists(st.sampled_from(['"session_id"', '"call_id"', '"node_id"', '"a"']), max_size=4))
    body = ",".join(f"{k}:{i}" for i, k in enumerate(keys))
    raw = (
        "{" + body + (',"x":"' if body else '"x":"') + '\\"'.join(p.decode("latin-1") for p in pieces) + '"}'
    ).encode("latin-1")
    saved = speedups.native
    verdicts = []
    try:
        for native in (saved, None):
            speedups.native = native
            verdicts.append(reading._duplicate_identity_key(raw))
    finally:
        speedups.native = saved
    assert verdicts[0] == verdicts[1]


def test_types():
    with pytest.raises(TypeError):
        speedups.native.identity_repeats("text")  # type: ignore[arg-type]
    assert speedups.native.identity_repeats(b"") is False
    assert speedups.native.identity_repeats(b'"call_id""call_id"') is True
    assert speedups.native.identity_repeats(b'"call_id""call_i') is False
