"""Deep links to calls of one trace folder given on the command line, the way a second visitor opens
them, and where their time goes.

``python benchmarks/bench_deeplink.py FOLDER [--links 5] [--cold 2] [--shots DIR]``

* **loaded** (the issue's "deep link to a call in a second browser"): a new server reads the
  trace for a first visitor; then each of ``--links`` links (calls spread over the file) is opened
  in a new browser (nothing cached) and in a tab of a browser that has the app's scripts cached.
  Per link: the call's detail shown (``.rg-node-title``), the page idle, the time to the first
  websocket frame, the browser's main-thread time until the detail is shown and until idle, by
  kind (Chromium's Performance domain over CDP: script, layout, style, all tasks; CPU time of the
  page's main thread, steadier than wall time on a shared machine) and the server's CPU for the
  link's run.
* **cold** (a deep link to a trace the server has not read yet): ``--cold`` times, a new server
  with an empty cache and a deep link opened at once in a new browser (a new server is a new
  origin: nothing is cached): the early detail
  (``.rg-early-title``, read from the call's line) and then the whole page's detail.

Medians over the links, with the load average beside each. One headless Chromium at 1440x900.
``--shots DIR`` saves screenshots of the early detail and the full page of the first cold link.
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
from urllib.parse import urlencode

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bench_app import server_cpu  # noqa: E402

from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, DAG_JS, running_app, wait_ready  # noqa: E402

IDLE_JS = "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
VIEW = {"width": 1440, "height": 900}
METRICS = ("ScriptDuration", "LayoutDuration", "RecalcStyleDuration", "TaskDuration")


def links(folder: str, n: int) -> list[str]:
    """Query strings of ``n`` calls spread over the folder's first trace file (as the app writes them)."""
    from rollout_graph.ingest.files.sources import Source
    from rollout_graph.ingest.load.calls_at_line import read_calls_at
    from rollout_graph.ingest.load.trace_files import trace_files

    path = trace_files(folder)[0]
    with open(path, "rb") as f:
        total = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 24), b""))
    out = []
    for k in range(n):
        line = max(1, round((k + 0.5) * total / n))
        calls = read_calls_at(Source.from_path(path), line)
        if calls:
            name = path.name if Path(folder).is_file() else path.relative_to(folder).as_posix()
            c = calls[0]
            out.append(urlencode({"session": c.session_id, "node": c.node_id, "file": name, "line": line}))
    return out


# When the call's detail and the DAG first appear in the page (performance.now(), ms from navigation)
ORDER_JS = """
window.__rg = {};
new MutationObserver(() => {
  const now = performance.now();
  if (!window.__rg.detail && document.querySelector('.rg-node-title')) window.__rg.detail = now;
  if (!window.__rg.dag && Array.from(document.querySelectorAll('.js-plotly-plot'))
      .some(g => g._fullData && g._fullData[1] && g._fullData[1].name === 'calls')) window.__rg.dag = now;
}).observe(document, {childList: true, subtree: true});
"""


