"""Shared helpers for Streamlit AppTest flows (the app run in-process, no browser)."""

from __future__ import annotations

import sys
from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "app.py")


def app(monkeypatch, *paths: Path, **query) -> AppTest:
    monkeypatch.setattr(sys, "argv", ["app.py", *map(str, paths)])
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in query.items():
        at.query_params[key] = value
    return at.run()


def html_of(at: AppTest) -> str:
    return "\n".join(h.proto.body for h in at.get("html"))


def no_errors(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def pick_call(at: AppTest, node_id: str) -> AppTest:
    picker = next(s for s in at.selectbox if s.label == "Call")
    index = next(i for i, label in enumerate(picker.options) if label.startswith(node_id + " "))
    return picker.select(index).run()


def open_tab(at: AppTest, label: str) -> AppTest:
    """Choose a tab of the call's detail (as a click on it does: the tabs are stateful, built only
    when chosen) and rerun."""
    key = next(k for k in at.session_state.keys() if str(k).startswith("tabs-"))
    labels = [t.label for t in at.tabs]
    at.session_state[key] = next(t for t in labels if t == label or t.startswith(label + " ("))
    return at.run()
