"""The Corpus audit page: one row per rollout across many files.

A page script: views/panels/corpus.py draws all of it."""

import sys

from rollout_graph.ui.panels import corpus

corpus.render(cli_directories=sys.argv[1:])
