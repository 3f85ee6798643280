"""The DAG at scale in headless Chromium, on generated 5,000- and 1,000-call rollouts and a
history-rewriting one: clicks select the node under the pointer, chains collapse and expand, the
selected call is labelled and centred, deep links open the call, the first screen shows the DAG.
`ROLLOUT_GRAPH_DOCS_SCREENSHOTS=1` refreshes the docs' screenshots."""

from __future__ import annotations

import contextlib
import math

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from rollout_graph.ui.builders.dag import CALLS, CHAINS
from tests.support.browser import (
    DAG_JS,
    ROOT,
    browser_page,
    chart_idle,
    node_position,
    require_chromium,
    running_app,
    screenshot,
    wait_ready,
    wait_url,
)
from tests.support.builders import Turn, agent_records, rewriting_records, vllm_chat, write

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives the app in headless Chromium


def conversation_records(n_calls: int, session: str, chain: int = 40, retry_every: int = 25) -> list[dict]:
    """The shape of benchmarks/synthetic.py with few tokens per call (a 5,000-call trace of about
    5 MB): agent chains with a retry every ``retry_every`` steps, each followed by a new
    conversation with a system prompt of its own (a new root no near miss links: before lanes
    were packed, each one stepped a lane down the chart, 1,000+ lanes at 5,000 calls), and a
    3-call subagent after each chain."""
    fresh = iter(range(10_000, 10**9))
    records: list[dict] = []

    def call(prompt: list[int], sampled: list[int], system: str) -> None:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": "go"}]
        records.append(vllm_chat(Turn(f"c{len(records):04d}", prompt, sampled, messages=messages, session=session)))

    while len(records) < n_calls:
        system = f"agent {len(records)}"
        prompt = [next(fresh) for _ in range(6)]
        for step in range(chain):
            if retry_every and step % retry_every == retry_every - 1:
                call(prompt, [next(fresh)], system)  # retried: discarded
            sampled = [next(fresh)]
            call(prompt, sampled, system)
            prompt = prompt + sampled + [next(fresh)]
        sub = [next(fresh) for _ in range(4)]
        for _ in range(3):
            sampled = [next(fresh)]
            call(sub, sampled, f"subagent {len(records)}")
            sub = sub + sampled + [next(fresh)]
    return records[:n_calls]


@pytest.fixture(scope="module")
def big_app(tmp_path_factory):
    require_chromium()
    folder = tmp_path_factory.mktemp("big")
    write(folder / "agent-5000.jsonl", agent_records(5000, session="agent-5000"))
    write(folder / "agent-1000.jsonl", agent_records(1000, session="agent-1000"))
    write(folder / "synthetic-5000.jsonl", conversation_records(5000, session="synthetic-5000"))
    write(folder / "rewrites.jsonl", rewriting_records(14))
    with running_app(str(folder)) as url:
        yield url


def open_page(page, url: str, query: str) -> None:
    page.goto(f"{url}/?{query}")
    wait_ready(page, timeout=180_000)
    chart_idle(page)


def drawn(page, trace: int = CALLS) -> list[int]:
    """Call indices (or chain keys, trace ``CHAINS``) in the DAG's figure."""
    return page.evaluate(DAG_JS + "(t) => Array.from(dag()._fullData[t].customdata || [])", trace)


def title(page) -> str:
    return page.locator(".rg-node-title").first.inner_text()


def wait_title(page, node_id: str, timeout: float = 90_000) -> None:
    page.wait_for_function(
        "(id) => { const e = document.querySelector('.rg-node-title'); return e && e.innerText.startsWith(id + ' '); }",
        arg=node_id,
        timeout=timeout,
    )
    wait_ready(page)


