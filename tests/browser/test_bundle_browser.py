"""A bundle opened from disk in Chromium with every network request blocked: it draws, a click
shows a call's tokens, and hostile trace text never runs (graph/reports/bundle.py)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from rollout_graph.cli import main
from rollout_graph.reports import notes as notes_io
from tests.reports.test_bundle import MORE, PAYLOADS, VLLM, hostile_rollout
from tests.support.browser import browser_page, painted, require_chromium, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # opens the bundle in headless Chromium

READY = "body[data-ready='1']"


@contextlib.contextmanager
def offline_page(width: int = 1440, height: int = 900):
    """A page whose every request but file:// and data: is aborted and recorded."""
    with browser_page(width, height) as page:
        blocked: list[str] = []
        errors: list[str] = []
        dialogs: list[str] = []

        def route(r) -> None:
            url = r.request.url
            if url.startswith(("file:", "data:")):
                r.continue_()
            else:
                blocked.append(url)
                r.abort()

        page.route("**/*", route)
        page.on("request", lambda req: None if req.url.startswith(("file:", "data:")) else blocked.append(req.url))
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.blocked, page.errors, page.dialogs = blocked, errors, dialogs  # type: ignore[attr-defined]
        yield page
        assert not blocked, blocked
        assert not errors, errors
        assert not dialogs, dialogs


def write_bundle(tmp_path: Path, *args: str, name: str = "rollout.html") -> Path:
    out = tmp_path / name
    assert main(["bundle", *args, "--out", str(out)]) == 0
    return out


def test_bundle_opens_offline_and_a_click_shows_the_call_tokens(tmp_path):
    require_chromium()
    traces = tmp_path / "traces"
    traces.mkdir()
    (traces / "agent-rollouts.jsonl").write_bytes((VLLM / "agent-rollouts.jsonl").read_bytes())
    notes_io.write_notes(
        traces / notes_io.SIDECAR,
        [notes_io.make_note("fix-config-bug", "the pip answer is wrong: drop", "drop", node="c06", author="ana")],
    )
    out = write_bundle(tmp_path, str(traces), "--session", "fix-config-bug")
    with offline_page() as page:
        page.goto(out.as_uri())
        page.wait_for_selector(READY)
        assert page.locator("g.node").count() >= 20
        assert "Click a call in the graph" in page.inner_text("#detail")
        page.click("g.node[data-id='c05']")
        page.wait_for_selector("#detail .call-id")
        assert page.inner_text("#detail .call-id") == "c05"
        tokens = page.locator("#detail .tokens span.t")
        assert tokens.count() == 117  # 21 context + 96 sampled tokens, as the library counts them
        assert page.locator("#detail .tokens span.t.c").count() == 21
        text = page.inner_text("#detail .tokens")
        assert "pip" in text and "install" in text
        sampled = page.locator("#detail .tokens span.t:not(.c)").first
        tip = sampled.get_attribute("title")
        assert "logprob" in tip and "alternatives:" in tip and "trained (mask 1)" in tip
        sampled.click()
        assert page.inner_text(".inspector") == tip
        assert "Fork: its 2 children" in page.inner_text("#detail")
        assert page.evaluate("() => location.hash") == "#session=fix-config-bug&node=c05"
        page.get_by_role("tab", name="Messages").click()
        assert "ASSISTANT" in page.inner_text("#detail .chat").upper()
        # the keys walk the graph: left to the parent, right to the first child, down to the next sibling
        page.keyboard.press("ArrowLeft")
        assert page.inner_text("#detail .call-id") == "c04"
        page.keyboard.press("ArrowRight")
        assert page.inner_text("#detail .call-id") == "c05"
        page.keyboard.press("ArrowRight")
        page.keyboard.press("ArrowDown")
        assert page.inner_text("#detail .call-id") == "c07"
        page.keyboard.press("Escape")
        assert "Click a call in the graph" in page.inner_text("#detail")
        # the note travels: shown beside its call
        page.click("g.node[data-id='c06']")
        assert "the pip answer is wrong: drop" in page.inner_text("#detail .notes")
        # the link to a call reopens it
        page.goto(out.as_uri() + "#session=fix-config-bug&node=c11")
        page.reload()
        page.wait_for_selector(READY)
        assert page.inner_text("#detail .call-id") == "c11"
    # a collapsed chain drawing its calls on a click: test_a_collapsed_chain_draws_every_call_on_a_click
    # (laid out as the app lays it out, every call of both fix-config-bug traces stays a node)


def test_bundle_opens_at_node_and_says_what_it_left_out(tmp_path):
    require_chromium()
    out = write_bundle(tmp_path, str(VLLM), "--session", "fix-config-bug", "--max-detail", "1000", "--node", "c05")
    with offline_page() as page:
        page.goto(out.as_uri())
        page.wait_for_selector(READY)
        assert page.inner_text("#detail .call-id") == "c05"
        assert page.locator("#detail .tokens span.t").count() == 117
        assert "24 of 25" in page.inner_text("#left-out")
        page.click("g.node[data-id='c04']")
        command = page.inner_text("#detail .command")
        assert command == f"rollout-graph bundle {VLLM} --session fix-config-bug --calls c04 --out rollout.html"


