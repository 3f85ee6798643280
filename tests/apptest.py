"""Shared helpers for Streamlit AppTest flows (the app run in-process, no browser)."""

from __future__ import annotations

import sys
from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parent.parent / "app.py")


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
