"""The C id comparison (graph/ingest/csrc/id_compare.c, ``first_difference``) against numpy's, and the
near-miss pass's prefix functions with it on and off: int32 and int64 arrays, views at offsets,
strided and reversed views and mixed widths (None: numpy compares them), empty arrays, ids at the
widths' ends."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rollout_graph.analysis import near_miss
from rollout_graph.core.records import Call
from rollout_graph.ingest import speedups
from tests.support.builders import examples

pytestmark = pytest.mark.skipif(speedups.native is None, reason="the C speedups are not built")
CHECKED = settings(max_examples=examples(2000), deadline=None, suppress_health_check=[HealthCheck.too_slow])
EDGES = [0, 1, -1, 2**31 - 1, -(2**31)]


def numpy_first_difference(a: np.ndarray, b: np.ndarray) -> int:
    differ = np.flatnonzero(a != b)
    return int(differ[0]) if differ.shape[0] else a.shape[0]


@st.composite
def pairs(draw):
    n = draw(st.integers(0, 40))
    values = st.one_of(st.integers(-3, 3), st.sampled_from(EDGES))
    a = np.array(draw(st.lists(values, min_size=n, max_size=n)), dtype=np.int64)
    b = a.copy()
    for _ in range(draw(st.integers(0, 3))):
        if n:
            b[draw(st.integers(0, n - 1))] = draw(values)
    kinds = [np.int32, np.int64]
    a, b = a.astype(draw(st.sampled_from(kinds))), b.astype(draw(st.sampled_from(kinds)))
    how = draw(st.sampled_from(["whole", "offset", "strided", "reversed"]))
    if how == "offset" and n:
        cut = draw(st.integers(0, n))
        a, b = a[cut:], b[cut:]
    elif how == "strided":
        a, b = a[::2], b[::2]
    elif how == "reversed":
        a, b = a[::-1], b[::-1]
    return a, b


@CHECKED
@given(pairs())
def test_first_difference_is_numpys(pair):
    a, b = pair
    got = speedups.native.first_difference(a, b)
    contiguous = a.flags.c_contiguous and b.flags.c_contiguous
    if a.dtype == b.dtype and (contiguous or a.shape[0] <= 1):
        assert got == numpy_first_difference(a, b)
    else:
        assert got is None or got == numpy_first_difference(a, b)
    assert near_miss._first_difference(a, b) == numpy_first_difference(a, b)


def test_other_buffers_go_to_numpy():
    f = speedups.native.first_difference
    a = np.arange(6, dtype=np.int32)
    assert f(a, a.astype(np.int64)) is None  # mixed widths
    assert f(a, a[:5]) is None  # lengths differ
    assert f(a.astype(np.uint32), a.astype(np.uint32)) is None
    assert f(a.astype(np.float64), a.astype(np.float64)) is None
    assert f(a.reshape(2, 3), a.reshape(2, 3)) is None
    assert f(b"abc", b"abc") is None
    assert f(1, 2) is None
    with pytest.raises(TypeError):
        f(a)


@CHECKED
@given(pairs(), st.lists(st.integers(0, 3), max_size=4), st.lists(st.integers(0, 3), max_size=6))
def test_prefix_functions_on_and_off(pair, sampled, tail):
    """``common_prefix`` and ``_breaks_inside_reply`` answer the same with the C comparison off:
    prompts that hold the earlier prompt or not, then its sampled ids, a changed reply or less."""
    a, b = pair
    earlier = Call(node_id="e", session_id="s", source="mem", line=1, shape="test")
    earlier.prompt_ids, earlier.sampled_ids = a, np.array(sampled, dtype=a.dtype)
    saved = speedups.native
    for prompt in (np.concatenate((b, np.array(tail, dtype=b.dtype))), np.concatenate((a, earlier.sampled_ids, tail))):
        answers = []
        try:
            for native in (saved, None):
                speedups.native = native
                answers.append(
                    (near_miss.common_prefix(earlier, prompt), near_miss._breaks_inside_reply(earlier, prompt))
                )
        finally:
            speedups.native = saved
        assert answers[0] == answers[1]
