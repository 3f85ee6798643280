"""rollout-graph: load captured LLM-agent traces, link calls by exact token prefix, and derive
training sequences, roles and findings. Pure library: no UI imports.

The documented API (docs/python-api.md)::

    import graph

    rollouts = graph.load("sample_traces/vllm")
    rollout = rollouts["fix-config-bug"]
    rollout.to_networkx(), rollout.nodes_frame(), rollout.sequences_frame()
"""

__version__ = "0.2.0"

from graph.api import Rollouts, load  # noqa: E402
from graph.core.records import Call, Finding, LoadResult, Skipped  # noqa: E402
from graph.core.rollout import Rollout, analyse  # noqa: E402
from graph.core.sequences import Sequence  # noqa: E402
from graph.core.types import Kind, Level, LinkedBy, Role  # noqa: E402
from graph.ingest.loading import load_paths, load_sources  # noqa: E402
from graph.ingest.reading import Source  # noqa: E402

__all__ = [
    "Call",
    "Finding",
    "Kind",
    "Level",
    "LinkedBy",
    "LoadResult",
    "Role",
    "Rollout",
    "Rollouts",
    "Sequence",
    "Skipped",
    "Source",
    "__version__",
    "analyse",
    "load",
    "load_paths",
    "load_sources",
]
