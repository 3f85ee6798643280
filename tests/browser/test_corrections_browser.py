"""The real app with the bundled signals: the Corrections panel's histogram draws each chosen
correction's band, the side-by-side table matches the library, and a toggle per correction marks
(and unmarks) the tokens it clips or masks in the token view."""

from __future__ import annotations

import pytest

from rollout_graph.ingest.load.files import load_paths
from rollout_graph.pipeline import analyse
from rollout_graph.samples import __file__ as samples_init
from rollout_graph.signals.corrections import parse_correction
from rollout_graph.signals.join import join_rollout
from rollout_graph.signals.reading import read_signals
from rollout_graph.ui.builders import mismatch
from tests.support.browser import browser_page, require_chromium, running_app, screenshot, settle, wait_ready

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives the app in Chromium

PANEL = "Off-policy corrections: what each would do to these tokens"

HIST_JS = """() => {
    const gd = Array.from(document.querySelectorAll('.js-plotly-plot'))
        .find(g => g._fullLayout && g._fullLayout.title && /Token importance ratio/.test(g._fullLayout.title.text));
    if (!gd) return null;
    return {type: gd._fullLayout.xaxis.type, shapes: gd._fullLayout.shapes.map(s => [s.type, s.x0, s.x1]),
            bars: gd._fullData[0].y.length};
}"""


def marks(page) -> list[int]:
    """Clipped and masked marks on the call's own token strip (the Tokens tab)."""
    return page.evaluate(
        "() => [document.querySelectorAll('[data-strip^=\"tok-\"] .rg-kc').length,"
        " document.querySelectorAll('[data-strip^=\"tok-\"] .rg-km').length]"
    )


@pytest.fixture(scope="module")
def app():
    require_chromium()
    with running_app() as url:
        yield url


def expected_c04_masked() -> int:
    """Tokens of fix-config-bug's c04 that token_mask:low=0.5,high=5 masks (from the library)."""
    from pathlib import Path

    samples = Path(samples_init).parent
    rollout = analyse(load_paths([samples / "vllm"]).sessions["fix-config-bug"])
    rows = [
        r for r in read_signals(samples / "signals" / "samples.signals.jsonl").rows if r.session_id == "fix-config-bug"
    ]
    joined = join_rollout(rollout, rows)
    from dataclasses import replace

    evaluation = joined.evaluate([parse_correction("token_mask:low=0.8,high=1.25")])
    flags = mismatch.call_flags(replace(rollout, signals=joined), evaluation, rollout.index_of("c04"))
    return int((flags["token_mask:low=0.8,high=1.25"] == mismatch.MASKED).sum())


def test_histogram_bands_and_the_overlay_toggles(app):
    want = expected_c04_masked()
    with browser_page(width=1440, height=900) as page:
        page.goto(f"{app}/?session=fix-config-bug&node=c04")
        wait_ready(page)
        page.get_by_text(PANEL, exact=True).click()
        page.wait_for_function(f"() => ({HIST_JS})() !== null", timeout=60_000)
        settle(page)
        # add a correction by spec: it joins the chosen ones and the table
        box = page.get_by_placeholder("token_mask:low=0.125,high=8")
        box.fill("token_mask:low=0.8,high=1.25")
        box.press("Enter")
        page.wait_for_function("() => document.body.innerText.includes('token_mask:low=0.8,high=1.25')", timeout=30_000)
        settle(page)
        hist = page.evaluate(HIST_JS)
        assert hist["type"] == "log" and hist["bars"] > 5
        rects = [s for s in hist["shapes"] if s[0] == "rect"]
        # token_mask:low=0.5,high=5 and token_mask:low=0.8,high=1.25 are shaded bands
        assert sorted((round(s[1], 3), round(s[2], 3)) for s in rects) == [(0.5, 5.0), (0.8, 1.25)]
        assert "Where they disagree" in page.inner_text("body")  # the tables are canvases: not in the text
        assert marks(page) == [0, 0]  # nothing marked yet
        page.locator("[data-testid='stButtonGroup'] button", has_text="token_mask:low=0.8,high=1.25").click()
        page.wait_for_function("() => document.querySelector('.rg-tokens .rg-km, .rg-marks-legend')", timeout=30_000)
        settle(page)
        assert marks(page)[1] == want
        title = page.locator('[data-strip^="tok-"] .rg-km').first.get_attribute("title") if want else ""
        assert not want or "token_mask:low=0.8,high=1.25: masks this token" in title
        page.locator('[data-strip^="tok-"] .rg-km').first.scroll_into_view_if_needed()
        screenshot(page, "corrections-marks", docs=True)
        page.get_by_text(PANEL, exact=True).scroll_into_view_if_needed()
        screenshot(page, "corrections-panel")
        page.evaluate(
            "() => Array.from(document.querySelectorAll('.js-plotly-plot')).find(g => g._fullLayout.title"
            " && /Token importance ratio/.test(g._fullLayout.title.text)).scrollIntoView({block: 'center'})"
        )
        settle(page)
        screenshot(page, "corrections-figures", docs=True)
        page.locator("[data-testid='stButtonGroup'] button", has_text="token_mask:low=0.8,high=1.25").click()
        page.wait_for_function("() => !document.querySelector('.rg-tokens .rg-km')", timeout=30_000)
        settle(page)
        assert marks(page) == [0, 0]
