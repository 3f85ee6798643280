"""The Compare page names both rollouts in Markdown: a session id carrying markup shows escaped
there, never as a link, an image or HTML (issue 28 item 6)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from streamlit.testing.v1 import AppTest

from rollout_graph.escape import md
from tests.support.builders import Turn, vllm_chat, write
from tests.support.hostile import MARKUP

PAGE = str(Path(__file__).resolve().parents[2] / "views" / "screens" / "compare.py")
LIVE = re.compile(r"(?<!\\)\]\(|(?<!\\)<img|(?<!\\)<script|(?<!\\)\*\*bold|https?://|www\.")


def test_compare_page_escapes_session_and_row_ids(monkeypatch, tmp_path):
    sessions = [f"A {MARKUP['image']} {MARKUP['autolink']}", f"B {MARKUP['html']} {MARKUP['bold']}"]
    leaf = f"leaf {MARKUP['script']} {MARKUP['www']}"
    records = []
    for s in sessions:
        records += [
            vllm_chat(Turn("c0", [1, 2, 3], [4], session=s)),
            vllm_chat(Turn(leaf, [1, 2, 3, 4, 5], [6], session=s)),
        ]
    folder = tmp_path / "t"
    folder.mkdir()
    write(folder / "t.jsonl", records)
    monkeypatch.setattr(sys, "argv", ["compare.py", str(folder)])
    at = AppTest.from_file(PAGE, default_timeout=120).run()
    assert not at.exception, [e.value for e in at.exception]
    texts = [e.value for e in at.markdown]
    named = [t for t in texts if t.startswith(("**A ·", "**B ·"))]
    assert named, texts
    assert any(md(sessions[0]) in t for t in named) and any(md(sessions[1]) in t for t in named)
    live = [t for t in named if LIVE.search(t)]
    assert not live, live