def click_node(page, index: int) -> None:
    """Click the call's drawn position; the detail must show that call. A chart that was just
    redrawn may take a click before plotly listens again (on a loaded machine): one more try."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for attempt in (1, 2):
        chart_idle(page)
        x, y = node_position(page, index)
        page.mouse.click(x, y)
        try:
            wait_title(page, f"c{index:04d}", timeout=45_000 * attempt)
            return
        except PlaywrightTimeout:
            if attempt == 2:
                raise


def test_first_screen_shows_the_dag_and_a_click_selects_the_node_under_the_pointer(big_app):
    with browser_page(width=1440, height=900) as page:
        open_page(page, big_app, "session=agent-5000")
        box = page.evaluate(DAG_JS + "() => { const r = dag().getBoundingClientRect(); return [r.top, r.bottom]; }")
        assert 0 < box[0] and box[1] <= 900, box  # the whole chart on a 1440x900 first screen, no scrolling
        screenshot(page, "dag-5000", docs=True)
        nodes = drawn(page)
        assert 500 < len(nodes) < 1000  # 5,000 calls: chains collapsed
        # a fork on the main line and the discarded retry drawn right below it, then the continuing call
        fork = 23
        retry, kept = sorted(c for c in nodes if c in (24, 25))[:2]
        # back and forth while the live source ticks: a tick that left before the new selection arrived
        # must not undo it (the page, the picker and the URL all follow the last click)
        for index in (fork, retry, kept, fork, kept):
            click_node(page, index)
            assert title(page).startswith(f"c{index:04d}"), (index, title(page))
            wait_url(page, f"node=c{index:04d}")  # written by the same run, a moment after the title


def test_only_the_calls_in_view_are_drawn_and_a_pan_draws_the_others(big_app):
    with browser_page(width=1440, height=900) as page:
        open_page(page, big_app, "session=agent-5000")
        nodes = drawn(page)
        in_dom = page.evaluate(DAG_JS + "() => dag().querySelectorAll('.point').length")
        assert 0 < in_dom < len(nodes) // 3, (in_dom, len(nodes))  # the view's markers, not the rollout's
        far = nodes[-1]  # the last call: far outside the first view
        page.evaluate(
            DAG_JS
            + """(i) => {
                const gd = dag(), t = gd._fullData[1], k = Array.from(t.customdata).indexOf(i);
                const xr = gd._fullLayout.xaxis.range, yr = gd._fullLayout.yaxis.range;
                const w = xr[1] - xr[0], h = yr[1] - yr[0];
                return Plotly.relayout(gd, {'xaxis.range': [t.x[k] - w / 2, t.x[k] + w / 2],
                                            'yaxis.range': [t.y[k] - h / 2, t.y[k] + h / 2]});
            }""",
            far,
        )
        chart_idle(page)
        x, y = node_position(page, far)
        hit = page.evaluate(
            DAG_JS
            + """([x, y]) => Array.from(dag().querySelectorAll('.point')).some(p => {
                const b = p.getBoundingClientRect();
                return Math.abs(b.x + b.width / 2 - x) < 3 && Math.abs(b.y + b.height / 2 - y) < 3;
            })""",
            [x, y],
        )
        assert hit  # drawn now, where the call is
        click_node(page, far)


def test_a_chain_expands_on_click_and_collapses_again(big_app):
    with browser_page(width=1440, height=900) as page:
        open_page(page, big_app, "session=agent-5000")
        before = drawn(page)
        chain = drawn(page, CHAINS)[0]
        assert chain not in before
        x, y = node_position(page, chain, trace=CHAINS)
        page.mouse.click(x, y)
        page.wait_for_function(
            DAG_JS + "(c) => { const g = dag(); return !!g && Array.from(g._fullData[1].customdata).includes(c); }",
            arg=chain,
            timeout=90_000,
        )
        wait_ready(page)
        after = drawn(page)
        assert set(before) < set(after) and len(after) - len(before) >= 20  # the chain's calls, one by one
        click_node(page, chain + 3)  # a call of the expanded chain is now a node like any other
        page.get_by_role("button", name="Refold chains").click()
        page.wait_for_function(
            DAG_JS + "(n) => { const g = dag(); return !!g && g._fullData[1].customdata.length < n; }",
            arg=len(after),
            timeout=90_000,
        )
        wait_ready(page)
        assert chain + 3 in drawn(page) and len(drawn(page)) < len(after)  # the selected call stays a node


def test_deep_link_opens_the_call_labelled_and_centred(big_app):
    with browser_page(width=1440, height=900) as page:
        open_page(page, big_app, "session=agent-5000&node=c2510")  # an inner call, hidden in a chain until chosen
        wait_title(page, "c2510")
        label, centred = page.evaluate(
            DAG_JS
            + """() => {
                const gd = dag(), lay = gd._fullLayout;
                const a = (lay.shapes || []).filter(s => s.name === 'rg-ring-box')[0], xr = lay.xaxis.range;
                return [a ? a.label.text : null, a ? Math.abs((a.xanchor - xr[0]) / (xr[1] - xr[0]) - 0.5) < 0.1 : false];
            }"""
        )
        assert label == "<b>c2510</b>" and centred
        assert 2510 in drawn(page)
        page.locator(".rg-node-title").first.scroll_into_view_if_needed()


def test_dag_screenshots_1000_calls_and_a_history_rewrite(big_app):
    with browser_page(width=1440, height=900) as page:
        open_page(page, big_app, "session=agent-1000&node=c0480")
        screenshot(page, "dag-1000", docs=True)
        open_page(page, big_app, "session=rewrites")
        xs = page.evaluate(DAG_JS + "() => Array.from(dag()._fullData[1].y)")
        assert len(set(xs)) == 1  # every call a new root, drawn as one line of near-miss continuations
        screenshot(page, "dag-rewrites", docs=True)


def test_a_tour_example_scrolls_its_call_into_view(big_app):
    with browser_page(width=1440, height=900) as page:
        open_page(page, big_app, "session=agent-5000")
        page.get_by_role("button", name="Take the tour").first.click()  # at the top of the first screen
        button = page.locator(".st-key-rg-tour").get_by_role("button", name="a retry").first
        button.click()
        page.wait_for_selector(".rg-node-title", timeout=90_000)
        wait_ready(page)
        chosen = title(page).split()[0]
        # the DAG client brings the chart into view (views/panels/dag_client): the call on screen
        page.wait_for_function(
            DAG_JS
            + """(i) => { const gd = dag(), t = gd._fullData[1], k = Array.from(t.customdata).indexOf(i);
                if (k < 0) return false;
                const b = gd.getBoundingClientRect(), xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
                const x = b.left + xa._offset + xa.l2p(t.x[k]), y = b.top + ya._offset + ya.l2p(t.y[k]);
                return 0 <= y && y <= innerHeight && 0 <= x && x <= innerWidth; }""",
            arg=int(chosen[1:]),
            timeout=30_000,
        )
        x, y = node_position(page, int(chosen[1:]))
        assert 0 <= y <= 900 and 0 <= x <= 1440, (x, y)  # the call is on screen


def press_fit_all(page) -> None:
    page.get_by_text("Fit all", exact=True).click()
    page.wait_for_function(DAG_JS + "() => !!dag() && dag()._fullLayout.uirevision.endsWith(':fit')", timeout=120_000)
    wait_ready(page, timeout=120_000)


def apart_calls(page, clear_px: float = 10) -> list[int]:
    """Calls drawn with nothing else (call or chain handle) within ``clear_px`` px: what is under
    the pointer there is that call."""
    return page.evaluate(
        DAG_JS
        + """(clear) => {
            const gd = dag(), xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
            const pts = [1, 2].flatMap(t => Array.from(gd._fullData[t].x || []).map((x, k) =>
                [t, gd._fullData[t].customdata[k], xa.l2p(x), ya.l2p(gd._fullData[t].y[k])]));
            return pts.filter(([t, c, x, y]) => t === 1 && pts.every(([u, d, x2, y2]) =>
                (u === t && d === c) || Math.hypot(x - x2, y - y2) >= clear)).map(p => p[1]);
        }""",
        clear_px,
    )


def drawn_px(page) -> list[list]:
    """[trace, call or chain key, x px, y px, marker size px] of every drawn call (trace 1) and
    chain handle (trace 2), in page coordinates."""
    return page.evaluate(
        DAG_JS
        + """() => {
            const gd = dag(), xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis, b = gd.getBoundingClientRect();
            const size = (t, k) => { const s = gd._fullData[t].marker.size; return Array.isArray(s) || ArrayBuffer.isView(s) ? s[k] : s; };
            return [1, 2].flatMap(t => Array.from(gd._fullData[t].x || []).map((x, k) =>
                [t, gd._fullData[t].customdata[k], b.left + xa._offset + xa.l2p(x),
                 b.top + ya._offset + ya.l2p(gd._fullData[t].y[k]), size(t, k)]));
        }"""
    )


@pytest.mark.parametrize("session", ["agent-1000", "synthetic-5000", "agent-5000"])
def test_fit_all_shows_the_whole_rollout_and_clicks_still_select_the_call_under_the_pointer(big_app, session):
    with browser_page(width=1440, height=900) as page:
        open_page(page, big_app, f"session={session}")
        # plotly's Autoscale is gone from the modebar ("Fit all" replaces it)
        assert not page.evaluate(DAG_JS + '() => !!document.querySelector(\'[data-attr="zoom"][data-val="auto"]\')')
        press_fit_all(page)
        xr = page.evaluate(DAG_JS + "() => dag()._fullLayout.xaxis.range")
        yr = page.evaluate(DAG_JS + "() => dag()._fullLayout.yaxis.range")
        xs = page.evaluate(DAG_JS + "() => Array.from(dag()._fullData[1].x)")
        ys = page.evaluate(DAG_JS + "() => Array.from(dag()._fullData[1].y)")
        assert xr[0] <= min(xs) and max(xs) <= xr[1] and yr[0] <= min(ys) and max(ys) <= yr[1]  # all in view
        assert len(set(ys)) <= 8, len(set(ys))  # packed lanes: an overview, not a diagonal smear
        # six calls spread across the overview, away from chain handles (a click there expands a
        # chain): a click on each selects the call under the pointer: the one whose marker covers
        # the pointer (at 5,000 calls markers overlap; the one drawn on top is chosen)
        points = drawn_px(page)
        handles = [(x, y) for t, _, x, y, _ in points if t == 2]
        calls = sorted(
            (
                (x, y, c)
                for t, c, x, y, _ in points
                if t == 1 and all(math.hypot(x - a, y - b) >= 12 for a, b in handles)
            ),
            key=lambda p: p[0],
        )
        assert len(calls) >= 6
        previous = None
        for k in range(6):
            x, y, index = calls[k * (len(calls) - 1) // 5]
            for attempt in (1, 2):  # a chart just redrawn may miss a click before plotly listens again
                chart_idle(page)
                page.mouse.click(x, y)
                try:
                    page.wait_for_function(
                        "(prev) => { const e = document.querySelector('.rg-node-title');"
                        " return e && e.innerText.split(' ')[0] !== prev; }",
                        arg=previous or "",
                        timeout=45_000 * attempt,
                    )
                    break
                except Exception:
                    if attempt == 2:
                        raise
            wait_ready(page)
            chosen = title(page).split()[0]
            previous = chosen
            at = next((px, py, size) for t, c, px, py, size in drawn_px(page) if t == 1 and c == int(chosen[1:]))
            assert math.hypot(at[0] - x, at[1] - y) <= at[2] / 2 + 1, (index, chosen, (x, y), at)  # under the pointer
            assert page.evaluate(DAG_JS + "() => dag()._fullLayout.uirevision").endswith(":fit")  # still the overview


def test_a_double_click_resets_the_view_instead_of_autoscaling_it(big_app):
    with browser_page(width=1440, height=900) as page:
        open_page(page, big_app, "session=synthetic-5000")
        start = page.evaluate(DAG_JS + "() => dag()._fullLayout.xaxis.range.slice()")
        page.evaluate(DAG_JS + "(r) => Plotly.relayout(dag(), {'xaxis.range': [r[0] + 40, r[1] + 40]})", start)
        chart_idle(page)
        box = page.evaluate(
            DAG_JS
            + "() => { const b = dag().querySelector('.nsewdrag').getBoundingClientRect(); return [b.x, b.y, b.width, b.height]; }"
        )
        page.mouse.dblclick(box[0] + box[2] * 0.5, box[1] + box[3] * 0.05)  # an empty spot near the top
        moved = DAG_JS + "(r) => Math.abs(dag()._fullLayout.xaxis.range[0] - r[0]) < 1e-6"
        with contextlib.suppress(PlaywrightTimeout):  # plotly resets the view after its double-click delay
            page.wait_for_function(moved, arg=start, timeout=15_000)  # (else the assertion names where it went)
        after = page.evaluate(DAG_JS + "() => dag()._fullLayout.xaxis.range.slice()")
        assert after == pytest.approx(start, abs=1e-6)  # back to the window, not the whole 5,000-call smear


SAMPLES = ROOT / "sample_traces"
TOOLBAR_JS = """() => {
    const fit = Array.from(document.querySelectorAll('label')).find(l => l.innerText.trim() === 'Fit all');
    let bar = fit;
    while (bar && bar.getAttribute('data-testid') !== 'stHorizontalBlock') bar = bar.parentElement;
    const r = bar.getBoundingClientRect();
    return {height: r.height, tops: Array.from(bar.children).map(c => Math.round(c.getBoundingClientRect().top))};
}"""


@pytest.fixture(scope="module")
def signals_app():
    require_chromium()
    signals = SAMPLES / "signals" / "samples.signals.jsonl"
    with running_app(str(SAMPLES / "vllm"), "--signals", str(signals), via_cli=True) as url:
        yield url


def test_with_signals_the_toolbar_stays_one_row_and_the_detail_pane_offers_calls(signals_app):
    with browser_page(width=1440, height=900) as page:
        open_page(page, signals_app, "session=fix-config-bug")
        bar = page.evaluate(TOOLBAR_JS)
        assert bar["height"] < 60 and max(bar["tops"]) - min(bar["tops"]) < 12, bar  # one row, no wrap
        colour = page.locator("input[aria-label='Colour calls by']")
        assert colour.count() == 1 and colour.input_value() == "Colour by role"  # signals joined: the choice is there
        dag_bottom = page.evaluate(DAG_JS + "() => dag().getBoundingClientRect().bottom")
        assert colour.bounding_box()["y"] > dag_bottom - 5  # under the chart, beside the legend
        # nothing selected yet: the pane beside the DAG says how to select and offers calls worth a look
        pane = page.locator(".st-key-rg-detail")
        assert "No call selected yet" in pane.inner_text()
        buttons = pane.get_by_role("button")
        assert buttons.count() >= 3
        first = buttons.first.inner_text()
        box = buttons.first.bounding_box()
        assert box["y"] + box["height"] < 900  # in the first screen
        buttons.first.click()
        node_id = first.split()[0]
        wait_title(page, node_id)
        assert page.locator(".rg-node-title").first.bounding_box()["y"] < 900
        assert page.evaluate(TOOLBAR_JS)["height"] < 60  # a selection does not wrap it either
        # the selected call's boxed id covers no other label: a label under the box is hidden whole,
        # under a white shape (the box, or the cover drawn over a label the box would overlap)
        covered = page.evaluate(
            DAG_JS
            + """(id) => {
                const gd = dag();
                const t = Array.from(gd.querySelectorAll('.shape-label-text')).find(e => e.textContent.trim() === id);
                if (!t) return ['no box'];
                const b = t.closest('.shape-group').querySelector('path').getBoundingClientRect();
                const white = Array.from(gd.querySelectorAll('.shape-group path')).filter(p =>
                    getComputedStyle(p).fill.replace(/ /g, '') === 'rgb(255,255,255)' && p.style.fillOpacity === '1')
                    .map(p => p.getBoundingClientRect());
                const inside = (r, w) => r.left >= w.left - 2 && r.right <= w.right + 2 && r.top >= w.top - 2 && r.bottom <= w.bottom + 2;
                return Array.from(gd.querySelectorAll('.textpoint text')).filter(t => {
                    const r = t.getBoundingClientRect(), fill = getComputedStyle(t).fill;
                    if (!fill || fill === 'none' || fill.replace(/ /g, '') === 'rgba(0,0,0,0)') return false;  // hidden ids
                    const over = t.textContent && r.width && r.left < b.right && b.left < r.right && r.top < b.bottom && b.top < r.bottom;
                    return over && !white.some(w => inside(r, w));
                }).map(t => t.textContent);
            }""",
            node_id,
        )
        assert covered == [], covered
        screenshot(page, "dag-signals-selected")