def test_hostile_trace_never_runs_in_the_bundle(tmp_path):
    require_chromium()
    out = write_bundle(tmp_path, str(hostile_rollout(tmp_path)))
    with offline_page(height=1400) as page:
        page.goto(out.as_uri())
        page.wait_for_selector(READY)
        page.locator("g.node").first.click()
        page.wait_for_selector("#detail .tokens span.t")
        for span in page.locator("#detail .tokens span.t").all():
            span.hover()
            span.click()
        page.get_by_role("tab", name="Messages").click()
        page.locator("summary").first.click()  # the findings list, with the call's id in it
        page.locator(".note-text").first.hover()  # the sidecar's note, beside its call
        body = page.inner_text("body")
        screenshot(page, "bundle-hostile")
        assert page.evaluate("() => window.__pwned") is None
        assert page.locator("img, iframe, svg:not(.dag-svg), b, a").count() == 0
        assert page.locator("script").count() == 2
        for payload in [*PAYLOADS[:2], MORE["message"], MORE["note"]]:
            assert payload in body, payload  # shown literally
        assert '"cmd": "<svg onload=' in body and MORE["tool"] in body  # the tool call, as text
        assert PAYLOADS[1] in page.title()


def test_docs_screenshot(tmp_path):
    """docs/images/bundle.png (``ROLLOUT_GRAPH_DOCS_SCREENSHOTS=1`` writes it there)."""
    require_chromium()
    out = write_bundle(tmp_path, str(VLLM), "--session", "fix-config-bug", "--node", "c05")
    with offline_page(1440, 900) as page:
        page.goto(out.as_uri())
        page.wait_for_selector(READY)
        page.locator("#detail .tokens span.t:not(.c)").nth(5).click()
        page.evaluate("() => window.scrollTo(0, document.querySelector('.split').offsetTop - 6)")
        painted(page)
        path = screenshot_viewport(page, "bundle")
        assert path.stat().st_size > 10_000


def screenshot_viewport(page, name: str) -> Path:
    """Like tests/browser.screenshot, but the 1440x900 viewport (what a reader sees first)."""
    path = screenshot(page, name, docs=True)
    page.screenshot(path=str(path), full_page=False)
    return path


def test_several_rollouts_in_one_file_and_a_picker(tmp_path):
    require_chromium()
    out = write_bundle(tmp_path, str(VLLM))
    with offline_page() as page:
        page.goto(out.as_uri())
        page.wait_for_selector(READY)
        first = page.inner_text("h1")
        page.select_option("select[aria-label='rollout']", label="list-todos")
        assert page.inner_text("h1") == "Rollout list-todos" != first
        assert page.inner_text(".metric .value >> nth=0") == "18"
        page.click("g.node[data-id='c05']")
        assert page.evaluate("() => location.hash") == "#session=list-todos&node=c05"
        page.reload()
        page.wait_for_selector(READY)
        assert page.inner_text("h1") == "Rollout list-todos" and page.inner_text("#detail .call-id") == "c05"


def test_every_hostile_corpus_case_opens_and_draws(tmp_path):
    """Each readable case of tests/support/hostile.py, bundled and opened offline: its first calls clicked
    (the bad record sits between two good ones), tokens and messages drawn, no script error,
    nothing run, nothing fetched."""
    require_chromium()
    from tests.support.hostile import cases

    pages = []
    for case in cases():
        if case.bomb:
            continue
        path = tmp_path / f"{case.name}{case.suffix}"
        case.write(path)
        out = tmp_path / f"{case.name}.html"
        if main(["bundle", str(path), "--out", str(out), *case.flags]) == 0:
            pages.append(out)
    assert len(pages) >= 20
    with offline_page() as page:
        for out in pages:
            page.goto(out.as_uri())
            page.wait_for_selector(READY)
            for k in range(min(8, page.locator("g.node").count())):  # the corpus's bad records sit early
                page.locator("g.node").nth(k).click()
                page.get_by_role("tab", name="Messages").click()
            assert page.evaluate("() => window.__pwned") is None, out.name


def test_a_collapsed_chain_draws_every_call_on_a_click(tmp_path):
    """Laid out as the app lays it out (rollout_graph.analysis.layout): a chain the app collapses is
    collapsed here too, and a click on its +N draws every call (the app's layout with no chain
    collapsed)."""
    require_chromium()
    from tests.browser.test_browser_dag import conversation_records
    from tests.support.builders import write

    trace = write(tmp_path / "chains.jsonl", conversation_records(60, session="chains", chain=12, retry_every=0))
    out = write_bundle(tmp_path, str(trace))
    with offline_page() as page:
        page.goto(out.as_uri())
        page.wait_for_selector(READY)
        before = page.locator("g.node").count()
        page.click("text.chain-label >> nth=0")
        page.wait_for_function("(n) => document.querySelectorAll('g.node').length > n", arg=before)
        assert page.locator("g.node").count() == 60
