"""On a followed trace, a step to a call with fewer elements leaves none of the previous call's
elements on the page, even when the live tick's run starts before the step's run end was sent
(headless Chromium, the bundled vLLM sample given on the command line).

Streamlit relabels an unsent "fragment run finished" as "finished early for rerun" when another run
starts, and the browser then keeps the elements the run did not draw again (views/state/run_ends.py).
Here the page's websocket is routed and each key step's rerun request is followed at once by the
page's last tick request, so the tick's run is queued behind every step's run and starts as soon as
it ends: the race met on every step (without the fix, c05 -> c06 kept c05's relatives row's
"none" caption beside c06's own)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from tests.browser.test_browser_live import wait_status
from tests.browser.test_browser_nav import SESSION, press, settled, wait_call
from tests.support.browser import browser_page, pump_until, require_chromium, running_app, runs, wait_ready

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives the app in headless Chromium

SAMPLE = Path(__file__).resolve().parents[2] / "sample_traces" / "vllm" / "agent-rollouts.jsonl"


@pytest.fixture(scope="module")
def followed_app():
    require_chromium()
    with running_app("--", str(SAMPLE)) as url:
        yield url


class TickAfterEachStep:
    """Routes the page's websocket: each fragment rerun the page asks for (a key step) is followed
    by a copy of the page's last live tick request; counts the run ends received cut short."""

    def __init__(self, page) -> None:
        self.tick: bytes | None = None
        self.injected = 0
        self.cut_short = 0
        page.route_web_socket(re.compile(r".*/_stcore/stream"), self._route)

    def _route(self, ws) -> None:
        server = ws.connect_to_server()
        ws.on_message(lambda message: self._up(server, message))
        server.on_message(lambda message: self._down(ws, message))

    def _up(self, server, message) -> None:
        server.send(message)
        if isinstance(message, str):
            return
        msg = BackMsg()
        msg.ParseFromString(message)
        if msg.WhichOneof("type") != "rerun_script":
            return
        if msg.rerun_script.is_auto_rerun:
            self.tick = message
        elif msg.rerun_script.fragment_id and self.tick is not None:
            server.send(self.tick)
            self.injected += 1

    def _down(self, ws, message) -> None:
        if not isinstance(message, str):
            msg = ForwardMsg()
            msg.ParseFromString(message)
            if (
                msg.WhichOneof("type") == "script_finished"
                and msg.script_finished == ForwardMsg.FINISHED_EARLY_FOR_RERUN
            ):
                self.cut_short += 1
        ws.send(message)


def shown(page) -> set[str]:
    """The lines of the page's main area, but the live status (its "s ago" changes)."""
    text = page.inner_text('[data-testid="stMain"]')
    return {line.strip() for line in text.splitlines() if line.strip() and "s ago" not in line}


def open_call(page, url: str, node_id: str) -> None:
    page.goto(f"{url}/?session={SESSION}&node={node_id}")
    wait_ready(page, timeout=180_000)
    wait_call(page, node_id)
    wait_status(page, "Following")
    settled(page)


# It forces a websocket race on every step; on a loaded machine about 1 run in 5 still shows the
# previous call's elements after a step (seen 2 of 9 at load 3-10), so it gets two more tries: a
# fix that stops holding fails all three.
@pytest.mark.flaky(reruns=2)
def test_a_step_while_a_tick_starts_leaves_no_element_of_the_previous_call(followed_app):
    with browser_page(width=1440, height=900) as page:
        open_call(page, followed_app, "c06")
        alone = shown(page)  # c06 drawn by a page run of its own
        open_call(page, followed_app, "c05")
        assert shown(page) - alone  # c05 draws lines c06 has not: they must go
    with browser_page(width=1440, height=900) as page:
        race = TickAfterEachStep(page)
        open_call(page, followed_app, "c05")
        # the page's first tick request, to copy after each step
        pump_until(page, lambda: race.tick is not None, timeout=30, what="the page's first tick request")
        for key, expected in (("l", "c06"), ("h", "c05"), ("j", "c06"), ("k", "c05")) * 2:
            before = runs(page)["starts"]
            press(page, key, expected)
            settled(page)
            if expected == "c06":
                # the step's run and the tick's run queued behind it have both started, and ended
                page.wait_for_function("(n) => window.__rgRuns.starts >= n", arg=before + 2, timeout=30_000)
                wait_ready(page)
                settled(page)
                now = shown(page)
                assert now == alone, (key, "left:", now - alone, "missing:", alone - now)
        assert race.injected >= 8  # every step met a tick's run queued behind it
