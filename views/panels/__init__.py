"""Panels: one ``render()`` each, composed by the page scripts in ``screens/``; no panel imports another."""
