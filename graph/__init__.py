"""rollout-graph: load captured LLM-agent traces, link calls by exact token prefix, and derive
training sequences, roles and findings. Pure library: no UI imports."""

from graph.loading import load_paths, load_sources
from graph.reading import Source
from graph.rollout import Rollout, analyse

__all__ = ["Rollout", "Source", "analyse", "load_paths", "load_sources"]
