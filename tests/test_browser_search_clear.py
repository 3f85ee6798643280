"""A cleared search clears, and a new search lists its own hits only, even when Streamlit reports
the search's run as cut short (headless Chromium, the bundled samples).

When another fragment's run starts before a run's end has reached the browser (a followed trace's
tick, views/state/live.py, every second), Streamlit's server turns that end into "finished early for
rerun" (``forward_msg_queue._update_script_finished_message``) and the browser then keeps the
elements the run did not draw again: the hits of a search just cleared stayed listed. The race needs
a loaded machine and a large trace to be seen (2 or 3 clears in 14 on the 5,000-call bench trace);
here the page's websocket is routed and every fragment run's end is turned into that message while
``Downgrade.on``, so each step meets the race."""

from __future__ import annotations

import re

import pytest
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from tests.browser import browser_page, require_chromium, running_app, wait_ready
from tests.test_browser_nav import SESSION, settled

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives the app in headless Chromium

HITS = ".st-key-rg-search-hits button"


@pytest.fixture(scope="module")
def samples_app():
    require_chromium()
    with running_app() as url:
        yield url


class Downgrade:
    """Routes the page's websocket; while ``on``, the server's "fragment run finished" reaches the
    page as "finished early for rerun", as Streamlit sends it when a tick's run starts meanwhile."""

    def __init__(self, page) -> None:
        self.on = False
        self.downgraded = 0
        page.route_web_socket(re.compile(r".*/_stcore/stream"), self._route)

    def _route(self, ws) -> None:
        server = ws.connect_to_server()
        ws.on_message(server.send)
        server.on_message(lambda message: ws.send(self._rewrite(message)))

    def _rewrite(self, message):
        if not self.on or isinstance(message, str):
            return message
        msg = ForwardMsg()
        msg.ParseFromString(message)
        if (
            msg.WhichOneof("type") != "script_finished"
            or msg.script_finished != ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY
        ):
            return message
        msg.script_finished = ForwardMsg.FINISHED_EARLY_FOR_RERUN
        self.downgraded += 1
        return msg.SerializeToString()


def search(page, text: str) -> None:
    box = page.get_by_label("Search this rollout")
    box.fill(text)
    box.press("Enter")


def listed(page) -> list[str]:
    return page.locator(HITS).all_inner_texts()


def test_a_search_cleared_or_replaced_while_a_tick_runs_lists_only_its_own_hits(samples_app):
    with browser_page(width=1440, height=900) as page:
        race = Downgrade(page)
        page.goto(f"{samples_app}/?session={SESSION}")
        wait_ready(page, timeout=180_000)
        search(page, "config")
        page.locator(HITS).first.wait_for(timeout=90_000)
        settled(page)
        many = listed(page)
        race.on = True
        # a new search with fewer calls: the old search's extra hits go
        search(page, "KeyError")
        page.wait_for_function(
            "(n) => { const b = document.querySelectorAll('.st-key-rg-search-hits button');"
            " return b.length > 0 && b.length < n && Array.from(b).every(e => e.textContent.includes('KeyError')); }",
            arg=len(many),
            timeout=30_000,
        )
        settled(page)
        assert race.downgraded >= 1  # the run's end did reach the page cut short
        assert all("KeyError" in hit for hit in listed(page))
        # cleared: no hit is left listed, nor a hit count
        before = race.downgraded
        search(page, "")
        page.wait_for_function("() => !document.querySelector('.st-key-rg-search-hits button')", timeout=30_000)
        settled(page)
        assert race.downgraded > before
        assert "hit(s) in" not in page.inner_text("body")
        # and searched again, the hits come back
        search(page, "KeyError")
        page.locator(HITS).first.wait_for(timeout=30_000)
        assert all("KeyError" in hit for hit in listed(page))


def test_the_box_clear_button_and_esc_clear_the_search(samples_app):
    with browser_page(width=1440, height=900) as page:
        page.goto(f"{samples_app}/?session={SESSION}")
        wait_ready(page, timeout=180_000)
        clear = page.get_by_role("button", name="Clear entry")
        assert clear.count() == 0  # no clear button while the box is empty
        search(page, "KeyError")
        page.locator(HITS).first.wait_for(timeout=90_000)
        settled(page)
        clear.click()
        page.wait_for_function("() => !document.querySelector('.st-key-rg-search-hits button')", timeout=30_000)
        settled(page)
        assert page.get_by_label("Search this rollout").input_value() == ""
        assert "hit(s) in" not in page.inner_text("body")
        # Esc in the box: the search is cleared too (the keyboard bridge, views/panels/keyboard)
        search(page, "KeyError")
        page.locator(HITS).first.wait_for(timeout=30_000)
        settled(page)
        page.get_by_label("Search this rollout").press("Escape")
        page.wait_for_function("() => !document.querySelector('.st-key-rg-search-hits button')", timeout=30_000)
        settled(page)
        assert page.get_by_label("Search this rollout").input_value() == ""
