"""rollout-graph: load captured LLM-agent traces, link calls by exact token prefix, and derive
training sequences, roles and findings. Pure library: no UI imports.

The documented API (docs/python-api.md)::

    import rollout_graph as rg

    rollouts = rg.load("sample_traces/vllm")
    rollout = rollouts["fix-config-bug"]
    rollout.to_networkx(), rollout.nodes_frame(), rollout.sequences_frame()
"""

__version__ = "0.3.0"

from rollout_graph.api import Rollouts, load  # noqa: E402
from rollout_graph.core.records import Call, Finding, LoadResult, Skipped  # noqa: E402
from rollout_graph.core.rollout import Rollout  # noqa: E402
from rollout_graph.core.sequences import Sequence  # noqa: E402
from rollout_graph.core.types import Kind, Level, LinkedBy, Role  # noqa: E402
from rollout_graph.ingest.limits import Limits  # noqa: E402
from rollout_graph.ingest.loading import load_paths, load_sources  # noqa: E402
from rollout_graph.ingest.reading import Source  # noqa: E402
from rollout_graph.pipeline import analyse  # noqa: E402

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

# The public names answer to the facade (as httpx does): help(), reprs and docs say
# ``rollout_graph.Rollout``, not the private module it is defined in.
for _name in __all__:
    _obj = globals()[_name]
    if getattr(_obj, "__module__", "").startswith("rollout_graph."):
        try:
            _obj.__module__ = "rollout_graph"
        except (AttributeError, TypeError):  # typing aliases (Literal) have no settable __module__
            pass
del _name, _obj
