"""Load test (loopback only, bounded, stops by itself): N browser sessions on the bundled samples,
all open at once, then all click a call at once. Reports per-click latency (median, max), the
time every page took to first paint, the server's memory per session, and how long the health
endpoint took to answer while one visitor's upload was being parsed.

``python benchmarks/bench_load.py [--sessions 20] [--budget 600]``. One headless Chromium with
one browser context (a separate Streamlit session) per visitor.
"""

from __future__ import annotations

import argparse
import gzip
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, DAG_JS, READY_JS, node_position, running_app  # noqa: E402

ANSWERED_JS = (
    "() => !!document.querySelector('.rg-node-title') && !document.querySelector('[data-testid=\"stStatusWidget\"]')"
)


def server_rss(url: str) -> int:
    """Resident memory of the server and its worker processes."""
    port = url.rsplit(":", 1)[1]
    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info["cmdline"] or []
        if "--server.port" in cmd and port in cmd:
            total = proc.memory_info().rss
            for child in proc.children(recursive=True):
                try:
                    total += child.memory_info().rss
                except psutil.Error:
                    pass
            return total
    return 0


def _wait_all(pages: list, js: str, arg, deadline: float) -> list[float | None]:
    """Poll every page until ``js`` holds; the time each one first did (None: not by the deadline)."""
    done: list[float | None] = [None] * len(pages)
    while time.monotonic() < deadline and any(d is None for d in done):
        for i, page in enumerate(pages):
            if done[i] is None:
                try:
                    if page.evaluate(js, arg):
                        done[i] = time.monotonic()
                except Exception:  # noqa: BLE001 - a page still navigating
                    pass
        time.sleep(0.05)
    return done


def _detail(data, times: list[float]) -> None:
    """Note when a websocket frame carrying a call's detail arrives."""
    if isinstance(data, bytes | bytearray) and b"rg-node-title" in data:
        times.append(time.monotonic())


def health_during_upload(url: str, page, deadline: float) -> tuple[float, int]:
    """Worst health-check latency while this page's upload (a 20 MB gzip of long lines) loads."""
    worst, checks = 0.0, 0
    stop = threading.Event()

    def probe() -> None:
        nonlocal worst, checks
        while not stop.is_set():
            start = time.monotonic()
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=30) as r:
                    r.read()
            except OSError:
                pass
            worst = max(worst, time.monotonic() - start)
            checks += 1
            time.sleep(0.1)

    line = b'{"request": {"messages": [{"role": "user", "content": "' + b"a" * 2_000_000 + b'"}]}, "response": 1}\n'
    with tempfile.TemporaryDirectory() as tmp:
        upload = Path(tmp) / "hostile.jsonl.gz"
        upload.write_bytes(gzip.compress(line * 60, compresslevel=1))
        page.get_by_test_id("stRadio").get_by_text("Upload", exact=True).click()  # the source radio, not the dropzone
        thread = threading.Thread(target=probe, daemon=True)
        thread.start()
        page.get_by_test_id("stSidebar").locator('input[type="file"]').set_input_files(str(upload))
        page.wait_for_function(
            "() => document.body.innerText.includes('uploaded file(s)')",
            timeout=max(1, deadline - time.monotonic()) * 1000,
        )
        stop.set()
        thread.join(5)
    return worst, checks


def run(sessions: int, budget: float) -> dict:
    from playwright.sync_api import sync_playwright

    deadline = time.monotonic() + budget
    out: dict = {"sessions": sessions}
    with running_app() as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            idle = server_rss(url)
            pages = [browser.new_context(viewport={"width": 1400, "height": 1000}).new_page() for _ in range(sessions)]
            # when the server's answer to a click (the call detail) reaches each browser, before
            # the page draws it: the server's share, apart from 20 renderers sharing its cores
            arrived: list[list[float]] = [[] for _ in pages]
            for k, page in enumerate(pages):
                page.on(
                    "websocket", lambda ws, k=k: ws.on("framereceived", lambda data, k=k: _detail(data, arrived[k]))
                )
            start = time.monotonic()
            for page in pages:
                page.goto(url, wait_until="commit", timeout=120_000)
            painted = _wait_all(pages, READY_JS, None, deadline)
            out["paint"] = [t - start for t in painted if t is not None]
            out["rss_per_session"] = (server_rss(url) - idle) / sessions
            print(
                f"  painted {len(out['paint'])} of {sessions}: {sorted(round(t, 1) for t in out['paint'])}",
                file=sys.stderr,
                flush=True,
            )
            # every session clicks a different call at the same moment
            starts = []
            for page in pages:
                page.evaluate(DAG_JS + "() => dag().scrollIntoView({block: 'center'})")
            for i, page in enumerate(pages):
                x, y = node_position(page, 1 + i % 8)
                starts.append(time.monotonic())
                page.mouse.click(x, y)
            deadline = max(deadline, time.monotonic() + 240)  # the clicks get their own time
            answered = _wait_all(pages, ANSWERED_JS, None, deadline)
            out["click"] = [a - s for a, s in zip(answered, starts, strict=True) if a is not None]
            out["server"] = [
                min((t for t in got if t >= s), default=float("nan")) - s
                for got, s in zip(arrived, starts, strict=True)
            ]
            print(f"  answers received in {sorted(round(t, 2) for t in out['server'])}", file=sys.stderr, flush=True)
            out["unanswered"] = sum(a is None for a in answered)
            print(f"  clicks answered in {sorted(round(t, 2) for t in out['click'])}", file=sys.stderr, flush=True)
            out["rss_after_clicks"] = server_rss(url)
            out["health_worst"], out["health_checks"] = float("nan"), 0
            deadline = time.monotonic() + 120
            if deadline - time.monotonic() > 30:
                out["health_worst"], out["health_checks"] = health_during_upload(url, pages[0], deadline)
        finally:
            browser.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--budget", type=float, default=600, help="seconds before it gives up (default 600)")
    args = parser.parse_args()
    r = run(args.sessions, args.budget)
    click, paint = r["click"] or [float("nan")], r["paint"] or [float("nan")]
    print(
        f"{r['sessions']} sessions: first paint median {statistics.median(paint):.1f} s, max {max(paint):.1f} s"
        f" · click answered median {statistics.median(click):.2f} s, max {max(click):.2f} s"
        f" ({r['unanswered']} unanswered; goal < 5 s)"
        f" · the server's answer received: median {statistics.median(r['server']):.2f} s, max {max(r['server']):.2f} s"
        f" · server memory {r['rss_per_session'] / 1e6:.0f} MB per session"
        f" · health check during a 120 MB upload: worst {r['health_worst']:.2f} s over {r['health_checks']} checks"
    )


if __name__ == "__main__":
    main()
