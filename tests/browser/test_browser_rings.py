"""The DAG's rings are drawn in the browser over an unchanged figure (headless Chromium): a j/k
step, a chart click and a search move the selection ring or the hit rings to the right calls
while plotly is never given a figure again (no ``Plotly.newPlot`` or ``Plotly.react``, the same
chart element); the rings survive a pan or zoom and a rerun; a key step to a call the view does
not show (inside a collapsed chain) still recentres the DAG with a new figure.

The trace: conversations of 12 calls (a root, 10 inner calls collapsed into one chain, a leaf),
each with a system prompt of its own ("agent 0", "agent 15", ...), and a 3-call subagent after
each (c0012..c0014 after the first; the second conversation is c0015..c0026)."""

from __future__ import annotations

import pytest

from rollout_graph.ui.builders.dag import CHAINS
from tests.browser.test_browser_dag import conversation_records
from tests.browser.test_browser_nav import press, settled, wait_call
from tests.support.browser import (
    DAG_JS,
    boxed,
    browser_page,
    chart_idle,
    hovered,
    node_position,
    require_chromium,
    rings,
    running_app,
    screenshot,
    wait_ready,
    wait_rings,
)
from tests.support.builders import write

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives the app in headless Chromium

SESSION = "rings-300"

# Counts what plotly is asked to draw from here on, and marks the chart's element (a new figure
# mounts a new element: the mark is gone).
WATCH_JS = (
    DAG_JS
    + """() => { const P = window.Plotly; window.__rgDraws = 0;
    if (!P.__rgWatched) { ['newPlot', 'react'].forEach(name => { const f = P[name];
        P[name] = function (...a) { window.__rgDraws += 1; return f.apply(this, a); }; }); P.__rgWatched = true; }
    dag().__rgMark = 'same chart'; }"""
)
REDRAWN_JS = (
    DAG_JS + "() => ({draws: window.__rgDraws, same: dag().__rgMark === 'same chart', rev: dag().layout.uirevision})"
)


@pytest.fixture(scope="module")
def rings_app(tmp_path_factory):
    require_chromium()
    folder = tmp_path_factory.mktemp("rings")
    write(folder / "rings.jsonl", conversation_records(300, session=SESSION, chain=12, retry_every=0))
    with running_app(str(folder)) as url:
        yield url


def drawn(page, trace: int = 1) -> list[int]:
    return page.evaluate(DAG_JS + "(t) => Array.from(dag()._fullData[t].customdata || [])", trace)


def watch(page) -> None:
    settled(page)
    chart_idle(page)  # the client's rings of this run are drawn
    page.evaluate(WATCH_JS)


def redrawn(page) -> dict:
    return page.evaluate(REDRAWN_JS)


def click_call(page, index: int, node_id: str) -> None:
    """Click call ``index`` in the DAG until its detail opens: plotly takes a click on the point it
    last hovered, so the pointer rests on the call first (and once more on a loaded machine)."""
    for attempt in range(3):
        chart_idle(page)
        x, y = node_position(page, index)
        page.mouse.move(x, y)
        hovered(page, node_id, timeout=10_000 * (attempt + 1))
        page.mouse.click(x, y)
        try:
            page.wait_for_selector(f".rg-node-title:has-text('{node_id} ')", timeout=20_000 * (attempt + 1))
            settled(page)
            return
        except Exception:
            if attempt == 2:
                raise


def open_call(page, url: str, node_id: str) -> None:
    page.goto(f"{url}/?session={SESSION}&node={node_id}")
    wait_ready(page, timeout=180_000)
    wait_call(page, node_id)


def test_keys_and_clicks_move_the_ring_without_a_new_figure(rings_app):
    with browser_page(1440, 900) as page:
        open_call(page, rings_app, "c0011")  # the first conversation's leaf
        wait_rings(page, [11])
        assert boxed(page) == ["<b>c0011</b>"]
        assert 12 in drawn(page)  # c0012, the subagent's root after the first conversation, is a node too
        watch(page)
        press(page, "j", "c0012")
        wait_rings(page, [12])  # the ring moved onto c0012 ...
        assert boxed(page) == ["<b>c0012</b>"]
        assert redrawn(page)["draws"] == 0 and redrawn(page)["same"]  # ... over the same figure
        press(page, "k", "c0011")
        wait_rings(page, [11])
        # a click on a call: ringed where it is, the figure unchanged
        click_call(page, 0, "c0000")
        wait_rings(page, [0])
        click_call(page, 11, "c0011")
        wait_rings(page, [11])
        # a key away, then a second click on the same call selects it again (each click counts)
        press(page, "j", "c0012")
        wait_rings(page, [12])
        click_call(page, 11, "c0011")
        wait_rings(page, [11])
        seen = redrawn(page)
        assert seen["draws"] == 0 and seen["same"], seen
        page.evaluate(DAG_JS + "() => dag().scrollIntoView({block: 'center'})")
        screenshot(page, "dag-ring-click")


