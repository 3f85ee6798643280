"""The rollout DAG (pure builders, no streamlit): a plotly figure, what the browser draws over it,
and its legend. One module per job, in the order a drawing flows:

- ``view.py``: which calls are drawn, folded into chains or laid out after a near miss, and where;
- ``geometry.py``: the default view's window and the px boxes of labels and the boxed id;
- ``labels.py``: each label placed where it overlaps nothing;
- ``figure.py``: ``dag_drawing`` / ``dag_figure``, the figure itself (traces and line shapes);
- ``targets.py``: where a call is drawn (its marker or its chain's handle);
- ``rings.py``: ``rings``, the selection and search-hit rings the browser draws over the figure;
- ``legend.py``: ``legend_html``.

Callers import from here: views/state/dag_figures.py caches the figure, views/panels/graph.py
draws it with its rings and legend, views/panels/compare.py draws two side by side.
"""

from rollout_graph.ui.builders.dag.figure import (
    CALLS,
    CHAINS,
    LABELS,
    MARKS_AXIS,
    OVERVIEW,
    SYMBOL_CODES,
    dag_drawing,
    dag_figure,
    line_segments,
)
from rollout_graph.ui.builders.dag.geometry import (
    CHAR_PX,
    LABEL_CHARS,
    PLOT_WIDTH,
    chain_label,
    label_box,
    selected_box,
)
from rollout_graph.ui.builders.dag.legend import legend_html
from rollout_graph.ui.builders.dag.rings import (
    HIT_R,
    MAX_HIT_RINGS,
    RING,
    RING_BOX,
    RING_COVER,
    RING_HIT,
    RING_SELECTED,
    RING_STEM,
    SELECTED_R,
    box_goes_below,
    hit_shapes,
    labels_under_box,
    rings,
    selection_shapes,
)
from rollout_graph.ui.builders.dag.targets import Targets, drawn_point
from rollout_graph.ui.builders.dag.view import DagView, acyclic, dag_view, laid_out_after, node_kind, subtree
from rollout_graph.ui.builders.palette import SELECTED_RING

_acyclic = acyclic  # the name tests/analysis/test_near_miss.py reads

__all__ = [
    "CALLS", "CHAINS", "CHAR_PX", "HIT_R", "LABELS", "LABEL_CHARS", "MARKS_AXIS", "MAX_HIT_RINGS", "OVERVIEW", "PLOT_WIDTH",
    "RING", "RING_BOX", "RING_COVER", "RING_HIT", "RING_SELECTED", "RING_STEM", "SELECTED_R", "SELECTED_RING", "SYMBOL_CODES",
    "DagView", "Targets", "acyclic", "box_goes_below", "chain_label", "dag_drawing", "dag_figure", "dag_view", "drawn_point",
    "hit_shapes", "label_box", "labels_under_box", "laid_out_after", "legend_html", "line_segments", "node_kind",
    "rings", "selected_box", "selection_shapes", "subtree",
]  # fmt: skip
