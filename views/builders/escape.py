"""The one escaper lives in the library (``rollout_graph.escape``, shared with the HTML bundle):
this module re-exports it for the UI's older imports. New code imports ``rollout_graph.escape``."""

from rollout_graph.escape import BIDI, CONTROLS, WORD_JOINER, html_text, md, md_escape, plot, visible

__all__ = ["BIDI", "CONTROLS", "WORD_JOINER", "html_text", "md", "md_escape", "plot", "visible"]
