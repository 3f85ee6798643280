"""The explorer app's wiring: page config and navigation. Each page is a script in views/pages/.

Run by ``rollout-graph view`` (this file, found with importlib.resources) and by the top-level
``app.py`` (``streamlit run app.py``), so a checkout and an installed wheel start the same app.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from views import state

PAGES = Path(__file__).resolve().parent / "pages"


def main() -> None:
    """Configure the page and run the page the visitor chose."""
    st.set_page_config(page_title="rollout-graph", page_icon="🕸️", layout="wide")
    explorer = st.Page(PAGES / "explorer.py", title="Explorer", icon="🕸️", default=True)
    corpus = st.Page(PAGES / "corpus.py", title="Corpus audit", icon="📊", url_path="corpus")
    compare = st.Page(PAGES / "compare.py", title="Compare", icon="↔️", url_path="compare")
    st.session_state[state.PAGES] = {"explorer": explorer, "corpus": corpus, "compare": compare}
    st.navigation([explorer, corpus, compare], position="sidebar").run()


if __name__ == "__main__":
    main()
