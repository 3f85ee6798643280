"""Following traces while they grow: incremental reading, incremental linking, live events.

``graph.live.linking`` links each new call to the calls already there (and lets a late parent
adopt earlier children) with the same rules, and the same result, as :mod:`graph.core.linking`;
``graph.live.reading`` reads only the bytes appended to a file since the last look;
``graph.live.trace`` keeps the loaded sessions up to date from both; ``graph.live.events`` turns
successive states into what ``rollout-graph tail`` prints. See docs/semantics.md (incremental
linking) and docs/cli.md (``tail``).
"""