def test_the_ring_survives_a_pan_a_zoom_and_a_rerun(rings_app):
    with browser_page(1440, 900) as page:
        open_call(page, rings_app, "c0011")
        wait_rings(page, [11])
        watch(page)
        # a pan then a zoom (what a drag and the scroll wheel do): plotly draws the view again
        page.evaluate(
            DAG_JS + "() => { const gd = dag(), r = gd._fullLayout.xaxis.range;"
            " return window.Plotly.relayout(gd, {'xaxis.range': [r[0] + 0.5, r[1] + 0.5]}); }"
        )
        page.evaluate(
            DAG_JS + "() => { const gd = dag(), r = gd._fullLayout.xaxis.range, y = gd._fullLayout.yaxis.range;"
            " return window.Plotly.relayout(gd, {'xaxis.range': [r[0] + 1, r[1] - 1], 'yaxis.range': [y[0] + 0.5, y[1]]}); }"
        )
        chart_idle(page)
        wait_rings(page, [11])
        assert rings(page) == [11] and boxed(page) == ["<b>c0011</b>"]
        # a rerun of the selection view that changes nothing in the DAG (a search toggle)
        page.get_by_text("Ignore case").click()
        settled(page)
        wait_ready(page)
        chart_idle(page)
        assert rings(page) == [11] and boxed(page) == ["<b>c0011</b>"]
        seen = redrawn(page)
        assert seen["draws"] == 0 and seen["same"], seen


def test_search_rings_hits_on_nodes_and_chain_handles(rings_app):
    with browser_page(1440, 900) as page:
        page.goto(f"{rings_app}/?session={SESSION}")
        wait_ready(page, timeout=180_000)
        chains = drawn(page, CHAINS)
        assert 1 in chains  # the first conversation's inner calls c0001..c0010 are one collapsed chain
        watch(page)
        box = page.get_by_role("searchbox", name="Search this rollout")
        box.fill("agent 0")  # the first conversation's system prompt: its 12 calls
        box.press("Enter")
        page.locator(".st-key-rg-search-hits button").first.wait_for(timeout=90_000)
        settled(page)
        # the 12 calls repeat the same system prompt: one row names them (docs/user-guide.md, "Search")
        rows = set(page.locator(".st-key-rg-search-hits button").all_inner_texts())
        assert len(rows) == 1 and next(iter(rows)).startswith("c0000 · #0 and 11 later calls"), rows
        # the root and the leaf are ringed where they are, the 10 calls between on their chain's handle
        wait_rings(page, [0, 11, "chain:1"], name="rg-ring-hit")
        seen = redrawn(page)
        assert seen["draws"] == 0 and seen["same"], seen  # the figure was not sent again
        page.evaluate(DAG_JS + "() => dag().scrollIntoView({block: 'center'})")
        screenshot(page, "dag-search-rings")
        # clearing the search takes the rings away, still over the same figure
        box.fill("")
        box.press("Enter")
        wait_rings(page, [], name="rg-ring-hit")
        seen = redrawn(page)
        assert seen["draws"] == 0 and seen["same"], seen


def test_a_key_step_into_a_collapsed_chain_recentres_with_a_new_figure(rings_app):
    with browser_page(1440, 900) as page:
        open_call(page, rings_app, "c0015")  # the second conversation's root
        assert 16 not in drawn(page)  # c0016 is folded into the chain after it
        watch(page)
        before = redrawn(page)
        press(page, "j", "c0016")
        wait_rings(page, [16])  # now drawn as a node, ringed ...
        assert boxed(page) == ["<b>c0016</b>"]
        after = redrawn(page)
        assert after["draws"] >= 1 and after["rev"] != before["rev"]  # ... in a new figure centred on it
