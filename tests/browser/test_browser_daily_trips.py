"""What a daily user tripped on, in headless Chromium at 1440x900, on the bundled samples and on a
command-line trace without a tokenizer: every tab of the call detail readable without a scroll
arrow (Raw JSON found by its name), and each token's text kept whole when the token view wraps
(``<123456>`` never broken mid-number)."""

from __future__ import annotations

import pytest

from tests.support.browser import browser_page, require_chromium, running_app, screenshot, wait_ready
from tests.support.builders import Turn, vllm_chat, write

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives the app in Chromium

WIDTH, HEIGHT = 1440, 900
TAB_NAMES = ["Tokens", "Facts", "Messages", "Sequence", "Findings", "Raw JSON"]


@pytest.fixture(scope="module")
def samples_app():
    require_chromium()
    with running_app() as url:
        yield url


@pytest.fixture(scope="module")
def untokenized_app(tmp_path_factory):
    """`rollout-graph view FOLDER` on a trace that names no tokenizer: tokens show as ``<id>``."""
    require_chromium()
    folder = tmp_path_factory.mktemp("ids")
    prompt = [100_000 + 7919 * k % 900_000 for k in range(400)]  # six-digit ids, wrapping over many lines
    sampled = [200_000 + 104_729 * k % 800_000 for k in range(120)]
    turn = Turn("c0", prompt, sampled, logprobs=[-0.5] * len(sampled), session="ids")
    write(folder / "ids.jsonl", [vllm_chat(turn)])
    with running_app(str(folder), via_cli=True) as url:
        yield url


def tabs_fit(page) -> None:
    """Every tab label of the call detail inside its tab list, nothing scrolled out of it."""
    page.wait_for_selector(".st-key-rg-detail [role='tab']", timeout=30_000)
    found = page.evaluate(
        """() => {
            const list = document.querySelector(".st-key-rg-detail [role='tablist']");
            const box = list.getBoundingClientRect();
            const tabs = Array.from(list.querySelectorAll("[role='tab']")).map(t => {
                const b = t.getBoundingClientRect();
                return {text: t.innerText, left: b.left, right: b.right};
            });
            return {scroll: list.scrollWidth, client: list.clientWidth, left: box.left, right: box.right, tabs};
        }"""
    )
    assert [t["text"].split(" (")[0] for t in found["tabs"]] == TAB_NAMES
    assert found["scroll"] <= found["client"], found  # nothing to scroll to ...
    arrows = ".st-key-rg-detail [data-testid='stTabsScrollRight'], .st-key-rg-detail [data-testid='stTabsScrollLeft']"
    assert page.locator(arrows).count() == 0  # ... and no arrow drawn over the last label
    for tab in found["tabs"]:
        assert found["left"] - 0.5 <= tab["left"] and tab["right"] <= found["right"] + 0.5, (tab, found)


def test_the_six_tabs_fit_the_detail_pane_on_the_samples(samples_app):
    with browser_page(WIDTH, HEIGHT) as page:
        page.goto(f"{samples_app}/?session=fix-config-bug&node=c07")
        wait_ready(page)
        tabs_fit(page)
        screenshot(page, "daily-trips-tabs")
        page.get_by_role("tab", name="Raw JSON").first.click()  # the tab a user knows, by its name
        page.wait_for_selector("text=The record from", timeout=20_000)


def token_lines(page) -> dict:
    """How the token view's spans lie: how many lines the view takes, and the spans drawn on more
    than one line (an inline span broken across lines has one client rect per line)."""
    return page.evaluate(
        """() => {
            const spans = Array.from(document.querySelectorAll('.rg-tokens .rg-t'));
            const tops = new Set(spans.map(s => Math.round(s.getBoundingClientRect().top)));
            // a token holding a newline ends its line by itself: only the others must lie on one line
            const broken = spans.filter(s => !s.textContent.includes('\\n') && s.getClientRects().length > 1)
                .map(s => s.innerText);
            return {spans: spans.length, lines: tops.size, broken, texts: spans.slice(0, 3).map(s => s.innerText)};
        }"""
    )


def test_id_tokens_stay_whole_when_the_token_view_wraps(untokenized_app):
    with browser_page(WIDTH, HEIGHT) as page:
        page.goto(f"{untokenized_app}/?session=ids&node=c0")
        wait_ready(page)
        tabs_fit(page)
        page.wait_for_selector(".rg-tokens .rg-t", timeout=30_000)
        page.locator(".rg-tokens").first.scroll_into_view_if_needed()
        lines = token_lines(page)
        assert lines["texts"][0].startswith("<1") and lines["texts"][0].endswith(">")  # ids, no tokenizer
        assert lines["spans"] > 100 and lines["lines"] > 5  # the view wraps over many lines ...
        assert lines["broken"] == []  # ... between tokens, never inside one
        screenshot(page, "daily-trips-id-tokens")


def test_sample_tokens_stay_whole_when_the_token_view_wraps(samples_app):
    with browser_page(WIDTH, HEIGHT) as page:
        page.goto(f"{samples_app}/?session=fix-config-bug&node=c07")
        wait_ready(page)
        page.wait_for_selector(".rg-tokens .rg-t", timeout=30_000)
        lines = token_lines(page)
        assert lines["lines"] > 1 and lines["broken"] == [], lines
