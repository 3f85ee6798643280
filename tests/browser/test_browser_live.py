"""The app follows a growing trace in headless Chromium: calls appended to the file (and a new
file in the folder) appear without a click, the newest call is ringed in the DAG, "follow the
newest call" selects it, and pausing stops following."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support.browser import (
    DAG_JS,
    browser_page,
    node_position,
    require_chromium,
    running_app,
    screenshot,
    wait_ready,
    wait_url,
)
from tests.support.builders import Turn, jsonl, vllm_chat

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives the app in headless Chromium

SAMPLE = Path(__file__).resolve().parents[2] / "sample_traces" / "vllm" / "agent-rollouts.jsonl"
STATUS = "() => (document.querySelector('.rg-live') || {}).innerText || ''"


def status(page) -> str:
    return page.evaluate(STATUS)


def wait_status(page, text: str, timeout: float = 20_000) -> None:
    page.wait_for_function(f"() => ({STATUS})().includes({text!r})", timeout=timeout)


def dag_points(page) -> int:
    return page.evaluate(DAG_JS + "() => dag() ? dag()._fullData[1].x.length : -1")


def newest_marked(page) -> bool:
    return page.evaluate(DAG_JS + "() => !!dag() && dag()._fullData.some(t => t.name === 'newest')")


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


@pytest.fixture()
def capture(tmp_path):
    require_chromium()
    folder = tmp_path / "capture"
    folder.mkdir()
    lines = SAMPLE.read_bytes().splitlines(keepends=True)
    (folder / "run.jsonl").write_bytes(b"".join(lines[:4]))
    return folder, lines


def test_appended_calls_appear_without_a_click(capture):
    folder, lines = capture
    with running_app("--", str(folder)) as url, browser_page(height=1300) as page:
        page.goto(url)
        wait_ready(page)
        wait_status(page, "4 calls")
        assert status(page).startswith("Following")
        before = dag_points(page)
        # the rest of the rollout, a line at a time, the last one in two halves
        for raw in lines[4:9]:
            append(folder / "run.jsonl", raw)
        start = time.monotonic()
        wait_status(page, "9 calls")
        page.wait_for_function(DAG_JS + f"() => dag() && dag()._fullData[1].x.length > {before}", timeout=20_000)
        print(f"appended calls drawn after {time.monotonic() - start:.2f} s")
        assert newest_marked(page)
        half = lines[9]
        append(folder / "run.jsonl", half[:50])
        wait_status(page, "unfinished line")  # a partial line waits, and is no bad record
        assert "9 calls" in status(page)
        assert "skipped" not in page.inner_text("body")
        append(folder / "run.jsonl", half[50:])
        wait_status(page, "10 calls")
        # a new file in the followed folder: a new rollout in the table
        (folder / "other.jsonl").write_bytes(jsonl([vllm_chat(Turn("z1", [5, 6], [7], session="late-session"))]))
        wait_status(page, "2 file(s) · 11 calls")
        page.wait_for_selector("text=late-session", state="attached", timeout=20_000)
        assert "Traceback" not in page.inner_text("body")
        screenshot(page, "live-following", docs=True)


def test_follow_newest_selects_each_new_call_and_pause_stops(capture):
    folder, lines = capture
    with running_app("--", str(folder)) as url, browser_page(height=1300) as page:
        page.goto(url)
        wait_ready(page)
        wait_status(page, "4 calls")
        page.get_by_text("Follow the newest call").click()
        page.wait_for_selector(".rg-node-title", timeout=20_000)
        title = "() => (document.querySelector('.rg-node-title') || {}).innerText || ''"
        assert "c03" in page.evaluate(title)  # the newest call of the open rollout (list-todos)
        append(folder / "run.jsonl", lines[4])  # list-todos c04
        wait_status(page, "5 calls")
        page.wait_for_function(f"() => ({title})().includes('c04')", timeout=20_000)
        wait_url(page, "node=c04")
        page.get_by_text("Pause following").click()
        wait_status(page, "Paused")
        append(folder / "run.jsonl", b"".join(lines[5:8]))  # ... list-todos c05
        # the page runs again (any control): paused, it draws what it had and reads nothing
        page.get_by_text("Show whitespace in token views").click()
        wait_ready(page)
        assert "5 calls" in status(page) and "Paused" in status(page)
        page.get_by_text("Pause following").click()
        wait_status(page, "8 calls")
        page.wait_for_function(f"() => ({title})().includes('c05')", timeout=20_000)


def test_an_empty_capture_folder_waits_for_its_first_call(tmp_path):
    require_chromium()
    folder = tmp_path / "capture"
    folder.mkdir()
    with running_app("--", str(folder)) as url, browser_page() as page:
        page.goto(url)
        page.wait_for_selector("text=Waiting for the first call", timeout=60_000)
        assert "0 calls" in status(page)
        (folder / "run.jsonl").write_bytes(b"".join(SAMPLE.read_bytes().splitlines(keepends=True)[:5]))
        wait_ready(page)
        wait_status(page, "5 calls")
        # the whole page was drawn again for the first calls: the sidebar offers the file picker
        page.get_by_text("File", exact=True).wait_for(timeout=30_000)
        assert "Traceback" not in page.inner_text("body")


def test_clicks_in_the_dag_still_select_after_new_calls(capture):
    folder, lines = capture
    title = "() => (document.querySelector('.rg-node-title') || {}).innerText || ''"
    with running_app("--", str(folder)) as url, browser_page(height=1300) as page:
        page.goto(url)
        wait_ready(page)
        wait_status(page, "4 calls")
        x, y = node_position(page, 0)
        page.mouse.click(x, y)
        page.mouse.move(0, 0)
        page.wait_for_function(f"() => ({title})().includes('c02')", timeout=20_000)
        append(folder / "run.jsonl", b"".join(lines[4:20]))
        page.wait_for_function(DAG_JS + "() => dag() && dag()._fullData[1].x.length == 12", timeout=30_000)
        wait_ready(page)
        assert "c02" in page.evaluate(title)  # the call detail stayed
        x, y = node_position(page, 11)
        page.mouse.click(x, y)
        page.mouse.move(0, 0)
        page.wait_for_function(f"() => ({title})().includes('c12')", timeout=20_000)
        wait_url(page, "node=c12")
