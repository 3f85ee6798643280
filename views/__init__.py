"""The Streamlit app (import name ``rollout_graph.ui``): the explorer, Corpus audit, Compare and Run pages.

Layout (docs/architecture.md, "views/"): ``app.py`` wires the pages, ``screens/`` holds one page
script each, ``panels/`` the parts a user sees (one ``render()`` each), ``builders/`` the pure
figures and HTML, ``state/`` session keys, sources and caches. ``serve.py`` is the server
``rollout-graph view`` starts. The library never imports this package."""
