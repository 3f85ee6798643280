"""The Run page in the real app on a generated run of 500 steps x 256 rollouts (tools/make_run.py):
the trends draw from the cached summary table, a click on a point lists that step's rollouts, a row
opens its rollout in the explorer with its fidelity banner. Screenshots at 1440x900 go to
tests/artifacts/. Timings are printed, never asserted (docs/performance.md)."""

from __future__ import annotations

import os
import time

import pytest

from rollout_graph.reports.run import run_table
from tests.support.browser import browser_page, require_chromium, running_app, screenshot, settle
from tools import make_run

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives the app in Chromium

IDLE = (
    "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
    " && !document.querySelector('[data-testid=\"stSkeleton\"]')"
)
POINT_JS = """([title, k]) => {
    const g = Array.from(document.querySelectorAll('.js-plotly-plot'))
        .find(g => g.layout && g.layout.title && String(g.layout.title.text).includes(title));
    const xa = g._fullLayout.xaxis, ya = g._fullLayout.yaxis, tr = g._fullData[0];
    const box = g.getBoundingClientRect();
    return [box.left + xa._offset + xa.l2p(tr.x[k]), box.top + ya._offset + ya.l2p(tr.y[k]), tr.x[k], tr.x.length];
}"""


@pytest.fixture(scope="module")
def run_app(tmp_path_factory):
    require_chromium()
    root = tmp_path_factory.mktemp("run500")
    run, cache = root / "run", root / "cache"
    assert make_run.main([str(run), "--steps", "500", "--rollouts", "256", "--ranks", "4"]) == 0
    old = os.environ.get("ROLLOUT_GRAPH_CACHE")
    os.environ["ROLLOUT_GRAPH_CACHE"] = str(cache)  # the app reads the table `rollout-graph run` cached
    try:
        start = time.perf_counter()
        table, summary = run_table([str(run)], workers=2)  # what `rollout-graph run DIR` caches
        print(f"summarised {table.num_rows:,} rollouts in {time.perf_counter() - start:.1f} s")
        assert table.num_rows == 128_000 and summary["n_steps"] == 500
        with running_app(str(run)) as url:
            yield url
    finally:
        if old is None:
            os.environ.pop("ROLLOUT_GRAPH_CACHE", None)
        else:
            os.environ["ROLLOUT_GRAPH_CACHE"] = old


def test_run_page_charts_500_steps_and_opens_a_rollout(run_app):
    with browser_page(1440, 900) as page:
        start = time.perf_counter()
        page.goto(run_app)  # a run's folder opens on the Run page
        page.wait_for_selector("text=Run: 500 steps · 128,000 rollouts", timeout=240_000)
        page.wait_for_function(IDLE, timeout=240_000)
        print(f"first draw {time.perf_counter() - start:.1f} s")
        assert "summaries read from the cache" in page.inner_text("body")
        titles_js = (
            "() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(g => g.layout && g.layout.title"
            " && String(g.layout.title.text)).filter(Boolean)"
        )
        page.wait_for_function(f"() => ({titles_js})().length === 6", timeout=60_000)
        titles = page.evaluate(titles_js)
        assert len(titles) == 6 and any("Reward" in t for t in titles)
        settle(page)
        screenshot(page, "run-page")
        x, y, step, n = page.evaluate(POINT_JS, ["Reward", 120])
        assert n == 500
        start = time.perf_counter()
        page.mouse.click(x, y)
        page.wait_for_selector(f"text=Step {step}: 256 rollouts", timeout=60_000)
        page.wait_for_function(IDLE, timeout=60_000)
        print(f"step {step} listed {time.perf_counter() - start:.2f} s after the click")
        page.locator("text=Worst first").scroll_into_view_if_needed()
        settle(page)
        screenshot(page, "run-page-step")
        box = page.locator('[data-testid="stDataFrame"]').last.bounding_box()
        start = time.perf_counter()
        page.mouse.click(box["x"] + 18, box["y"] + 35 + 17)  # the worst rollout's checkbox
        page.wait_for_selector(f"text=Rollout step_{step}/", timeout=120_000)
        page.wait_for_selector("text=Fidelity", timeout=60_000)
        page.wait_for_function(IDLE, timeout=60_000)
        print(f"explorer {time.perf_counter() - start:.1f} s after the row click")
        body = page.inner_text("body")
        assert "Fidelity sequences" in body and f"step {step}" in body and "rules out" in body
        assert f"session=step_{step}" in page.url.replace("%2F", "/")
        screenshot(page, "run-page-explorer")
