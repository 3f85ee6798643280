"""Where a call is drawn in a DAG figure (pure): its own marker, or its collapsed chain's handle.

Entry points: ``Targets`` (made by the figure, views/builders/dag/figure.py: each drawn call's
point and each folded call's chain handle) and ``drawn_point(figure, index)`` (read back from a
figure's ``calls`` trace, for a figure built earlier or changed by the live view).

Where it sits: between the figure and what is drawn over it (rings.py); the DAG panel and the
live view (views/panels/graph.py, views/state/live.py) ask whether a call is in view.
"""

from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go


@dataclass(frozen=True, slots=True)
class Targets:
    """Where a ring for a call goes in a figure: ``nodes``, each drawn call's point; ``chains``,
    each call folded into a drawn collapsed chain -> that chain's handle (its middle)."""

    nodes: dict[int, tuple[float, float]]
    chains: dict[int, tuple[float, float]]

    def point(self, index: int) -> tuple[float, float] | None:
        """The call's own point, else its chain's handle, else None (not drawn: outside a focus)."""
        return self.nodes.get(index) or self.chains.get(index)


def drawn_point(fig: go.Figure, index: int) -> tuple[float, float] | None:
    """Where call ``index`` (arrival index) is drawn in the figure's ``calls`` trace, or None when it
    is not drawn (inside a collapsed chain: point k is not call k, the trace's customdata holds each
    point's call)."""
    nodes = next((t for t in fig.data if t.name == "calls"), None)
    if nodes is None or nodes.x is None:
        return None
    drawn = list(nodes.customdata) if nodes.customdata is not None else list(range(len(nodes.x)))
    if index not in drawn:
        return None
    k = drawn.index(index)
    return float(nodes.x[k]), float(nodes.y[k])
