"""The "Filter calls" panel in headless Chromium (the bundled samples): its controls are drawn
only while the expander is open, and a filter chosen there stays on when it is closed (the note
above the DAG) and is shown again in its control when it is opened (views/panels/find.py)."""

from __future__ import annotations

import pytest

from tests.support.browser import browser_page, require_chromium, running_app, screenshot, settle, wait_ready

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives the app in headless Chromium

IDLE = "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
CONTROLS = "(n) => document.querySelectorAll('[data-testid=stMultiSelect]').length === n"


def test_a_filter_stays_on_when_its_panel_is_closed_and_shows_when_opened(tmp_path):
    require_chromium()
    with running_app() as url, browser_page(1440, 900) as page:
        page.goto(url)
        wait_ready(page)
        title = page.get_by_text("Filter calls", exact=True)
        settle(page)
        others = page.locator("[data-testid=stMultiSelect]").count()  # elsewhere on the page (closed: none here)
        title.click()
        page.wait_for_function(CONTROLS, arg=others + 6, timeout=60_000)
        page.wait_for_function(IDLE, timeout=60_000)
        role = page.locator("[data-testid=stMultiSelect]").filter(has_text="Role").first
        role.click()
        page.get_by_role("option", name="discarded (6)").click()
        page.get_by_text("Filter on: 6 of 25 calls match").wait_for(timeout=60_000)
        page.keyboard.press("Escape")
        title.click()  # closed: the controls go, the filter stays
        page.wait_for_function(CONTROLS, arg=others, timeout=60_000)
        page.wait_for_function(IDLE, timeout=60_000)
        assert page.get_by_text("Filter on: 6 of 25 calls match").count() == 1
        title.click()  # opened again: the control shows the value the filter uses
        page.wait_for_function(CONTROLS, arg=others + 6, timeout=60_000)
        page.wait_for_function(IDLE, timeout=60_000)
        shown = page.locator("[data-testid=stMultiSelect]").filter(has_text="discarded (6)")
        assert shown.count() == 1  # the Role control shows the value the filter uses
        assert page.get_by_text("6 of 25 calls match").count() >= 1
        screenshot(page, "filters-reopened")
