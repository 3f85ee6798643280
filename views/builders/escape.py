"""Re-exports the one escaper (``rollout_graph.escape``, shared with the HTML bundle) for the UI's
older imports. New code imports ``rollout_graph.escape`` (docs/architecture.md, "One escaper")."""

from rollout_graph.escape import BIDI, CONTROLS, WORD_JOINER, html_text, md, md_escape, plot, visible

__all__ = ["BIDI", "CONTROLS", "WORD_JOINER", "html_text", "md", "md_escape", "plot", "visible"]
