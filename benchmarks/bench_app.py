"""The app in headless Chromium on synthetic rollouts: first DAG paint for 1,000 and 5,000
calls (cold: load + analysis + render), click-to-detail, token-page switch, and the server's
resident memory per open rollout. ``python benchmarks/bench_app.py [--runs 3]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from synthetic import generate  # noqa: E402

from tests.browser import browser_page, node_position, running_app, wait_ready  # noqa: E402


def write(folder: Path, calls: int) -> int:
    w = generate(calls, seed=3, max_context=8_000)
    folder.mkdir(parents=True)
    (folder / "trace.jsonl").write_bytes(b"\n".join(w.records) + b"\n")
    return w.tokens


def server_rss(url: str) -> int:
    port = int(url.rsplit(":", 1)[1])
    for proc in psutil.process_iter(["cmdline"]):
        if proc.info["cmdline"] and "--server.port" in proc.info["cmdline"] and str(port) in proc.info["cmdline"]:
            return proc.memory_info().rss
    return 0


def measure(folder: Path, node: int) -> dict[str, float]:
    with running_app("--", str(folder)) as url, browser_page(height=1400) as page:
        idle = server_rss(url)
        start = time.perf_counter()
        page.goto(url)
        wait_ready(page, timeout=300_000)
        first_paint = time.perf_counter() - start
        rss = server_rss(url) - idle
        x, y = node_position(page, node)
        start = time.perf_counter()
        page.mouse.click(x, y)
        page.wait_for_selector(".rg-node-title", timeout=120_000)
        page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')")
        click = time.perf_counter() - start
        page.mouse.move(0, 0)
        # a second visitor: the parsed trace is cached by content, so this is the render cost alone
        start = time.perf_counter()
        page.goto(page.url)  # the deep link to the selected call
        wait_ready(page, timeout=300_000)
        warm_paint = time.perf_counter() - start
        page.wait_for_selector(".rg-node-title", timeout=120_000)
        # the training row through the call spans many pages of tokens
        page.get_by_role("tab", name="Sequence").click()
        start = time.perf_counter()
        page.get_by_role("button", name="▶").first.click()
        page.wait_for_selector("text=/page 2 of/", timeout=60_000)
        switch = time.perf_counter() - start
        return {"first_paint": first_paint, "warm_paint": warm_paint, "click": click, "switch": switch, "rss": rss}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for calls in (1000, 5000):
            folder = Path(tmp) / f"c{calls}"
            tokens = write(folder, calls)
            # a call deep in the main chain: long context, so its token view has several pages
            results = [measure(folder, node=min(calls - 2, 120)) for _ in range(args.runs)]
            med = {
                k: statistics.median(r[k] for r in results)
                for k in ("first_paint", "warm_paint", "click", "switch", "rss")
            }
            size = (folder / "trace.jsonl").stat().st_size / 1e6
            print(
                f"{calls} calls ({tokens / 1e6:.1f}M tokens, {size:.0f} MB), median of {args.runs}: first DAG paint {med['first_paint']:.2f} s cold"
                f" / {med['warm_paint']:.2f} s once parsed (goal < 5 s at 5,000) · click-to-detail {med['click']:.2f} s (goal < 1.5 s)"
                f" · token page switch {med['switch']:.2f} s (goal < 0.5 s)"
                f" · server memory for the open rollout {med['rss'] / 1e6:.0f} MB ({med['rss'] / tokens:.1f} bytes/token)"
            )


if __name__ == "__main__":
    main()
