"""The explorer's first screen on one trace folder given on the command line, step by step:
cold first paint (new server, empty parsed-trace cache), a chart click to the call's detail, a
deep link opened by a second visitor (in a new browser, and in a browser that has the app's
scripts cached), then the same on a second new server that finds the persistent cache (reopen).
Prints each step as it is measured.

``python benchmarks/bench_paint.py FOLDER`` (e.g. a folder holding the 5,000-call trace written
by ``synthetic.py``). One headless Chromium page at 1440x900; the cache goes to a temporary
folder, removed at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bench_app import key_steps, search_steps, server_cpu  # noqa: E402

from tests.browser import (  # noqa: E402
    CHROMIUM,
    CHROMIUM_ARGS,
    DAG_JS,
    click_until,
    node_position,
    running_app,
    wait_ready,
)

IDLE_JS = "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
VIEW = {"width": 1440, "height": 900}


def session(folder: str, label: str, cache: str) -> None:
    from playwright.sync_api import sync_playwright

    with running_app("--", folder) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        first = browser.new_context(viewport=VIEW)  # the first visitor (browser cache empty)
        page = first.new_page()
        pushed = [0]
        page.on("websocket", lambda ws: ws.on("framereceived", lambda p: pushed.__setitem__(0, pushed[0] + len(p))))
        cpu = server_cpu(url)
        start = time.perf_counter()
        page.goto(url)
        wait_ready(page, timeout=600_000)
        print(
            f"{label}: first paint {time.perf_counter() - start:.1f} s (server CPU {server_cpu(url) - cpu:.1f} s),"
            f" pushed {pushed[0] / 1e6:.2f} MB, load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
        page.wait_for_timeout(1000)
        shown = page.evaluate(DAG_JS + "() => Array.from(dag()._fullData[1].customdata)")
        node = min(shown, key=lambda c: (abs(c - 30), c))  # an early call: in the first window
        start = click_until(page, lambda: node_position(page, node), ".rg-node-title", 3, 30_000)
        page.wait_for_function(IDLE_JS, timeout=120_000)
        print(f"{label}: chart click {time.perf_counter() - start:.2f} s", flush=True)
        cpu = server_cpu(url)
        keys = key_steps(page)
        print(
            f"{label}: j key step median {statistics.median(keys):.2f} s ({min(keys):.2f} to {max(keys):.2f},"
            f" server CPU {(server_cpu(url) - cpu) / len(keys):.2f} s per step), load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
        cpu = server_cpu(url)
        try:
            found = search_steps(page)
            print(
                f"{label}: search median {statistics.median(found):.2f} s ({min(found):.2f} to {max(found):.2f},"
                f" server CPU {(server_cpu(url) - cpu) / len(found):.2f} s per search and clear),"
                f" load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
        except Exception as exc:  # a benchmark reports what it could not measure, and goes on
            print(f"{label}: search not measured ({type(exc).__name__}: {str(exc).splitlines()[0]})", flush=True)
            page.screenshot(path=str(Path(cache).parent / f"rollout-graph-bench-search-{label}.png"), full_page=True)
        page.wait_for_function("() => location.search.includes('node=')", timeout=30_000)
        deep = page.url
        page.close()
        # a deep link opened by a second visitor: in a new browser (nothing cached), then in a tab of
        # the first visitor's browser (the app's scripts cached, as for anyone who used it before)
        for who, context in (("new browser", browser.new_context(viewport=VIEW)), ("cached scripts", first)):
            page = context.new_page()
            start = time.perf_counter()
            page.goto(deep)
            page.wait_for_selector(".rg-node-title", timeout=300_000)
            detail = time.perf_counter() - start
            page.wait_for_function(IDLE_JS, timeout=120_000)
            print(
                f"{label}: deep link ({who}) call detail {detail:.2f} s, idle {time.perf_counter() - start:.2f} s,"
                f" load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
            if who == "cached scripts":  # the token page flip in the call's sequence view
                page.get_by_role("tab", name="Sequence").click()
                page.wait_for_function(IDLE_JS, timeout=120_000)
                cpu = server_cpu(url)
                start = time.perf_counter()
                page.get_by_role("button", name="▶").first.click()
                page.wait_for_selector("text=/page 2 of/", timeout=60_000)
                page.wait_for_function(IDLE_JS, timeout=120_000)
                print(
                    f"{label}: token page flip {time.perf_counter() - start:.2f} s"
                    f" (server CPU {server_cpu(url) - cpu:.2f} s), load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
            page.close()
        browser.close()
        # the cache entry is written in the background a few seconds after the trace was read: wait
        # for it (bounded) before this server stops
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not list(Path(cache).glob("*/meta.json")):
            time.sleep(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("folder")
    args = parser.parse_args()
    cache = tempfile.mkdtemp(prefix="rollout-graph-bench-cache-")
    os.environ["ROLLOUT_GRAPH_CACHE"] = cache
    try:
        session(args.folder, "cold", cache)
        session(args.folder, "reopen", cache)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
