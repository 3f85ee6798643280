"""Keys, search and the selection rerun only what they change (headless Chromium, the bundled
samples): the explorer's selection view is one Streamlit fragment (views/screens/explorer.py), so
a j/k step or a search sends the browser the DAG, the call's detail and the hits, and never the
sidebar, the headline or the findings triage again; the DAG keeps its view, only the ring moves.

What the server sends is read from the websocket frames themselves (Streamlit sends every element
a run draws): a frame holding the headline's tiles means the whole page ran again."""

from __future__ import annotations

import pytest

from tests.browser.test_browser_nav import SESSION, open_call, press, settled, wait_call
from tests.support.browser import (
    DAG_JS,
    browser_page,
    pump_until,
    require_chromium,
    running_app,
    wait_ready,
    wait_rings,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives the app in headless Chromium

# Text only a whole-page run sends: the headline's tiles, the sidebar, the findings triage, the call
# picker (a list of every call).
OUTSIDE = (
    b"broken replays",
    "FATAL · WARN".encode(),
    b"Show whitespace in token views",
    b"Go to a call: pick it from the list or type its id",
)


@pytest.fixture(scope="module")
def samples_app():
    require_chromium()
    with running_app() as url:
        yield url


class Frames:
    """The websocket frames the server sent to the page since the last ``take``."""

    def __init__(self, page) -> None:
        self.frames: list[bytes] = []
        page.on("websocket", lambda ws: ws.on("framereceived", self._add))

    def _add(self, payload) -> None:
        self.frames.append(payload if isinstance(payload, bytes) else payload.encode())

    def take(self) -> bytes:
        sent, self.frames = b"".join(self.frames), []
        return sent


def dag_view(page) -> dict:
    """What the DAG draws and where: its view's revision, the calls' points, the ringed call."""
    return page.evaluate(
        DAG_JS
        + """() => { const gd = dag(); const calls = gd._fullData[1];
            const ring = (gd._fullLayout.shapes || []).find(s => s.name === 'rg-ring-selected');
            return {uirevision: gd.layout.uirevision, x: Array.from(calls.x), y: Array.from(calls.y),
                    ids: Array.from(calls.customdata || []), ring: ring ? [ring.xanchor, ring.yanchor] : null}; }"""
    )


def test_a_key_step_reruns_only_the_selection_view(samples_app):
    with browser_page(height=1200) as page:
        frames = Frames(page)
        open_call(page, samples_app, "c05")
        before = dag_view(page)
        frames.take()
        press(page, "j", "c06")
        wait_rings(page, [5])
        sent = frames.take()
        assert b"c06" in sent  # the new call's detail was sent
        for text in OUTSIDE:
            assert text not in sent, text  # ... and nothing outside the selection view
        after = dag_view(page)
        # the figure is the same (same view, same points): only the ring moved, onto c06
        assert after["uirevision"] == before["uirevision"]
        assert (after["x"], after["y"], after["ids"]) == (before["x"], before["y"], before["ids"])
        k = after["ids"].index(5)
        assert after["ring"] == [after["x"][k], after["y"][k]] != before["ring"]
        # the control: a sidebar toggle reruns the whole page, and its frames do hold the headline
        page.get_by_text("Show whitespace in token views").click()
        got = [b""]

        def whole_page() -> bool:
            got[0] += frames.take()
            return all(text in got[0] for text in OUTSIDE)

        pump_until(page, whole_page, timeout=60, what="the whole page's frames")


def test_a_search_reruns_only_the_selection_view(samples_app):
    with browser_page(height=1300) as page:
        frames = Frames(page)
        page.goto(f"{samples_app}/?session={SESSION}")
        wait_ready(page, timeout=180_000)
        frames.take()
        box = page.get_by_role("searchbox", name="Search this rollout")
        box.fill("KeyError")
        box.press("Enter")
        page.locator(".st-key-rg-search-hits button").first.wait_for(timeout=90_000)
        settled(page)
        sent = frames.take()
        assert b"KeyError" in sent and b"hit(s) in" in sent
        for text in OUTSIDE:
            assert text not in sent, text
        # a hit opens its call: still the selection view alone
        page.locator(".st-key-rg-search-hits button").filter(has_text="c01 · #1").first.click()
        wait_call(page, "c01")
        sent = frames.take()
        assert b"c01" in sent
        for text in OUTSIDE:
            assert text not in sent, text
