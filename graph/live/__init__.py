"""Following traces while they grow: incremental reading, incremental linking, live events.

``rollout_graph.live.linking`` links each new call to the calls already there (and lets a late parent
adopt earlier children) with the same rules, and the same result, as :mod:`rollout_graph.core.linking`;
``rollout_graph.live.reading`` reads only the bytes appended to a file since the last look;
``rollout_graph.live.trace`` keeps the loaded sessions up to date from both; ``rollout_graph.live.events`` turns
successive states into what ``rollout-graph tail`` prints. See docs/semantics.md (incremental
linking) and docs/cli.md (``tail``).
"""
