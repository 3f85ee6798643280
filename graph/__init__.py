"""rollout-graph: load captured LLM-agent traces, link calls by exact token prefix, and derive
training sequences, roles and findings. Pure library: no UI imports.

The documented API (docs/python-api.md)::

    import rollout_graph as rg

    rollouts = rg.load("sample_traces/vllm")
    rollout = rollouts["fix-config-bug"]
    rollout.to_networkx(), rollout.nodes_frame(), rollout.sequences_frame()

The public names are imported when one of them is first used (PEP 562), not by ``import
rollout_graph`` itself: every module of the package imports this one first, and the command line
must be able to set up the process (``rollout_graph.cli``: one BLAS thread) before numpy loads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.3.0"

# Each public name and the module defining it; all are bound together on first use.
_EXPORTS = {
    "Rollouts": "rollout_graph.api",
    "load": "rollout_graph.api",
    "Call": "rollout_graph.core.records",
    "Finding": "rollout_graph.core.records",
    "LoadResult": "rollout_graph.core.records",
    "Skipped": "rollout_graph.core.records",
    "Rollout": "rollout_graph.core.rollout",
    "Sequence": "rollout_graph.core.sequences",
    "Kind": "rollout_graph.core.types",
    "Level": "rollout_graph.core.types",
    "LinkedBy": "rollout_graph.core.types",
    "Role": "rollout_graph.core.types",
    "Limits": "rollout_graph.ingest.limits",
    "load_paths": "rollout_graph.ingest.load.files",
    "load_sources": "rollout_graph.ingest.load.calls",
    "Source": "rollout_graph.ingest.files.sources",
    "analyse": "rollout_graph.pipeline",
}

__all__ = [
    "Call",
    "Finding",
    "Kind",
    "Level",
    "Limits",
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

if TYPE_CHECKING:
    from rollout_graph.api import Rollouts, load
    from rollout_graph.core.records import Call, Finding, LoadResult, Skipped
    from rollout_graph.core.rollout import Rollout
    from rollout_graph.core.sequences import Sequence
    from rollout_graph.core.types import Kind, Level, LinkedBy, Role
    from rollout_graph.ingest.files.sources import Source
    from rollout_graph.ingest.limits import Limits
    from rollout_graph.ingest.load.calls import load_sources
    from rollout_graph.ingest.load.files import load_paths
    from rollout_graph.pipeline import analyse


def _bind() -> None:
    import importlib

    for name, module in _EXPORTS.items():
        obj = getattr(importlib.import_module(module), name)
        # The public names answer to the facade (as httpx does): help(), reprs and docs say
        # ``rollout_graph.Rollout``, not the private module it is defined in.
        if getattr(obj, "__module__", "").startswith("rollout_graph."):
            try:
                obj.__module__ = "rollout_graph"
            except (AttributeError, TypeError):  # typing aliases (Literal) have no settable __module__
                pass
        globals()[name] = obj


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        _bind()
        return globals()[name]
    raise AttributeError(f"module 'rollout_graph' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
