"""The real app with the bundled training signals: the token-colour switch, the signals panel's
scatter opening a token, GRPO groups in the rollouts table, and the Compare page."""

from __future__ import annotations

import pytest

from tests.support.browser import browser_page, require_chromium, running_app, screenshot, settle, wait_ready, wait_url

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives the app in headless Chromium


@pytest.fixture(scope="module")
def app():
    require_chromium()
    with running_app() as url:
        yield url


def classes(page) -> list[str]:
    return page.eval_on_selector_all(".rg-tokens .rg-t", "els => els.map(e => e.className)")


def test_overlay_switch_recolours_the_tokens(app):
    with browser_page(height=1600) as page:
        page.goto(f"{app}/?session=fix-config-bug&node=c04")
        wait_ready(page)
        page.wait_for_selector("text=arrival #", timeout=30_000)
        assert any(" rg-b" in c for c in classes(page))  # logprob colours first
        page.get_by_text("Trainer − inference", exact=True).click()
        page.wait_for_function("() => document.querySelector('.rg-tokens .rg-t[class*=\"rg-d\"]')", timeout=30_000)
        settle(page)
        assert not any(" rg-b" in c for c in classes(page))
        assert "trainer − inference logprob" in page.inner_text("body")
        title = page.locator('.rg-tokens .rg-t[class*="rg-d"]').first.get_attribute("title")
        assert "inference logprob" in title and "trainer logprob" in title and "ratio" in title
        page.mouse.move(0, 0)
        page.locator(".rg-tokens").first.scroll_into_view_if_needed()
        screenshot(page, "signals-overlay", docs=True)
        page.get_by_text("Entropy (lower bound)", exact=True).click()
        page.wait_for_function("() => document.querySelector('.rg-tokens .rg-t[class*=\"rg-e\"]')", timeout=30_000)
        settle(page)
        assert "lower bound" in page.inner_text("body")
        page.get_by_text("Inference logprob", exact=True).click()
        page.wait_for_function("() => document.querySelector('.rg-tokens .rg-t[class*=\"rg-b\"]')", timeout=30_000)
        settle(page)
        page.wait_for_function(
            "() => !Array.from(document.querySelectorAll('.rg-tokens .rg-t')).some(e => /rg-e\\d/.test(e.className))",
            timeout=30_000,
        )


SCATTER_JS = """const scatter = () => Array.from(document.querySelectorAll('.js-plotly-plot'))
    .find(g => g._fullData && g._fullData.some(t => t.name === 'outliers') && g.offsetParent !== null);"""


def test_signals_panel_and_a_scatter_outlier_opens_its_token(app):
    with browser_page(height=1800) as page:
        page.goto(f"{app}/?session=fix-config-bug")
        wait_ready(page)
        if not page.get_by_text("compared tokens").first.is_visible():  # collapsed unless something is wrong
            page.get_by_text("Training signals: reward", exact=False).first.click()
        page.wait_for_function(SCATTER_JS + "() => !!scatter()", timeout=30_000)
        settle(page)
        body = page.inner_text("body")
        assert "compared tokens" in body and "KL k3" in body
        page.locator(".js-plotly-plot").filter(has=page.locator(".scatterlayer")).last.scroll_into_view_if_needed()
        x, y = page.evaluate(
            SCATTER_JS
            + """() => {
                const gd = scatter();
                const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
                const t = gd._fullData.find(t => t.name === 'outliers');
                const box = gd.getBoundingClientRect();
                return [box.left + xa._offset + xa.l2p(t.x[0]), box.top + ya._offset + ya.l2p(t.y[0])];
            }"""
        )
        page.mouse.click(x, y)
        page.wait_for_selector("text=arrival #", timeout=30_000)
        page.wait_for_selector(".rg-tokens .rg-m", timeout=30_000)  # the token, ringed
        wait_url(page, "node=")


