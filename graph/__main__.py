"""``python -m graph``: run the rollout-graph command line."""

from graph.cli import main

raise SystemExit(main())
