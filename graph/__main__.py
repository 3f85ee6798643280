"""``python -m rollout_graph``: run the rollout-graph command line."""

from rollout_graph.cli import main

raise SystemExit(main())
