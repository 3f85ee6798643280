"""The app says which calls a search did not look at when the search index's byte budget
(``ROLLOUT_GRAPH_SEARCH_MAX_BYTES``, docs/limits.md "The search index") left some out: a bundled
rollout searched with a tiny budget shows the note under the search box, beside the hits of the
calls it did search."""

from __future__ import annotations

import pytest

from rollout_graph.analysis.search import ENV_MAX
from tests.support.browser import ARTIFACTS, browser_page, require_chromium, running_app, wait_ready

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives the app in Chromium


def test_a_search_over_the_budget_says_what_it_did_not_search(monkeypatch):
    require_chromium()
    monkeypatch.setenv(ENV_MAX, "3000")
    with running_app() as url, browser_page(1500, 1100) as page:
        page.goto(f"{url}/?session=fix-config-bug")
        wait_ready(page)
        box = page.get_by_role("searchbox", name="Search this rollout")
        box.fill("config")
        box.press("Enter")
        note = page.get_by_text("the search index holds at most 3,000 bytes per rollout").first
        note.wait_for(timeout=90_000)
        text = note.inner_text()
        assert text.startswith("Not searched: the ") and ENV_MAX in text
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "search-budget-note.png"))
