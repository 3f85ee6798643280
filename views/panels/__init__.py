"""Panels: the parts of a page a user sees, one ``render()`` each.

A screen (views/screens/) composes them; no panel imports another (tests/project/test_layers.py);
what two panels share lives in views/builders/ (pure) or views/state/ (session)."""