def test_rollouts_grouped_by_first_prompt(app):
    with browser_page(height=1400) as page:
        page.goto(app)
        wait_ready(page)
        page.get_by_text("Group by first agent prompt (GRPO groups)").click()
        page.wait_for_selector("text=main sequences shared", timeout=30_000)
        settle(page)
        assert "Groups: rollouts with the same first agent prompt" in page.inner_text("body")


def test_compare_page(app):
    with browser_page(height=2400) as page:
        page.goto(app)
        wait_ready(page)
        page.get_by_text("Compare", exact=True).click()
        page.wait_for_selector("text=Compare two rollouts", timeout=60_000)
        settle(page)
        # the default pair is one group: the vllm rollout and its rollout-document twin
        assert "The same first agent prompt" in page.inner_text("body")
        page.locator('[data-testid="stSelectbox"]').filter(has_text="Rollout B").click()
        page.get_by_role("option", name="list-todos").click()
        page.wait_for_selector("text=Different first agent prompts", timeout=60_000)
        settle(page)
        assert page.locator(".rg-cmp-diff").count() >= 5  # differing stats, findings and signals rows
        assert page.locator(".rg-cmp-a .rg-m").count() == 1 and page.locator(".rg-cmp-b .rg-m").count() == 1
        assert page.evaluate("() => document.querySelectorAll('.js-plotly-plot').length") >= 2  # both DAGs
        body = page.inner_text("body")
        assert "Main sequences, aligned at their first divergence" in body and "reward" in body
        assert "Traceback" not in body
        screenshot(page, "compare", docs=True)


def test_a_signals_upload_joins_and_reports_a_misaligned_row(app, tmp_path):
    upload = tmp_path / "mine.signals.jsonl"
    upload.write_text(
        '{"session_id": "list-todos", "leaf_id": "c99", "reward": 1.0}\n'
        '{"session_id": "list-todos", "leaf_id": "c16", "trainer_logprobs": [-1.0, -2.0]}\nnot json\n'
    )
    with browser_page(height=1400) as page:
        page.goto(f"{app}/?session=list-todos")
        wait_ready(page)
        page.get_by_text("Bundled signals (llama-cpp recompute)").click()  # only the upload
        settle(page)
        page.get_by_text("Add a signals file").click()
        page.wait_for_selector("text=Signals file (JSONL or Parquet)", timeout=30_000)
        page.locator('[data-testid="stFileUploader"]').filter(has_text="Signals file").locator(
            'input[type="file"]'
        ).set_input_files(str(upload))
        page.wait_for_selector("text=1 unreadable", timeout=60_000)  # the signals panel opens: rows were ignored
        settle(page)
        body = page.inner_text("body")
        assert "Findings: FATAL 2" in body  # the short row and the row naming no leaf
        assert "no usable row for this rollout" in body and "Traceback" not in body
        assert page.locator("text=signals_misaligned").count() >= 1  # in the findings table


# ---- issue 22 item 5: a call two rows cover, the SECOND row holding a -2.5 nat token

WIDTH, HEIGHT = 1440, 900
FLAGGED_JS = """const flagged = () => Array.from(document.querySelectorAll('.js-plotly-plot'))
    .find(g => g._fullData && g._fullData.some(t => t.name === 'outliers'));
const pointOf = (gd, node, offset, trace) => {
    for (const t of gd._fullData) {
        if (!t.customdata || (trace && t.name !== trace)) continue;
        for (let k = 0; k < t.customdata.length; k++) {
            const c = Array.from(t.customdata[k]);
            if (c[0] === node && c[2] === offset) return {trace: t.name, seq: c[1], d: t.y[k] - t.x[k], x: t.x[k], y: t.y[k]};
        }
    }
    return null;
};"""


@pytest.fixture(scope="module")
def two_rows(tmp_path_factory):
    from tests.ui.test_mismatch_rows import write_case

    return write_case(tmp_path_factory.mktemp("two-rows"))


