"""Deep links in a real browser: a link to a command-line trace the server has not read yet shows
its call first (read from the line the link names), then the whole page; an older link (no line)
still opens the call; the call detail's tabs (built only when chosen) open and show their content
on a deep link into command-line traces, the bundled samples and an upload."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from tests.support.browser import browser_page, require_chromium, running_app, wait_ready
from tests.support.builders import agent_records

WIDTH, HEIGHT = 1440, 900
N_CALLS = 1_500
SLOW_CALLS = 12_000
SESSION = "deep"
# records whether (and with what text) an element ever appeared: the early detail may be shown for
# only as long as the rest of a small trace takes to read
SEEN_JS = """
window.__seen = {};
new MutationObserver(() => {
  for (const cls of ['rg-early-title', 'rg-early-note', 'rg-node-title']) {
    const el = document.querySelector('.' + cls);
    if (el && !window.__seen[cls]) window.__seen[cls] = {text: el.textContent, at: performance.now()};
  }
}).observe(document, {childList: true, subtree: true});
"""


FINDINGS_JS = """() => Array.from(document.querySelectorAll("[data-testid='stTabPanel']"))
    .some(p => p.offsetParent !== null && (p.querySelector("[data-testid='stDataFrame']")
        || p.innerText.includes('No findings for this call')))"""


def _trace(folder: Path, n_calls: int) -> Path:
    records = agent_records(n_calls, session=SESSION)
    (folder / "trace.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


@pytest.fixture(scope="module")
def trace_folder(tmp_path_factory):
    return _trace(tmp_path_factory.mktemp("deep"), N_CALLS)


@pytest.fixture
def slow_app(tmp_path, monkeypatch):
    """A new server on a trace whose whole read takes seconds (about 44 MB): on a fast machine the
    1,500-call trace is read so soon after the early detail is drawn that the browser receives both
    in one batch and never renders the early detail."""
    require_chromium()
    monkeypatch.setenv("ROLLOUT_GRAPH_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "slow"
    folder.mkdir()
    with running_app("--", str(_trace(folder, SLOW_CALLS))) as url:
        yield url


@pytest.fixture
def fresh_app(trace_folder, tmp_path, monkeypatch):
    """A new server with an empty parsed-trace cache: nothing read until a page asks."""
    require_chromium()
    monkeypatch.setenv("ROLLOUT_GRAPH_CACHE", str(tmp_path / "cache"))
    with running_app("--", str(trace_folder)) as url:
        yield url


def tabs_show_their_content(page) -> None:
    """Every tab of the call's detail opens and shows its own content (each is built when chosen)."""
    expected = {
        "Facts": ".rg-facts",
        "Messages": ".rg-chat",
        "Sequence": "text=trainable tokens (row)",
        "Findings": "",  # a table of findings, or the caption saying there are none
        "Raw JSON": "text=The record from",
        "Tokens": ".rg-tokens .rg-t",
    }
    for name, selector in expected.items():
        page.get_by_role("tab", name=name).first.click()
        if selector:
            page.wait_for_selector(selector, timeout=60_000)
        else:
            page.wait_for_function(FINDINGS_JS, timeout=60_000)
    # Raw JSON's record left with its tab: a tab not shown holds nothing
    page.wait_for_function(
        "() => !document.querySelector(\".st-key-rg-detail [data-testid='stCode']\")", timeout=30_000
    )


def test_a_deep_link_into_a_trace_not_read_yet_shows_its_call_first(slow_app):
    line = 1_234
    node = f"c{line - 1:04d}"  # agent_records numbers calls by line
    with browser_page(WIDTH, HEIGHT) as page:
        page.add_init_script(SEEN_JS)
        page.goto(f"{slow_app}/?session={SESSION}&node={node}&file=trace.jsonl&line={line}")
        page.wait_for_selector(".rg-node-title", timeout=120_000)
        wait_ready(page, timeout=120_000)
        seen = page.evaluate("() => window.__seen")
        # the call, read from its line, before the whole page: its id and the note
        assert seen["rg-early-title"]["text"] == node
        assert "Reading the rest of the trace" in seen["rg-early-note"]["text"]
        assert seen["rg-early-title"]["at"] < seen["rg-node-title"]["at"]
        # then the whole page, at the same call; the early detail is gone
        assert page.locator(".rg-node-title").first.inner_text().startswith(node + " ")
        assert page.locator(".rg-early-title").count() == 0 and page.locator(".rg-early-note").count() == 0
        query = parse_qs(urlparse(page.url).query)
        assert query["node"] == [node] and query["file"] == ["trace.jsonl"] and query["line"] == [str(line)]
        tabs_show_their_content(page)


def test_an_older_link_without_a_line_still_opens_its_call_and_gains_one(fresh_app):
    node = "c0042"
    with browser_page(WIDTH, HEIGHT) as page:
        page.add_init_script(SEEN_JS)
        page.goto(f"{fresh_app}/?session={SESSION}&node={node}")
        page.wait_for_selector(".rg-node-title", timeout=120_000)
        wait_ready(page, timeout=120_000)
        assert "rg-early-title" not in page.evaluate("() => window.__seen")  # nothing to read it by
        assert page.locator(".rg-node-title").first.inner_text().startswith(node + " ")
        page.wait_for_function("() => location.search.includes('line=43')", timeout=30_000)
        assert "file=trace.jsonl" in page.url


def test_a_link_whose_line_holds_another_call_waits_for_the_read(fresh_app):
    with browser_page(WIDTH, HEIGHT) as page:
        page.add_init_script(SEEN_JS)
        page.goto(f"{fresh_app}/?session={SESSION}&node=c0100&file=trace.jsonl&line=7")  # line 7 is c0006
        page.wait_for_selector(".rg-node-title", timeout=120_000)
        assert "rg-early-title" not in page.evaluate("() => window.__seen")  # never another call's detail
        assert page.locator(".rg-node-title").first.inner_text().startswith("c0100 ")
        page.wait_for_function("() => location.search.includes('line=101')", timeout=30_000)  # corrected


def test_tabs_on_a_deep_link_into_the_bundled_samples():
    require_chromium()
    with running_app() as url, browser_page(WIDTH, HEIGHT) as page:
        page.goto(f"{url}/?session=fix-config-bug&node=c07")
        wait_ready(page)
        page.wait_for_selector(".rg-node-title", timeout=60_000)
        assert "file=" not in page.url and "line=" not in page.url  # bundled samples: no file is named
        tabs_show_their_content(page)


def test_tabs_on_an_upload(trace_folder):
    require_chromium()
    with running_app() as url, browser_page(WIDTH, HEIGHT) as page:
        page.goto(f"{url}/?source=upload&session={SESSION}&node=c0005")
        page.wait_for_selector("text=drop the same file in the sidebar", timeout=60_000)
        page.get_by_test_id("stSidebar").locator('input[type="file"]').set_input_files(
            str(trace_folder / "trace.jsonl")
        )
        page.wait_for_selector(".rg-node-title", timeout=120_000)
        assert page.locator(".rg-node-title").first.inner_text().startswith("c0005 ")
        assert "line=" not in page.url  # an upload's file is not re-read by a link
        tabs_show_their_content(page)
