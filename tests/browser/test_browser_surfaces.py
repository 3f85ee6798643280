"""Surfaces opened on every source, in headless Chromium at 1440x900 (issue 22): Compare and the
Corpus page on an upload (the sidebar keeps the upload across pages), a search hit and a guide
button selecting their call in the split view (ringed in the DAG, its detail beside it), a bad
upload leading with its reasons, and nothing cut off (tile labels, facts, guide buttons, the token
inspector). tests/browser/test_browser_daily.py covers the bundled samples, command-line traces (followed as
they grow: Raw JSON there too) and an upload in the Explorer itself."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.browser.test_browser_daily import HEIGHT, WIDTH, click_call, dag_box, faded, ringed
from tests.support.browser import (
    ARTIFACTS,
    DAG_JS,
    ROOT,
    browser_page,
    require_chromium,
    running_app,
    settle,
    wait_ready,
    wait_url,
)
from tests.support.builders import Turn, vllm_chat

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives the app in Chromium

SAMPLE = ROOT / "sample_traces" / "vllm" / "agent-rollouts.jsonl"
BUNDLED_ONLY = "fix-config-bug.openenv"  # a bundled rollout the upload does not hold


@pytest.fixture(scope="module")
def samples_app():
    require_chromium()
    with running_app() as url:
        yield url


def upload(page, path) -> None:
    page.get_by_test_id("stRadio").get_by_text("Upload", exact=True).click()  # the source radio, not the dropzone
    page.get_by_test_id("stSidebar").locator('input[type="file"]').first.set_input_files(str(path))


def go_to(page, name: str) -> None:
    """Another page through the sidebar's navigation, as a user switches pages (same session)."""
    page.get_by_test_id("stSidebarNav").get_by_role("link", name=name).click()


def open_guide(page) -> None:
    """Open the tour (the "Take the tour" popover at the top of the first screen)."""
    if not page.locator(".st-key-rg-tour button").first.is_visible():
        page.get_by_role("button", name="Take the tour").first.click()
    page.locator(".st-key-rg-tour button").first.wait_for(state="visible", timeout=30_000)


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.mouse.move(0, 0)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def selected_beside_the_dag(page, index: int) -> str:
    """The call at arrival ``index`` is selected as a click selects it: ringed (and nothing faded),
    its detail beside the DAG and on the screen. Returns its id."""
    page.wait_for_function(
        DAG_JS + f"() => !!dag() && (document.querySelector('.rg-node-title') || {{}}).innerText"
        f"?.includes('arrival #{index}')",
        timeout=60_000,
    )
    wait_ready(page)
    # the scroll that brings the DAG into view
    page.wait_for_function(
        DAG_JS + "(h) => { const b = dag().getBoundingClientRect(); return b.top < h && b.bottom > 0; }",
        arg=HEIGHT,
        timeout=30_000,
    )
    settle(page)
    assert ringed(page) == [index] and faded(page) == []
    title = page.locator(".rg-node-title").first
    box, dag = title.bounding_box(), dag_box(page)
    assert box["x"] > dag["right"] - 5, (box, dag)  # beside the DAG
    assert 0 <= box["y"] and box["y"] + box["height"] <= HEIGHT, box  # on the screen
    assert dag["top"] < HEIGHT and dag["bottom"] > 0, dag  # and so is the DAG
    return title.inner_text().split()[0]


def test_compare_and_corpus_on_an_upload(samples_app):
    with browser_page(WIDTH, HEIGHT) as page:
        page.goto(samples_app)
        wait_ready(page)
        upload(page, SAMPLE)
        page.wait_for_selector("text=1 uploaded file(s)", timeout=60_000)
        wait_ready(page)
        go_to(page, "Compare")
        page.wait_for_selector("text=Compare two rollouts", timeout=60_000)
        page.wait_for_selector("text=Main sequences, aligned at their first divergence", timeout=60_000)
        sidebar = page.get_by_test_id("stSidebar").inner_text()
        assert f"1 file(s) uploaded on another page ({SAMPLE.name})" in sidebar  # the upload, still open
        assert page.get_by_test_id("stSidebar").get_by_role("radio", name="Upload").is_checked()
        body = page.inner_text("body")
        assert "A · fix-config-bug" in body and "B · list-todos" in body  # the uploaded rollouts ...
        assert BUNDLED_ONLY not in body  # ... not the bundled samples
        shot(page, "compare-upload")
        go_to(page, "Corpus audit")
        page.wait_for_selector("text=Corpus audit: 2 rollouts from 1 file", timeout=120_000)
        assert page.get_by_role("radio", name="Uploaded traces (audited now)").is_checked()
        assert BUNDLED_ONLY not in page.inner_text("body")
        settle(page)
        shot(page, "corpus-upload")
        box = page.locator('[data-testid="stDataFrame"]').last.bounding_box()
        page.mouse.click(box["x"] + 18, box["y"] + 35 + 17)  # the first row's checkbox: list-todos
        page.wait_for_selector("text=Rollout list-todos", timeout=60_000)
        wait_url(page, "session=list-todos")
        assert page.get_by_test_id("stSidebar").get_by_role("radio", name="Upload").is_checked()
        assert "1 uploaded file(s)" in page.inner_text("body")  # opened on the upload itself


