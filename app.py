"""rollout-graph explorer: ``streamlit run app.py [-- PATH ...]`` (or ``rollout-graph view``).

Wiring only; the pages live in views/screens/ and the panels in views/.
"""

from rollout_graph.ui.app import main

main()
