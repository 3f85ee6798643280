"""The corpus audit page: one row per rollout across many files."""

import sys

from rollout_graph.ui.panels import corpus

corpus.render(cli_directories=sys.argv[1:])