@pytest.fixture(scope="module")
def two_rows_cli(two_rows):
    require_chromium()
    trace, signals = two_rows
    with running_app(str(trace), "--signals", str(signals), via_cli=True) as url:
        yield url


def open_findings_and_jump(page) -> None:
    """In the findings list (not the call detail): the WARN group, then its jump button."""
    page.get_by_text("Findings: FATAL", exact=False).first.click()
    page.get_by_text("logprob_mismatch", exact=False).first.wait_for(timeout=30_000)
    page.locator('[data-testid="stExpander"] summary').filter(has_text="logprob_mismatch").first.click()
    button = page.get_by_role("button", name="jump to the worst token").first
    button.wait_for(timeout=30_000)
    assert "c0, sampled token 3, Δ -2.5 nats, row c2" in button.inner_text()
    button.click()


def the_worst_token_is_selected_and_plotted(page, name: str, docs: bool = False) -> None:
    from tests.ui.test_mismatch_rows import WORST_OFFSET

    position = 8 + WORST_OFFSET  # c0's context span (its whole prompt: a root), then its sampled tokens
    page.wait_for_selector(f'.rg-tokens .rg-m[data-i="{position}"]', timeout=30_000)  # ringed
    settle(page)
    assert page.locator(".rg-node-title").first.inner_text().startswith("c0")
    body = page.inner_text("body")
    assert "Traceback" not in body
    assert "WARN" in body and "logprob_mismatch" in body
    assert "row c2 (two-rows.signals.jsonl line 2) is the default: it holds the call's worst token" in body
    shown = page.evaluate(PICKER_JS + "() => picked()")
    assert shown == "row c2 (two-rows.signals.jsonl line 2) · step 3 · worst Δ -2.5 at sampled token 3 · default"
    mark_in_view(page, position)  # scrolled into view inside the detail pane, on the screen
    page.wait_for_function(FLAGGED_JS + "() => !!flagged()", timeout=30_000)
    hit = page.evaluate(FLAGGED_JS + f"() => pointOf(flagged(), 0, {WORST_OFFSET})")
    assert hit is not None and hit["trace"] == "outliers" and hit["d"] == pytest.approx(-2.5, abs=1e-6)
    # coloured by trainer − inference: the ringed token is the red one
    page.get_by_text("Trainer − inference", exact=True).click()
    page.wait_for_function("() => document.querySelector('.rg-tokens .rg-t[class*=\"rg-d\"]')", timeout=30_000)
    settle(page)
    mark_in_view(page, position)
    assert "rg-d0" in page.locator(f'.rg-tokens .rg-m[data-i="{position}"]').first.get_attribute(
        "class"
    )  # saturated red
    page.mouse.move(0, 0)
    screenshot(page, name, docs=docs)  # the 1440x900 screen


# the row picker's shown value (the selectbox's input holds it)
PICKER_JS = """const picked = () => {
    const box = Array.from(document.querySelectorAll('[data-testid="stSelectbox"]'))
        .find(e => e.innerText.includes('Signals row shown'));
    return box ? box.querySelector('input').value : '';
};"""


def mark_in_view(page, position: int) -> None:
    """Until the ringed token is on the screen (the jump scrolls the detail pane to it)."""
    page.wait_for_function(
        f"""() => {{
            const m = document.querySelector('.rg-tokens .rg-m[data-i="{position}"]');
            if (!m) return false;
            const b = m.getBoundingClientRect();
            return b.top >= 0 && b.bottom <= window.innerHeight;
        }}""",
        timeout=30_000,
    )
    # the scroll script's last look (views/state/signals.py SCROLL_JS), before anything else is clicked
    page.wait_for_function(
        "(i) => { const l = window.__rgMarkLooks; return !!l && l.left <= 0 && l.at === i; }",
        arg=str(position),
        timeout=30_000,
    )


