"""The explorer on a reopen from the persistent cache (entry format 2), in headless Chromium at
1440x900: a first server reads the bundled samples and writes their cache entry after the first
paint; a second server finds it and draws the same call, whose top-k alternatives are read from the
entry only when the token inspector shows them (graph/ingest/load/cache.py)."""

from __future__ import annotations

import os

import pytest

from rollout_graph.ingest.load import cache
from tests.support.browser import ARTIFACTS, browser_page, require_chromium, running_app, wait_ready
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives the app in Chromium

WIDTH, HEIGHT = 1440, 900
CALL = "/?session=fix-config-bug&node=c07"


def _lowest_logprob_alternatives(page) -> str:
    page.wait_for_selector(".rg-node-title", timeout=60_000)
    page.get_by_role("tab", name="Tokens").first.click()
    page.get_by_role("button", name="Lowest logprob").first.click()
    inspector = page.locator("[class*='st-key-rg-inspector'] pre").first
    inspector.wait_for(timeout=30_000)
    return inspector.inner_text()


def test_a_reopened_trace_shows_the_alternatives_read_from_the_entry(tmp_path, monkeypatch):
    require_chromium()
    folder = tmp_path / "cache"
    monkeypatch.setenv(cache.ENV_DIR, str(folder))
    with running_app() as url, browser_page(WIDTH, HEIGHT) as page:
        page.goto(url + CALL)
        wait_ready(page)
        first = _lowest_logprob_alternatives(page)
        # the entry is written once the server is quiet after the paint
        wait_until(lambda: any(folder.glob(f"v{cache.FORMAT}-*/meta.json")), timeout=120, what="the cache entry")
    (entry,) = folder.glob(f"v{cache.FORMAT}-*")
    assert (entry / "top.bin").stat().st_size > 0
    os.utime(entry, (1, 1))  # a reopen marks the entry used: the second server's data came from it
    with running_app() as url, browser_page(WIDTH, HEIGHT) as page:
        page.goto(url + CALL)
        wait_ready(page)
        again = _lowest_logprob_alternatives(page)
        assert "top 1" in again and again == first
        assert "cannot read the alternatives" not in page.inner_text("body")
        assert "Traceback" not in page.inner_text("body")
        assert entry.stat().st_mtime > 1 and list(folder.glob("v*")) == [entry]
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.mouse.move(0, 0)
        page.locator("[class*='st-key-rg-inspector']").first.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "cache-reopen-alternatives.png"))
