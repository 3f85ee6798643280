"""The "what your trainer trains" panel in the real app, in headless Chromium, opened as a user
opens it (docs/reconcile.md, "The lens in every surface"): a link to a bundled rollout, a click on
the panel's toggle, the frameworks side by side, then a click on a framework's tab shows that
framework's sentences and a row's tokens coloured by provenance. A screenshot goes to
tests/artifacts/trainers-panel.png."""

from __future__ import annotations

import pytest

import rollout_graph as rg
from rollout_graph.analysis.reconcile import LABELS
from rollout_graph.ui.builders import trainers
from tests.support.browser import ROOT, browser_page, require_chromium, running_app, screenshot, settle

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives the app in Chromium

SESSION = "claude-code-continue"
TOGGLE = "What your trainer trains"
# the panel's tabs that are visible: the frameworks' labels, in order
TABS_JS = """() => Array.from(document.querySelectorAll('[role="tab"]'))
    .filter(t => t.offsetParent !== null).map(t => t.innerText.trim())"""
# the provenance titles of the token strip in the open tab
STRIP_JS = """() => Array.from(document.querySelectorAll('[data-testid="stTabPanel"]'))
    .filter(p => p.offsetParent !== null)
    .flatMap(p => Array.from(p.querySelectorAll('span[title]')).map(s => s.getAttribute('title')))"""


@pytest.fixture(scope="module")
def samples_app():
    require_chromium()
    with running_app() as url:
        yield url


def _expected():
    """What the library says of the rollout: the panel must show it."""
    rollout = rg.load(ROOT / "sample_traces" / "harnesses" / f"{SESSION}.jsonl.gz")[SESSION]
    found = trainers.results(rollout, eos_token_id=2)  # SmolLM2's <|im_end|>, as the app reads it
    return rollout, {r.framework: r for r in found}


def test_a_user_opens_the_panel_and_reads_each_framework(samples_app):
    rollout, found = _expected()
    with browser_page(1440, 900) as page:
        page.goto(f"{samples_app}/?session={SESSION}")  # a link to the rollout, as the app shares it
        page.get_by_text(f"Rollout {SESSION}", exact=False).first.wait_for(timeout=120_000)
        settle(page)
        assert not {LABELS["nemo-gym"], LABELS["nemo-rl"]} & set(page.evaluate(TABS_JS))  # built only once open
        page.get_by_text(TOGGLE, exact=False).first.click()  # the toggle's label, as a user clicks it
        page.get_by_role("tab", name=LABELS["nemo-rl"], exact=True).wait_for(timeout=120_000)
        settle(page)
        tabs = page.evaluate(TABS_JS)
        assert [t for t in tabs if t in LABELS.values()] == list(LABELS.values())
        body = page.inner_text("body")
        # TRL's tab is open first: its sentences name the realign and the break that caused it
        assert "TRL realigns" in body and "re-tokenizes" in body
        assert "sampled" in page.evaluate(STRIP_JS)  # a TRL row's tokens, its trained ones coloured
        screenshot(page, "trainers-panel")

        page.get_by_role("tab", name=LABELS["nemo-rl"], exact=True).click()
        page.get_by_text("NeMo-RL splices", exact=False).first.wait_for(timeout=60_000)
        settle(page)
        strip = page.evaluate(STRIP_JS)
        expected_off_policy = found["nemo-rl"].summary()["n_trained_never_sampled"]
        assert expected_off_policy > 0 and "off_policy" in strip  # tokens trained the model never sampled

        page.get_by_role("tab", name=LABELS["nemo-gym"], exact=True).click()
        page.get_by_text("NeMo Gym masks the whole sample", exact=False).first.wait_for(timeout=60_000)
        settle(page)
        assert "only one chain is delivered per rollout" in page.inner_text("body")
        screenshot(page, "trainers-panel-nemo-gym")
