"""`rollout-graph view` reads the command-line traces as the server starts (views/serve.py): the
page it serves is whole (the keyboard component, which is left to the first page run, works) and
shows the trace."""

from __future__ import annotations

import pytest

from tests.browser.test_browser_nav import press, wait_call
from tests.support.browser import browser_page, require_chromium, running_app, wait_ready
from tests.support.builders import Turn, jsonl, vllm_chat

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives the app in headless Chromium


def test_the_view_command_serves_the_trace_it_read_ahead(tmp_path, monkeypatch):
    require_chromium()
    monkeypatch.setenv("ROLLOUT_GRAPH_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "traces"
    folder.mkdir()
    prompt, turns = [1, 2, 3], []
    for i in range(6):  # one conversation: each call continues the last one's reply
        turns.append(Turn(f"a{i}", list(prompt), [10 + i]))
        prompt += [10 + i, 20 + i]
    (folder / "t.jsonl").write_bytes(jsonl([vllm_chat(t) for t in turns]))
    with running_app(str(folder), via_cli=True) as url, browser_page() as page:
        page.goto(f"{url}/?session=s1&node=a2")
        wait_ready(page, timeout=180_000)  # no element left waiting for its code
        wait_call(page, "a2")
        press(page, "j", "a3")  # the keyboard component was registered in the page run
