"""The app's reopen paint (a new server finding the persistent cache entry) split into the server's
and the browser's CPU, this checkout against others, interleaved: where the reopen's time goes on
a shared machine, and what a change moved.

``python benchmarks/bench_reopen.py FOLDER [--rounds 3] [--busy] [NAME=DIR ...]``: per checkout (this
one always, as ``this``; each DIR run with ``DIR/.venv/bin/python``), a cold session first writes
its cache entry (in a cache folder of its own); then each round, the checkouts in a rotating order,
starts a new ``rollout-graph view FOLDER`` server and a new headless Chromium (1440x900) and opens
the page, measuring until the page is ready (``tests/support/browser.wait_ready``):

- ``paint``: wall seconds from opening the page to ready (the figure of ``bench_paint.py``'s
  "reopen, from the page"); ``up``: from the command to the server's health check;
- ``server``: the server's CPU seconds from its start to the paint, and ``window``: its part from
  opening the page to the paint (the page's run and any background work meanwhile);
- ``browser``: the CPU seconds of every Chromium process in that window, and Chromium's own
  main-thread figures at the paint (CDP ``Performance.getMetrics``: ``TaskDuration``,
  ``ScriptDuration``, ``LayoutDuration`` + ``RecalcStyleDuration``).

CPU seconds depend less on the load than wall seconds: read them together, the load beside each
round. ``--busy`` keeps one core busy (a spinning interpreter in a session of its own). ``--after``
seconds: also the server's CPU for that long after the paint (the background work a reopen starts:
the search index, docs/performance.md "Background work"). Prints one line per round and the medians.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bench_app import server_cpu  # noqa: E402
from bench_paint import VIEW  # noqa: E402
from checkout import named_checkouts  # noqa: E402

from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, free_port, stop_group, wait_ready  # noqa: E402
from tests.support.waiting import wait_until  # noqa: E402

SPIN = "while True: pass"


@contextlib.contextmanager
def server(python: str, checkout: Path, folder: str, cache: Path):
    """``rollout-graph view FOLDER`` of ``checkout`` (with its interpreter), its URL once healthy."""
    port = free_port()
    env = {**os.environ, "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false", "ROLLOUT_GRAPH_CACHE": str(cache)}
    command = [python, "-m", "rollout_graph", "view", "--port", str(port), "--headless", folder]
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(
        command, cwd=checkout, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"

    def up() -> str | None:
        if proc.poll() is not None:
            return "exited"
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
            return "up" if response.read() == b"ok" else None

    try:
        if wait_until(up, timeout=120, what="the app's health check", interval=0.3) != "up":
            log.seek(0)
            raise RuntimeError(f"the app did not start: {log.read().decode(errors='replace')[-2000:]}")
        yield url
    finally:
        stop_group(proc)
        log.close()


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


def paint(python: str, checkout: Path, folder: str, cache: Path, after: float = 0.0) -> dict[str, float]:
    """One new server and one new browser: the first paint's figures."""
    from playwright.sync_api import sync_playwright

    me = psutil.Process()
    launched = time.perf_counter()
    with server(python, checkout, folder, cache) as url, sync_playwright() as p:
        up = time.perf_counter() - launched
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_context(viewport=VIEW).new_page()
        cdp = page.context.new_cdp_session(page)
        cdp.send("Performance.enable")
        server0, browser0 = server_cpu(url), _chromium_cpu(me)
        start = time.perf_counter()
        page.goto(url)
        wait_ready(page, timeout=600_000)
        took = time.perf_counter() - start
        server1, browser1 = server_cpu(url), _chromium_cpu(me)
        metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
        later = 0.0
        if after:
            time.sleep(after)  # a benchmark's fixed window, not a test's wait
            later = server_cpu(url) - server1
        if not list(cache.glob("*/meta.json")):  # a cold session: its entry is written after the paint
            wait_until(lambda: list(cache.glob("*/meta.json")), timeout=300, what="the cache entry", interval=0.5)
        browser.close()
    return {
        "paint": took,
        "up": up,
        "server": server1,
        "window": server1 - server0,
        "after": later,
        "browser": browser1 - browser0,
        "task": metrics.get("TaskDuration", 0.0),
        "script": metrics.get("ScriptDuration", 0.0),
        "layout": metrics.get("LayoutDuration", 0.0) + metrics.get("RecalcStyleDuration", 0.0),
        "load": os.getloadavg()[0],
    }


def _line(got: dict[str, float]) -> str:
    after = f", {got['after']:.2f} s in the next seconds" if got["after"] else ""
    return (
        f"paint {got['paint']:.2f} s (server up in {got['up']:.1f} s); server CPU {got['server']:.2f} s since its"
        f" start, {got['window']:.2f} s in the paint{after}; browser CPU {got['browser']:.2f} s (main thread: tasks"
        f" {got['task']:.2f} s, script {got['script']:.2f} s, layout and style {got['layout']:.2f} s); load {got['load']:.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder")
    parser.add_argument("checkouts", nargs="*", metavar="NAME=DIR")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--busy", action="store_true", help="keep one core busy")
    parser.add_argument("--after", type=float, default=0.0, help="seconds of server CPU counted after the paint")
    args = parser.parse_intermixed_args()
    named = named_checkouts(parser, args.checkouts)
    pythons = {
        name: str(d / ".venv" / "bin" / "python") if (d / ".venv" / "bin" / "python").exists() else sys.executable
        for name, d in named.items()
    }
    work = Path(tempfile.mkdtemp(prefix="rollout-graph-bench-reopen-"))
    spinner = None
    try:
        for name, checkout in named.items():
            got = paint(pythons[name], checkout, args.folder, work / name)  # writes the cache entry
            print(f"{name} cold: {_line(got)}", flush=True)
        if args.busy:
            spinner = subprocess.Popen([sys.executable, "-c", SPIN], start_new_session=True)
        seen: dict[str, list[dict[str, float]]] = {name: [] for name in named}
        order = list(named)
        for r in range(args.rounds):
            for name in order[r % len(order) :] + order[: r % len(order)]:
                got = paint(pythons[name], named[name], args.folder, work / name, args.after)
                seen[name].append(got)
                print(f"{name} reopen {r + 1}: {_line(got)}", flush=True)
        mode = "one core busy" if args.busy else "quiet"
        for name, rounds in seen.items():
            med = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
            loads = [r["load"] for r in rounds]
            print(f"{name:>8}, median of {args.rounds} ({mode}, load {min(loads):.1f}-{max(loads):.1f}): {_line(med)}")
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
