"""Issue 41 item 1 in Chromium: one visitor's catastrophic regular expression on a public deployment
(`rollout-graph view --public`) never freezes the server. While the first visitor's pattern runs
(in its capped child process, graph/analysis/patterns.py), the health endpoint answers and a second
visitor's page renders; the first visitor then reads why the search stopped, naming the limit."""

from __future__ import annotations

import os
import time
import urllib.request
from pathlib import Path

import pytest

from rollout_graph.analysis.patterns import ENV_SECONDS
from tests.support.browser import browser_page, require_chromium, running_app, track_runs, wait_ready
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives the app in Chromium

REDOS = r"(\w+\s?)*@@@"
SECONDS = 20  # the pattern's limit here: long enough to look at the server while it runs


def _pattern_children() -> list[int]:
    out = []
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and b"_pattern_child.py" in Path(f"/proc/{pid}/cmdline").read_bytes():
                out.append(int(pid))
        except OSError:
            continue
    return out


def _health(url: str) -> float:
    started = time.monotonic()
    with urllib.request.urlopen(f"{url}/_stcore/health", timeout=5) as response:
        assert response.read() == b"ok"
    return time.monotonic() - started


def test_a_catastrophic_regex_leaves_health_and_a_second_visitor_served(monkeypatch):
    require_chromium()
    monkeypatch.setenv(ENV_SECONDS, str(SECONDS))
    with running_app("--public", via_cli=True) as url, browser_page() as first:
        second = first.context.browser.new_context(viewport={"width": 1500, "height": 1100}).new_page()
        track_runs(second)  # a second visitor: its own browser context, its own session
        first.goto(f"{url}/?session=list-todos")
        wait_ready(first)
        first.get_by_text("Regex", exact=True).click()
        wait_ready(first)
        box = first.get_by_label("Search this rollout")
        box.fill(REDOS)
        box.press("Enter")
        wait_until(_pattern_children, timeout=60, what="the first visitor's pattern running")
        started = time.monotonic()

        # while it runs: the health check answers at once, again and again (before: no answer for
        # minutes), and a second visitor's page renders (before: not in 30 s)
        assert max(_health(url) for _ in range(5)) < 2.0
        second.goto(f"{url}/?session=list-todos")
        wait_ready(second, timeout=30_000)
        second.get_by_label("Search this rollout").wait_for(timeout=30_000)
        assert _health(url) < 2.0
        children = _pattern_children()  # the search's own child (the compile's check ended at once)
        assert children or time.monotonic() - started >= SECONDS, "the pattern ended before the checks ran"

        # the first visitor is told why, naming the limit; the child is gone
        first.get_by_text(f"took longer than {SECONDS} s").first.wait_for(timeout=120_000)
        assert (
            "ROLLOUT_GRAPH_SEARCH_REGEX_SECONDS"
            in first.get_by_text(f"took longer than {SECONDS} s").first.inner_text()
        )
        wait_until(lambda: not [p for p in _pattern_children() if p in children], timeout=30, what="the child killed")
