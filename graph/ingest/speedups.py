"""The optional C speedups of the cold load, or None where they are not built or switched off.

``rollout_graph.ingest._speedups`` (sources: graph/ingest/csrc/) is built by ``pip install``
when a C compiler is there (setup.py: an optional extension). Each of its functions reads one
thing exactly as the Python path reads it, or returns None and leaves it to that path, so a
result never depends on whether it is built: it changes only the time (docs/performance.md,
"Native speedups"). ``ROLLOUT_GRAPH_SPEEDUPS=off`` switches it off for a process (to compare the
two paths, or to rule it out when something looks wrong); tests/ingest/test_speedups_*.py hold each
function to the Python path it stands for.
"""

from __future__ import annotations

import os
from types import ModuleType

ABI = 2  # the functions this Python side calls (the module's ABI constant must match)
# A build without one of these (an old .so left in place by an editable install) is not used.
FUNCTIONS = (
    "sampled_entries",
    "plain_ids",
    "int32_ids",
    "gram_counts",
    "token_id_list",
    "first_difference",
    "identity_repeats",
)


def _load() -> ModuleType | None:
    if os.environ.get("ROLLOUT_GRAPH_SPEEDUPS", "").strip().lower() in {"off", "0", "no", "false"}:
        return None
    try:
        from rollout_graph.ingest import _speedups
    except ImportError:  # not built (no compiler at install time): the Python path
        return None
    if getattr(_speedups, "ABI", None) != ABI or not all(hasattr(_speedups, name) for name in FUNCTIONS):
        return None  # a stale build: the Python path (pip install -e . builds it again)
    return _speedups


native: ModuleType | None = _load()


def status() -> str:
    """Whether the speedups are in use, and if not why (tests/ingest/test_speedups_build.py)."""
    if native is not None:
        return "on"
    return "off (ROLLOUT_GRAPH_SPEEDUPS)" if os.environ.get("ROLLOUT_GRAPH_SPEEDUPS") else "off (not built)"
