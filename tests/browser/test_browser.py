"""The real app in headless Chromium: click a node in the DAG and see its detail, open a deep
link, upload a broken file, and load a hostile trace whose payloads must stay text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.browser import (
    ROOT,
    browser_page,
    click_table_row,
    node_position,
    require_chromium,
    running_app,
    screenshot,
    settle,
    wait_ready,
    wait_url,
)
from tests.support.builders import TOOLS, Turn, vllm_chat

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives the app in headless Chromium


@pytest.fixture(scope="module")
def samples_app():
    require_chromium()
    with running_app() as url:
        yield url


# The explorer's title names the open rollout: "Rollout <id>" before the span of its shapes.
TITLE_IS = "(t) => { const e = document.querySelector('.rg-title'); return !!e && !!e.firstChild && e.firstChild.textContent === t; }"


def header_text(page) -> str:
    return page.locator(".rg-node-title").first.inner_text()


def test_click_a_node_in_the_dag_shows_its_detail(samples_app):
    with browser_page(height=1400) as page:
        page.goto(samples_app)
        wait_ready(page)
        screenshot(page, "overview", docs=True)
        x, y = node_position(page, 6)  # c07, a fork on the main line
        page.mouse.click(x, y)
        page.wait_for_selector("text=arrival #6", timeout=30_000)
        assert "c07" in header_text(page)
        wait_url(page, "node=c07")
        page.wait_for_selector(".rg-tokens .rg-t")
        page.mouse.move(0, 0)
        page.locator(".rg-tokens").first.scroll_into_view_if_needed()
        screenshot(page, "node-detail", docs=True)
        page.get_by_role("tab", name="Messages").click()
        page.wait_for_selector(".rg-chat", timeout=30_000)  # built when chosen
        settle(page)
        screenshot(page, "messages", docs=True)


def test_deep_link_opens_the_same_view(samples_app):
    with browser_page(height=1400) as page:
        page.goto(f"{samples_app}/?session=list-todos&node=c05")
        wait_ready(page)
        page.wait_for_selector("text=arrival #", timeout=30_000)
        assert "c05" in header_text(page)
        assert "Rollout list-todos" in page.inner_text("body")
        page.get_by_role("tab", name="Sequence").click()
        page.wait_for_selector("text=trainable tokens (row)", timeout=30_000)  # built when chosen
        settle(page)
        screenshot(page, "sequence", docs=True)


def test_upload_a_broken_file_shows_the_report(samples_app, tmp_path):
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps(vllm_chat(Turn("a", [1, 2], [3]))) + "\n{oops\n")
    with browser_page() as page:
        page.goto(samples_app)
        wait_ready(page)
        page.get_by_test_id("stRadio").get_by_text("Upload", exact=True).click()  # the source radio, not the dropzone
        page.get_by_test_id("stSidebar").locator('input[type="file"]').set_input_files(str(broken))
        page.wait_for_selector("text=1 skipped", timeout=30_000)
        assert "Traceback" not in page.inner_text("body")
        page.get_by_text("Load report: 1 skipped records").click()
        settle(page)
        screenshot(page, "load-report", docs=True)


PAYLOADS = {
    "node": "<script>window.__pwned='node'</script>",
    "model": "<img src=x onerror=\"window.__pwned='model'\">",
    "message": "<iframe srcdoc=\"<script>parent.__pwned='msg'</script>\"></iframe>[click](javascript:alert(1))",
    "argument": "<img src=x onerror=\"window.__pwned='args'\">",
    "token": "<b onmouseover=\"window.__pwned='tok'\">bold</b>",
    "session": "<svg onload=\"window.__pwned='session'\">",
}


def hostile_trace(folder: Path) -> None:
    turn = Turn(
        PAYLOADS["node"],
        [1, 2, 3],
        [7, 8],
        tools=TOOLS,
        session=PAYLOADS["session"],
        messages=[{"role": "user", "content": PAYLOADS["message"]}],
        reply=PAYLOADS["message"],
    )
    record = vllm_chat(turn, token_text=True)
    record["response"]["model"] = PAYLOADS["model"]
    choice = record["response"]["choices"][0]
    choice["logprobs"]["content"][0]["token"] = PAYLOADS["token"]
    choice["message"]["tool_calls"] = [
        {
            "id": "t",
            "type": "function",
            "function": {"name": "bash<script>", "arguments": json.dumps({"cmd": PAYLOADS["argument"]})},
        }
    ]
    (folder / "hostile.jsonl").write_text(json.dumps(record) + "\n")


def test_hostile_trace_payloads_stay_text(tmp_path):
    require_chromium()
    hostile_trace(tmp_path)
    with running_app("--", str(tmp_path)) as url, browser_page(height=1600) as page:
        dialogs = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(url)
        wait_ready(page)
        x, y = node_position(page, 0)
        page.mouse.move(x, y)
        page.mouse.click(x, y)
        page.wait_for_selector("text=arrival #0", timeout=30_000)
        for span in page.locator(".rg-t:visible").all()[:12]:
            span.hover()
        page.get_by_role("tab", name="Messages").click()
        page.wait_for_selector(".rg-chat", timeout=30_000)  # built when chosen
        settle(page)
        # every image in the page has loaded or failed: an onerror payload would have run by now
        page.wait_for_function("() => Array.from(document.images).every(i => i.complete)", timeout=30_000)
        body = page.inner_text("body")
        screenshot(page, "hostile")
        assert page.evaluate("() => window.__pwned") is None
        assert not dialogs
        for key in ("node", "message"):
            assert PAYLOADS[key].split("[click]")[0] in body, key
        assert '"cmd": "<img src=x onerror=' in body  # pretty-printed JSON, shown as text
        assert PAYLOADS["session"] in body
        assert page.locator("iframe[srcdoc]").count() == 0
        assert page.locator("a[href^='javascript']").count() == 0


def test_corpus_row_opens_its_rollout_in_the_explorer(samples_app):
    with browser_page(height=1400) as page:
        page.goto(samples_app)
        wait_ready(page)
        page.get_by_text("Corpus audit", exact=True).click()
        harnesses = len(list((ROOT / "sample_traces" / "harnesses").glob("*.jsonl.gz")))
        page.wait_for_selector(
            f"text=Corpus audit: {4 + harnesses} rollouts from {3 + harnesses} files", timeout=60_000
        )
        settle(page)
        screenshot(page, "corpus", docs=True)
        # the vLLM sample's fix-config-bug, found by its cells (the eval and OpenEnv samples hold
        # rollouts named after it too: fix-config-bug.eval, fix-config-bug.openenv)
        click_table_row(page, {"file": "sample_traces/vllm/agent-rollouts.jsonl", "session_id": "fix-config-bug"})
        page.wait_for_function(TITLE_IS, arg="Rollout fix-config-bug", timeout=60_000)
        page.wait_for_function("() => new URLSearchParams(location.search).get('session') === 'fix-config-bug'")
        assert page.get_by_test_id("stSidebar").get_by_role("radio", name="Bundled samples").is_checked()
        assert "/work/" not in page.inner_text("body")
