"""The roots' prompt fingerprint (graph/core/topology.py ``_fingerprint``, the bucket of a retried
first call's search) samples the prompt with one gather at indices made once per length: it is
exactly the first, middle and last 16 ids joined, at every length (the short ones overlap),
dtype and stride, so equal prompts still get equal prints."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout_graph.core.topology import _fingerprint
from tests.support.builders import examples


def _three_slices(ids: np.ndarray) -> tuple[int, int]:
    n, mid = ids.shape[0], ids.shape[0] // 2
    sample = np.concatenate([ids[:16], ids[max(0, mid - 8) : mid + 8], ids[-16:]]).astype(np.int64, copy=False)
    return n, hash(sample.tobytes())


@settings(max_examples=examples(1000), deadline=None)
@given(st.lists(st.integers(-(2**31), 2**31 - 1), max_size=80), st.sampled_from(["int32", "int64", "strided"]))
def test_the_fingerprint_is_the_three_slices_joined(ids, kind):
    a = np.array(ids, dtype=np.int32)
    shaped = a.astype(np.int64) if kind == "int64" else np.repeat(a, 2)[::2] if kind == "strided" else a
    assert _fingerprint(shaped) == _three_slices(shaped) == _three_slices(a)