def test_corpus_on_an_uploaded_audit_parquet(samples_app, tmp_path):
    table = tmp_path / "audit.parquet"
    done = subprocess.run(
        [sys.executable, "-m", "rollout_graph", "audit", str(SAMPLE), "--out", str(table), "--workers", "1"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    with browser_page(WIDTH, HEIGHT) as page:
        page.goto(f"{samples_app}/corpus")
        page.wait_for_selector("text=Audit table", timeout=60_000)
        page.get_by_text("Upload an audit Parquet", exact=True).click()
        page.get_by_test_id("stSidebar").locator('input[type="file"]').first.set_input_files(str(table))
        page.wait_for_selector("text=Corpus audit: 2 rollouts from 1 file", timeout=60_000)
        page.wait_for_selector("text=2 rollouts match", timeout=60_000)
        assert "Traceback" not in page.inner_text("body")


def test_a_search_hit_selects_its_call_beside_the_dag(samples_app):
    with browser_page(WIDTH, HEIGHT) as page:
        page.goto(f"{samples_app}/?session=fix-config-bug")
        wait_ready(page)
        box = page.get_by_role("searchbox", name="Search this rollout")
        box.fill("KeyError")
        box.press("Enter")
        hit = page.locator(".st-key-rg-search-hits button").filter(has_text="c01 · #1").first
        hit.wait_for(timeout=90_000)
        hit.click()
        assert selected_beside_the_dag(page, 1) == "c01"  # c02 arrived first
        wait_url(page, "node=c01")
        page.locator(".rg-tokens .rg-m").first.wait_for(timeout=60_000)  # the hit's token marked in the detail
        shot(page, "search-hit-selected")


def test_a_guide_button_selects_its_call_beside_the_dag(samples_app):
    with browser_page(WIDTH, HEIGHT) as page:
        page.goto(f"{samples_app}/?session=fix-config-bug")
        wait_ready(page)
        open_guide(page)
        button = page.locator(".st-key-rg-tour").get_by_role("button", name="a retry of the first call")
        button.scroll_into_view_if_needed()
        button.click()
        # the re-send (the call whose near miss says it retried the first call's prompt; c02 and c01
        # arrived before it)
        assert selected_beside_the_dag(page, 2) == "c03"
        wait_url(page, "node=c03")
        shot(page, "guide-selected")
        assert click_call(page, 6) == "c07"  # a click afterwards moves the ring as usual


def test_a_bad_upload_leads_with_the_reasons(samples_app, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(vllm_chat(Turn("a", [1, 2], [3]))) + "\n{oops\n" + json.dumps({"what": 1}) + "\n")
    with browser_page(WIDTH, HEIGHT) as page:
        page.goto(samples_app)
        wait_ready(page)
        upload(page, bad)
        warning = page.locator("[data-testid='stAlert']").filter(has_text="skipped").first
        warning.wait_for(timeout=60_000)
        text = warning.inner_text()
        assert text.startswith("2 skipped of 3 records in 1 uploaded file(s): bad.jsonl:2: not JSON"), text
        assert "bad.jsonl:3: unknown record shape (keys: what)" in text
        assert text.index("bad.jsonl:3") < text.index("1 loaded")  # the reasons first, then what loaded
        assert "Traceback" not in page.inner_text("body")
        box = warning.bounding_box()
        assert box["y"] + box["height"] <= HEIGHT  # read without scrolling
        shot(page, "bad-upload")


CLIPPED_JS = """(root) => Array.from(document.querySelectorAll(root + ' *'))
    .filter(e => e.children.length === 0 && e.innerText && e.innerText.trim()
        && e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX !== 'visible')
    .map(e => e.innerText.slice(0, 60))"""


def test_nothing_is_cut_off_at_1440x900(samples_app):
    with browser_page(WIDTH, HEIGHT) as page:
        page.goto(f"{samples_app}/?session=fix-config-bug&node=c07")
        wait_ready(page)
        page.wait_for_selector(".rg-node-title", timeout=60_000)
        page.get_by_role("button", name="All counts").first.click()  # every headline tile, in its popover
        labels = page.locator("[data-testid='stMetricLabel']:visible")
        labels.first.wait_for(timeout=30_000)
        assert "trainable tokens (rows)" in [labels.nth(k).inner_text() for k in range(labels.count())]
        assert page.evaluate(CLIPPED_JS, "[data-testid='stPopoverBody'] [data-testid='stMetricLabel']") == []  # wrap
        page.keyboard.press("Escape")  # the popover closes
        page.get_by_role("tab", name="Facts").first.click()
        page.wait_for_selector(".rg-facts", timeout=30_000)
        facts = page.locator(".rg-facts").inner_text()
        assert "prompt 556: 18 context + 538 inherited tokens (97% inherited from the parent) · sampled 96" in facts
        assert "total_tokens 652" in facts  # the whole usage line
        assert page.evaluate(CLIPPED_JS, ".rg-facts") == []
        page.get_by_role("tab", name="Tokens").first.click()
        page.get_by_role("button", name="Lowest logprob").first.click()
        inspector = page.locator("[class*='st-key-rg-inspector'] pre").first
        inspector.wait_for(timeout=30_000)
        assert "top 1" in inspector.inner_text()
        assert page.evaluate(CLIPPED_JS, "[class*='st-key-rg-inspector']") == []  # alternatives wrap
        open_guide(page)
        names = page.locator(".st-key-rg-tour button").all_inner_texts()
        assert any(n.startswith("a retry of the first call") for n in names)
        assert any(n.startswith("a compaction or resume") for n in names)
        assert page.evaluate(CLIPPED_JS, ".st-key-rg-tour") == []  # guide buttons wrap, no "…"
        page.locator(".st-key-rg-tour").scroll_into_view_if_needed()
        shot(page, "guide-buttons")