def _metrics(cdp) -> dict[str, float]:
    return {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"] if m["name"] in METRICS}


def open_link(context, url: str, query: str) -> dict[str, float]:
    page = context.new_page()
    page.add_init_script(ORDER_JS)
    cdp = context.new_cdp_session(page)
    cdp.send("Performance.enable")
    first_frame: list[float] = []
    page.on(
        "websocket",
        lambda ws: ws.on("framereceived", lambda _p: first_frame or first_frame.append(time.perf_counter())),
    )
    before = _metrics(cdp)
    cpu = server_cpu(url)
    start = time.perf_counter()
    page.goto(f"{url}/?{query}")
    page.wait_for_selector(".rg-node-title", timeout=300_000)
    detail = time.perf_counter() - start
    at_detail = _metrics(cdp)  # the browser's main-thread time until the detail was shown
    page.wait_for_function(IDLE_JS, timeout=120_000)
    idle = time.perf_counter() - start
    after = _metrics(cdp)
    page.wait_for_function(DAG_JS + "() => !!dag()", timeout=120_000)
    page.wait_for_timeout(200)  # the observer's last callback
    order = page.evaluate("() => window.__rg")
    result = {
        "detail": detail,
        "idle": idle,
        "first frame": (first_frame[0] - start) if first_frame else float("nan"),
        "server CPU": server_cpu(url) - cpu,
        "DAG after detail": (order.get("dag", 0) - order.get("detail", 0)) / 1000,
        "browser main thread to detail": at_detail.get("TaskDuration", 0) - before.get("TaskDuration", 0),
        **{k.removesuffix("Duration").lower(): after.get(k, 0) - before.get(k, 0) for k in METRICS},
    }
    page.close()
    return result


def _summary(label: str, rows: list[dict[str, float]]) -> None:
    keys = list(rows[0])
    parts = [f"{k} {statistics.median(r[k] for r in rows):.2f} s" for k in keys]
    spread = f"(detail {min(r['detail'] for r in rows):.2f} to {max(r['detail'] for r in rows):.2f})"
    print(f"{label}: median of {len(rows)}: " + ", ".join(parts) + f" {spread}, load {os.getloadavg()[0]:.1f}")


def loaded(folder: str, queries: list[str]) -> None:
    from playwright.sync_api import sync_playwright

    with running_app("--", folder) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        first = browser.new_context(viewport=VIEW)
        page = first.new_page()
        start = time.perf_counter()
        page.goto(url)
        wait_ready(page, timeout=600_000)
        print(f"first visitor: first paint {time.perf_counter() - start:.1f} s, load {os.getloadavg()[0]:.1f}")
        page.close()
        rows: dict[str, list[dict[str, float]]] = {"new browser": [], "cached scripts": []}
        for query in queries:  # interleaved: each link in both kinds of browser
            fresh = browser.new_context(viewport=VIEW)
            rows["new browser"].append(open_link(fresh, url, query))
            fresh.close()
            rows["cached scripts"].append(open_link(first, url, query))
            print(
                f"  {query[:60]}: new browser {rows['new browser'][-1]['detail']:.2f} s,"
                f" cached scripts {rows['cached scripts'][-1]['detail']:.2f} s, load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
        for who, found in rows.items():
            _summary(f"deep link, trace loaded ({who})", found)
        browser.close()


def cold(folder: str, queries: list[str], shots: str | None) -> None:
    from playwright.sync_api import sync_playwright

    rows = []
    for k, query in enumerate(queries):
        cache = tempfile.mkdtemp(prefix="rollout-graph-bench-cache-")
        os.environ["ROLLOUT_GRAPH_CACHE"] = cache
        try:
            with running_app("--", folder) as url, sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                page = browser.new_context(viewport=VIEW).new_page()  # a new server's origin: nothing cached
                start = time.perf_counter()
                page.goto(f"{url}/?{query}")
                page.wait_for_selector(".rg-early-title", timeout=300_000)
                early = time.perf_counter() - start
                if shots and k == 0:
                    Path(shots).mkdir(parents=True, exist_ok=True)
                    page.screenshot(path=str(Path(shots) / "deep-link-early.png"))
                page.wait_for_selector(".rg-node-title", timeout=300_000)
                whole = time.perf_counter() - start
                wait_ready(page, timeout=300_000)
                if shots and k == 0:
                    page.screenshot(path=str(Path(shots) / "deep-link-full.png"))
                rows.append({"early detail": early, "whole page's detail": whole})
                print(
                    f"  cold {query[:60]}: early detail {early:.2f} s, whole page {whole:.2f} s,"
                    f" load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
                browser.close()
        finally:
            shutil.rmtree(cache, ignore_errors=True)
    if rows:
        keys = list(rows[0])
        print(
            f"deep link, trace not read yet: median of {len(rows)}: "
            + ", ".join(f"{k} {statistics.median(r[k] for r in rows):.2f} s" for k in keys)
            + f", load {os.getloadavg()[0]:.1f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder")
    parser.add_argument("--links", type=int, default=5, help="links opened into the loaded trace")
    parser.add_argument("--cold", type=int, default=2, help="new servers, each opened by a deep link (0: none)")
    parser.add_argument("--shots", help="folder for screenshots of the first cold link (early, full)")
    args = parser.parse_args()
    queries = links(args.folder, max(args.links, args.cold))
    cache = tempfile.mkdtemp(prefix="rollout-graph-bench-cache-")
    os.environ["ROLLOUT_GRAPH_CACHE"] = cache
    try:
        if args.links:
            loaded(args.folder, queries[: args.links])
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    if args.cold:
        cold(args.folder, queries[: args.cold], args.shots)


if __name__ == "__main__":
    main()