def pick_the_other_row_and_click_its_flagged_point(page) -> None:
    """Row c1 picked for c0: the -2.5 nat token of row c2 stays plotted (a red diamond); a click on
    it selects c0, row c2 again and rings the token."""
    from tests.ui.test_mismatch_rows import WORST_OFFSET

    picker = page.locator('[data-testid="stSelectbox"]').filter(has_text="Signals row shown")
    picker.scroll_into_view_if_needed()  # in the detail pane, scrolled down to the token
    picker.locator("input").click()  # a click waits for the picker to stand still
    page.get_by_role("option", name="row c1", exact=False).click()
    page.wait_for_function(
        FLAGGED_JS + "() => !!flagged() && flagged()._fullData.some(t => t.name === 'flagged, in another row')",
        timeout=30_000,
    )
    settle(page)
    hit = page.evaluate(FLAGGED_JS + f"() => pointOf(flagged(), 0, {WORST_OFFSET}, 'flagged, in another row')")
    assert hit is not None and hit["d"] == pytest.approx(-2.5, abs=1e-6)
    # The chart itself into view (its title's text can match another element first; a click
    # outside the viewport hits nothing), then its flagged point's place on the screen.
    page.evaluate(FLAGGED_JS + "() => flagged().scrollIntoView({block: 'center'})")
    settle(page)
    x, y = page.evaluate(
        FLAGGED_JS
        + """() => {
            const gd = flagged();
            const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
            const t = gd._fullData.find(t => t.name === 'flagged, in another row');
            const box = gd.getBoundingClientRect();
            return [box.left + xa._offset + xa.l2p(t.x[0]), box.top + ya._offset + ya.l2p(t.y[0])];
        }"""
    )
    assert 0 <= y <= page.viewport_size["height"], f"the flagged point is off the screen at y={y}"
    page.mouse.click(x, y)
    page.wait_for_function(
        FLAGGED_JS + "() => !!flagged() && !flagged()._fullData.some(t => t.name === 'flagged, in another row')",
        timeout=30_000,
    )
    settle(page)
    position = 8 + WORST_OFFSET
    page.wait_for_selector(f'.rg-tokens .rg-m[data-i="{position}"]', timeout=30_000)
    page.wait_for_function(PICKER_JS + "() => picked().startsWith('row c2 (')", timeout=30_000)  # row c2 again
    mark_in_view(page, position)


def test_command_line_signals_jump_to_the_worst_token_of_the_second_row(two_rows_cli):
    with browser_page(WIDTH, HEIGHT) as page:
        page.goto(two_rows_cli)
        wait_ready(page)
        settle(page)
        open_findings_and_jump(page)
        the_worst_token_is_selected_and_plotted(page, "signals-worst-token", docs=True)
        pick_the_other_row_and_click_its_flagged_point(page)


def test_uploaded_trace_and_signals_jump_to_the_worst_token(app, two_rows):
    trace, signals = two_rows
    with browser_page(WIDTH, HEIGHT) as page:
        page.goto(app)
        wait_ready(page)
        page.get_by_test_id("stRadio").get_by_text("Upload", exact=True).click()  # the source radio
        page.get_by_test_id("stSidebar").locator('input[type="file"]').first.set_input_files(str(trace))
        page.wait_for_selector("text=1 uploaded file(s)", timeout=60_000)
        wait_ready(page)
        page.get_by_text("Add a signals file").click()
        page.wait_for_selector("text=Signals file (JSONL or Parquet)", timeout=30_000)
        page.locator('[data-testid="stFileUploader"]').filter(has_text="Signals file").locator(
            'input[type="file"]'
        ).set_input_files(str(signals))
        page.wait_for_selector("text=Training signals: reward", timeout=60_000)
        wait_ready(page)
        settle(page)
        open_findings_and_jump(page)
        the_worst_token_is_selected_and_plotted(page, "signals-worst-upload")
        pick_the_other_row_and_click_its_flagged_point(page)
