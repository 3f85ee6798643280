"""Pure builders: figures, HTML, layout, colour and the numbers the panels show.

They never import streamlit, panels or state, never read the environment, and never decide what a
call is (the library does: graph/). Each module's docstring names its entry points; the two
largest jobs are packages split by step: ``dag/`` (the DAG figure) and ``mismatch/`` (the
trainer-vs-inference lens). Everything from a trace is escaped here (rollout_graph.escape)."""
