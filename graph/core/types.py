"""The vocabulary of the graph, as ``Literal`` types (one name per concept; see docs/semantics.md).

- A **call** (also "node" in the graph, "turn" in the JSON contract's counts) is one model call.
- ``Level``: how serious a finding is.
- ``Role``: what a training sequence (and a call on it) is for.
- ``Kind``: where a call sits in the graph.
- ``LinkedBy``: what linked a call to its parent.
"""

from __future__ import annotations

from typing import Literal

Level = Literal["FATAL", "WARN", "INFO"]
Role = Literal["agent", "auxiliary", "discarded"]
Kind = Literal["root", "fork", "leaf", "inner"]
LinkedBy = Literal["tokens", "messages", "document"]

ROOT: Kind = "root"
FORK: Kind = "fork"
LEAF: Kind = "leaf"
INNER: Kind = "inner"
KINDS: tuple[Kind, ...] = (ROOT, FORK, LEAF, INNER)
