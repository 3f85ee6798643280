"""Comparisons of token-id arrays that skip work the arrays' memory already answers.

A loader's prompts of one conversation are read-only views of one id arena from the same start
(rollout_graph.ingest.shortcuts.id_arrays): two arrays that start at the same place in memory, with the same
strides and dtype, hold the same ids up to the shorter one's length, so their shared prefix is
known without reading them. Everything here gives exactly what the plain numpy comparison gives
(tests/core/test_linking_shared.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def start_of(ids: np.ndarray) -> tuple[int, tuple[int, ...], Any]:
    """Where an array's ids start in memory and how they are read (strides, dtype): two arrays
    with the same start read the same ids up to the shorter one's length. (``ctypes.data`` is
    the address ``__array_interface__`` gives, in half the time: the linker asks it of every call.)"""
    return ids.ctypes.data, ids.strides, ids.dtype


def same_memory(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` and ``b`` are views of one array that start at the same place and are read
    the same way (a shared prefix of ``min(len(a), len(b))`` ids, known without reading them).
    False says nothing: the ids are compared. Views of different arrays are told apart by their
    base alone (cheaper than reading where they start)."""
    base = a.base
    return base is not None and base is b.base and start_of(a) == start_of(b)


def same_ids(a: np.ndarray, b: np.ndarray) -> bool:
    """``np.array_equal(a, b)`` for 1-d id arrays, without its conversions: the lengths first, the
    ids not read when both are the same memory, and two integer arrays of one dtype compared by
    their bytes (equal bytes are equal ids there: a copy and a memcmp, a tenth of the elementwise
    comparison's overhead)."""
    if a.shape != b.shape:
        return False
    if a.shape[0] == 0 or same_memory(a, b):
        return True
    if a.dtype == b.dtype and a.dtype.kind in "iu":
        return bool(a.tobytes() == b.tobytes())
    return bool((a == b).all())
