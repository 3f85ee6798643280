"""rollout-graph: load captured LLM-agent traces, link calls by exact token prefix, and derive
training sequences, roles and findings. Pure library: no UI imports.

The documented entry points are re-exported here (see docs/python-api.md)::

    import graph
    rollouts = graph.load("sample_traces/vllm")
    rollout = rollouts["fix-config-bug"]
"""

__version__ = "0.2.0"

from graph.core.rollout import Rollout, analyse  # noqa: E402
from graph.ingest.loading import load_paths, load_sources  # noqa: E402
from graph.ingest.reading import Source  # noqa: E402

__all__ = ["Rollout", "Source", "__version__", "analyse", "load_paths", "load_sources"]
