"""A trace whose ids carry Markdown and HTML opens in the app without any of it becoming live:
no remote image, no link, no HTML from trace text in any Markdown-rendering element."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from streamlit.testing.v1 import AppTest

from tests.support.builders import Turn, vllm_chat, write

APP = str(Path(__file__).resolve().parents[2] / "app.py")
IMAGE = "![p](https://evil.test/pixel.png)"
LINK = "[docs](https://evil.test/x)"
LIVE = re.compile(r"(?<!\\)\]\(|(?<!\\)<img|(?<!\\)<a ")


def test_hostile_ids_never_become_markdown(monkeypatch, tmp_path):
    session = f"s {IMAGE}"
    turns = [
        Turn(IMAGE, [1, 2, 3], [4, 5], session=session),
        Turn(LINK, [1, 2, 3, 4, 5, 6], [7], session=session),
        Turn(f"retry {LINK}", [1, 2, 3, 4, 5, 6], [8], session=session),
        Turn("c3 :red[x] <img src=x>", [1, 2, 3, 4, 5, 6, 7, 9], [10], finish="length", session=session),
        Turn("title **b**", [50, 51], [52], session=session),
    ]
    folder = tmp_path / "hostile"
    folder.mkdir()
    write(folder / "![p](evil.test:pixel.png).jsonl", [vllm_chat(t) for t in turns])
    monkeypatch.setattr(sys, "argv", ["app.py", str(folder)])
    at = AppTest.from_file(APP, default_timeout=120).run()
    assert not at.exception, [e.value for e in at.exception]
    texts = [e.value for kind in ("markdown", "caption", "warning", "info", "success", "error") for e in at.get(kind)]
    texts += [e.label for e in at.expander] + [t.label for t in at.tabs]
    texts += [b.proto.label for b in at.button] + [b.proto.help for b in at.button]
    assert texts
    live = [t for t in texts if LIVE.search(t)]
    assert not live, live
    # The guide's buttons name the calls: with their text intact, only escaped.
    helps = " ".join(b.proto.help for b in at.button)
    assert "evil\\.test" in helps or "title" in helps
