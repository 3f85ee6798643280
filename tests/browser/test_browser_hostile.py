"""Markup in a trace's session id, node ids, file name and message text shows as text in a real
browser: no remote request (every request to a non-loopback host fails the test), no link, no
image, no KaTeX, no coloured directive (issue 21; the strings are tests/support/hostile.py's MARKUP)."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

from rollout_graph.escape import WORD_JOINER
from tests.support.browser import (
    browser_page,
    click_until,
    node_position,
    require_chromium,
    running_app,
    screenshot,
    wait_ready,
)
from tests.support.builders import TOOLS, Turn, vllm_chat
from tests.support.hostile import MARKUP

M = MARKUP
SESSION = f"s {M['image']} {M['bold']} {M['directive']} {M['math']} {M['autolink']}"
NODES = [
    # the first call's id reaches Markdown (its focus button's label) with every kind of markup
    f"c1 {M['image']} {M['bold']} {M['directive']} {M['math']} {M['autolink']} {M['www']}",
    f"c2 {M['html']} {M['directive']}",
    f"c3 {M['math']} {M['autolink']} {M['www']}",
]
MESSAGE = " ".join(M.values())
# a file name cannot hold '/': the same markup with ':' for it
FILE = f"{M['image']} {M['html']} {M['bold']} {M['directive']} {M['math']}".replace("/", ":") + ".jsonl"
LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


def _trace(folder):
    messages = [{"role": "user", "content": MESSAGE}]
    turns = [
        Turn(NODES[0], [1, 2, 3], [4, 5], tools=TOOLS, session=SESSION, messages=messages, reply=MESSAGE),
        Turn(NODES[1], [1, 2, 3, 4, 5, 6], [7], tools=TOOLS, session=SESSION, messages=messages, reply=MESSAGE),
        Turn(NODES[2], [1, 2, 3, 4, 5, 6, 7, 8], [9], tools=TOOLS, session=SESSION, messages=messages),
    ]
    (folder / FILE).write_text("".join(json.dumps(vllm_chat(t)) + "\n" for t in turns))


def test_markup_in_a_trace_stays_text_and_fetches_nothing(tmp_path):
    require_chromium()
    _trace(tmp_path)
    outside: list[str] = []

    def guard(route):
        host = urlsplit(route.request.url).hostname or ""
        if route.request.url.startswith(("data:", "blob:")) or host in LOOPBACK:
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    with running_app() as url, browser_page(height=1600) as page:
        page.route("**/*", guard)
        page.on("websocket", lambda ws: None if urlsplit(ws.url).hostname in LOOPBACK else outside.append(ws.url))
        page.goto(url)
        wait_ready(page)
        # uploaded, as a visitor would (the file name is the upload's)
        page.get_by_test_id("stRadio").get_by_text("Upload", exact=True).click()  # the source radio, not the dropzone
        page.get_by_test_id("stSidebar").locator('input[type="file"]').set_input_files(str(tmp_path / FILE))
        page.wait_for_selector(f"text=Rollout {SESSION}", timeout=30_000)
        wait_ready(page)
        click_until(page, lambda: node_position(page, 0), ".rg-node-title")
        body = page.inner_text("body").replace(WORD_JOINER, "")
        assert f"Rollout {SESSION}" in body
        assert NODES[0] in body  # the call's title
        assert "Focus on its subtree" in body  # the node id went to its help tooltip (escaped with md)
        page.get_by_role("tab", name="Messages").click()
        page.wait_for_selector(f"text={M['script']}", timeout=15_000)
        assert MESSAGE in page.inner_text("body").replace("\n", " ").replace(WORD_JOINER, "")
        page.get_by_role("tab", name="Raw JSON").click()
        page.wait_for_selector("text=The record from", timeout=15_000)
        caption = page.locator("text=The record from").first.inner_text().replace(WORD_JOINER, "")
        assert FILE in caption, caption
        screenshot(page, "hostile-markup")

        assert not outside, f"requests left the machine: {outside}"
        assert page.evaluate("() => window.__pwned") is None
        for selector in (
            "a[href*='evil.example']",
            "a[href*='203.0.113.9']",
            "img[src*='203.0.113.9']",
            ".katex",
        ):
            found = page.locator(selector).evaluate_all(
                "es => es.map(e => (e.parentElement || e).outerHTML.slice(0, 300))"
            )
            assert not found, (selector, found)
        # Streamlit colours :red[...] with a span of its own; the text is shown with its brackets instead
        assert ":red[x]" in page.inner_text("body")
        assert "<strong>bold</strong>" not in page.content()
