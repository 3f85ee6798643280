"""Issue 28: a visitor's upload loads in a capped child process (views/state/upload_worker.py),
seen from two browser pages: a slow upload never holds up another visitor's small one, closing
the page kills its load, and a load over the time budget ends in a named message."""

from __future__ import annotations

import os
import time
from pathlib import Path

import orjson

from tests.support.browser import browser_page, running_app, screenshot, settle, wait_ready
from tests.support.hostile import good
from tests.support.waiting import wait_until

BUDGET = 30


def _sessions(path: Path, n: int, prefix: str) -> Path:
    record = orjson.dumps({**good("CALLID", [1, 2, 3], [4]), "session_id": "SESSID"})
    path.write_bytes(
        b"\n".join(
            record.replace(b"CALLID", b"c%d" % i).replace(b"SESSID", prefix.encode() + b"%d" % i) for i in range(n)
        )
        + b"\n"
    )
    return path


def _workers_of(port: int) -> list[int]:
    """Pids of load children (``python -m rollout_graph.worker``) of the server on ``port``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            if b"rollout_graph.worker" not in cmdline:
                continue
            ppid = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1]
            parent = Path(f"/proc/{ppid}/cmdline").read_bytes()
        except (OSError, IndexError):
            continue
        if b"\0%d\0" % port in parent:
            found.append(int(entry))
    return found


# what the slow page may show instead of the budget message: each is a different outcome, named at once
_OTHER_OUTCOMES = ("was cancelled", "of memory to analyse", "could not be analysed", "Rollout b")


def _budget_message(page, port: int) -> str:
    """The slow page's text once it names the budget; fails at once, quoting the page, when it
    shows another outcome. Polls the page's text (no wait on the tab repainting: a page in the
    background of a busy browser is drawn late), and names what the page and the server showed."""
    wanted = f"took longer than {BUDGET} s to analyse"

    def shown() -> str | None:
        text = page.inner_text("body").replace("\u2060", "")
        if wanted in text:
            return text
        for other in _OTHER_OUTCOMES:
            assert other not in text, f"the slow page shows {other!r} instead of the budget message: {text[:800]!r}"
        return None

    try:
        return wait_until(shown, timeout=BUDGET + 90, what=f"{wanted!r} on the slow page", interval=0.5)
    except AssertionError as exc:
        screenshot(page, "upload-worker-over-budget-missing")
        children = _workers_of(port)
        raise AssertionError(
            f"{exc}; load children of the server: {children or 'none'}; "
            f"the page shows: {page.inner_text('body')[:800]!r}"
        ) from None


def _upload(page, url: str, path: Path) -> None:
    page.goto(url)
    wait_ready(page)
    page.get_by_test_id("stRadio").get_by_text("Upload", exact=True).click()
    page.get_by_test_id("stSidebar").locator('input[type="file"]').set_input_files(str(path))


def test_a_slow_upload_holds_up_no_one_dies_with_its_page_and_stops_at_the_budget(tmp_path, monkeypatch):
    monkeypatch.setenv("ROLLOUT_GRAPH_MAX_LOAD_SECONDS", str(BUDGET))
    # more rollouts than the default max_sessions, so that the load is past the budget on any machine
    # (250,000 one-call rollouts, 150 MB: about a minute of work on an idle core, more under load)
    monkeypatch.setenv("ROLLOUT_GRAPH_MAX_SESSIONS", "1000000")
    big = _sessions(tmp_path / "big.jsonl", 250_000, "b")
    other_big = _sessions(tmp_path / "other-big.jsonl", 250_000, "o")
    small = _sessions(tmp_path / "small.jsonl", 1, "small-")
    with running_app() as url, browser_page() as slow_page:
        port = int(url.rsplit(":", 1)[1])
        browser = slow_page.context.browser
        _upload(slow_page, url, big)
        slow_page.wait_for_selector("text=Loading", timeout=60_000)
        slow_pid = wait_until(lambda: _workers_of(port) or None, timeout=30, what="the slow upload's child process")

        # a second visitor's small upload is drawn before the slow one is (which runs on to its budget)
        small_page = browser.new_page(viewport={"width": 1500, "height": 1100})
        _upload(small_page, url, small)
        small_page.wait_for_selector("text=Rollout small-0", timeout=60_000)
        assert "Rollout b" not in slow_page.inner_text("body")
        screenshot(small_page, "upload-worker-small-beside-slow")
        screenshot(slow_page, "upload-worker-slow-in-progress")

        # a third visitor leaves mid-load: that load is killed at once, long before its budget
        leaving = browser.new_page(viewport={"width": 1500, "height": 1100})
        _upload(leaving, url, other_big)
        leaving_pid = wait_until(
            lambda: list(set(_workers_of(port)) - set(slow_pid)) or None, timeout=60, what="the third upload's child"
        )
        leaving.close()
        closed = time.monotonic()
        wait_until(
            lambda: not (set(leaving_pid) & set(_workers_of(port))) or None,
            timeout=20,
            what="the closed page's load to be killed",
        )
        assert time.monotonic() - closed < BUDGET

        # the slow load ends at its budget in a named message, and its process is gone
        text = _budget_message(slow_page, port)
        assert "(big.jsonl)" in text and "rollout-graph audit" in text
        screenshot(slow_page, "upload-worker-over-budget")
        wait_until(lambda: not _workers_of(port) or None, timeout=20, what="no load child left")

        # the page's next run refuses the same bytes at once instead of spending the budget again
        slow_page.get_by_text("Show whitespace in token views").click()
        settle(slow_page)  # that run has ended: it refused the upload or started its load
        assert not _workers_of(port), "the refused upload was loaded again"
        _budget_message(slow_page, port)
