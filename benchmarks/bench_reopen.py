"""The app's reopen paint (a new server finding the persistent cache entry) split into the server's
and the browser's CPU, over several rounds: where the reopen's time goes on a shared machine.

``python benchmarks/bench_reopen.py FOLDER [--rounds 3] [--busy]``: one cold session first writes
the cache entry (``bench_paint.session``, first paint only); then each round starts a new
``rollout-graph view FOLDER`` server and a new headless Chromium (1440x900) and opens the page,
measuring until the page is ready (``tests/support/browser.wait_ready``):

- ``paint``: wall seconds from opening the page to ready;
- ``up``: wall seconds from the command to the server's health check (the cache entry read then);
- ``server``: the server's CPU seconds from its start to the paint (``bench_app.server_cpu``),
  and ``window``: its part from opening the page to the paint;
- ``browser``: the CPU seconds of every Chromium process in that window, and Chromium's own
  main-thread figures (CDP ``Performance.getMetrics``: ``TaskDuration``, ``ScriptDuration``,
  ``LayoutDuration`` + ``RecalcStyleDuration``) at the paint.

CPU seconds depend less on the load than wall seconds: read them together, with the load printed
beside each round. ``--busy`` keeps one core busy (a spinning interpreter in a session of its
own, as ``bench_against.py``). Prints one line per round and the medians.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bench_app import server_cpu  # noqa: E402
from bench_paint import VIEW, session  # noqa: E402

from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, running_app, wait_ready  # noqa: E402

SPIN = "while True: pass"


def _chromium_cpu(root: psutil.Process) -> float:
    """CPU seconds of the Chromium processes under ``root`` (this process's descendants)."""
    total = 0.0
    for proc in root.children(recursive=True):
        try:
            if "chrom" in proc.name().lower():
                t = proc.cpu_times()
                total += t.user + t.system
        except psutil.Error:
            continue
    return total


def reopen(folder: str) -> dict[str, float]:
    """One new server (the cache entry in place) and one new browser: the reopen's figures."""
    from playwright.sync_api import sync_playwright

    me = psutil.Process()
    launched = time.perf_counter()
    with running_app(folder, via_cli=True) as url, sync_playwright() as p:
        up = time.perf_counter() - launched
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_context(viewport=VIEW).new_page()
        cdp = page.context.new_cdp_session(page)
        cdp.send("Performance.enable")
        server0, browser0 = server_cpu(url), _chromium_cpu(me)
        start = time.perf_counter()
        page.goto(url)
        wait_ready(page, timeout=600_000)
        paint = time.perf_counter() - start
        server1, browser1 = server_cpu(url), _chromium_cpu(me)
        metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
        browser.close()
    return {
        "paint": paint,
        "up": up,
        "server": server1,
        "window": server1 - server0,
        "browser": browser1 - browser0,
        "task": metrics.get("TaskDuration", 0.0),
        "script": metrics.get("ScriptDuration", 0.0),
        "layout": metrics.get("LayoutDuration", 0.0) + metrics.get("RecalcStyleDuration", 0.0),
        "load": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--busy", action="store_true", help="keep one core busy")
    args = parser.parse_args()
    cache = tempfile.mkdtemp(prefix="rollout-graph-bench-cache-")
    os.environ["ROLLOUT_GRAPH_CACHE"] = cache
    spinner = None
    try:
        session(args.folder, "cold", cache, paint_only=True)  # writes the cache entry
        if args.busy:
            spinner = subprocess.Popen([sys.executable, "-c", SPIN], start_new_session=True)
        rounds = []
        for r in range(args.rounds):
            got = reopen(args.folder)
            rounds.append(got)
            print(
                f"reopen {r + 1}: paint {got['paint']:.2f} s (server up in {got['up']:.1f} s); server CPU"
                f" {got['server']:.2f} s since its start, {got['window']:.2f} s in the paint; browser CPU"
                f" {got['browser']:.2f} s (main thread: tasks {got['task']:.2f} s, script {got['script']:.2f} s,"
                f" layout and style {got['layout']:.2f} s); load {got['load']:.1f}",
                flush=True,
            )
        med = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
        print(
            f"median of {args.rounds} ({'one core busy' if args.busy else 'quiet'}): paint {med['paint']:.2f} s,"
            f" server CPU {med['server']:.2f} s ({med['window']:.2f} s in the paint), browser CPU {med['browser']:.2f} s"
            f" (tasks {med['task']:.2f} s, script {med['script']:.2f} s, layout and style {med['layout']:.2f} s),"
            f" load {min(r['load'] for r in rounds):.1f}-{max(r['load'] for r in rounds):.1f}"
        )
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
