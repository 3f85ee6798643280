"""Comparisons of token-id arrays that skip work the arrays' memory already answers.

A loader's prompts of one conversation are read-only views of one id arena from the same start
(rollout_graph.ingest.id_arrays): two arrays that start at the same place in memory, with the same
strides and dtype, hold the same ids up to the shorter one's length, so their shared prefix is
known without reading them. Everything here gives exactly what the plain numpy comparison gives
(tests/test_linking_shared.py, tests/test_near_miss_fast.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

_FIRST_BLOCK = 32  # ids compared first: most prompts compared differ within a few ids
_GROWTH = 8  # each next block this many times the last


def start_of(ids: np.ndarray) -> tuple[int, tuple[int, ...], Any]:
    """Where an array's ids start in memory and how they are read (strides, dtype): two arrays
    with the same start read the same ids up to the shorter one's length."""
    return ids.__array_interface__["data"][0], ids.strides, ids.dtype


def same_memory(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` and ``b`` are views of one array that start at the same place and are read
    the same way (a shared prefix of ``min(len(a), len(b))`` ids, known without reading them).
    False says nothing: the ids are compared. Views of different arrays are told apart by their
    base alone (cheaper than reading where they start)."""
    base = a.base
    return base is not None and base is b.base and start_of(a) == start_of(b)


def same_ids(a: np.ndarray, b: np.ndarray) -> bool:
    """``np.array_equal(a, b)`` for 1-d id arrays, without reading the ids when both are the same memory."""
    if a.shape != b.shape:
        return False
    return a.shape[0] == 0 or same_memory(a, b) or bool(np.array_equal(a, b))


def first_difference(a: np.ndarray, b: np.ndarray) -> int:
    """The first index where two 1-d arrays of one length differ (their length when they do not):
    compared a block at a time, the first block small, so arrays that differ early cost little
    however long they are; the same memory is not read at all."""
    n = int(a.shape[0])
    if n > _FIRST_BLOCK and same_memory(a, b):
        return n
    lo, size = 0, _FIRST_BLOCK
    while lo < n:
        hi = min(n, lo + size)
        diff = np.flatnonzero(a[lo:hi] != b[lo:hi])
        if diff.shape[0]:
            return lo + int(diff[0])
        lo, size = hi, size * _GROWTH
    return n
