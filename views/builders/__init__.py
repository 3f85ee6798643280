"""Pure builders (figures, HTML, layout, colour): they never import streamlit and never decide what a call is."""
