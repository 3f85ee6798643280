"""The app in headless Chromium on synthetic rollouts, per size (200 calls with 64k contexts, 1,000
and 5,000 calls): cold first paint (a new server, nothing parsed), reopen (a new server again: the
persistent parsed-trace cache answers), chart click, picker and finding selection, deep link to one
call (trace parsed), token page flip, bytes pushed to the browser for the first paint (websocket
frames), and the server's resident memory for the open rollout.

``python benchmarks/bench_app.py [--sizes 200x64000,1000,5000] [--runs 1]``. The persistent cache
goes to a temporary folder (``ROLLOUT_GRAPH_CACHE``), removed at the end. Every row gives the load
average beside it (the machine may be shared).

``python benchmarks/bench_app.py --crossover [--sizes 5000x4500x300 | --trace FILE] [--runs 3]``: the app's cold
read of the trace (the server's share of the cold first paint that depends on the reader) in a new
process each time, as a new server reads it: one process alone against two worker processes,
interleaved, quiet and with another process keeping one core busy; wall and CPU time (the process
and its workers).
"""

from __future__ import annotations

import argparse
import contextlib
import os
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

from synthetic import generate  # noqa: E402

from tests.support.browser import DAG_JS, browser_page, click_until, node_position, running_app, wait_ready  # noqa: E402

# CALLSxMAX_CONTEXT[xSUMMARY_TOKENS]: 200 calls with 64k contexts; 1,000 calls compacted at 8k
# tokens; 5,000 calls compacted at 4.5k tokens into 300-token summaries: 630 MB, the size of the
# issue's example (with the generator's default 1,500-token summaries 5,000 calls are 946 MB).
DEFAULT_SIZES = "200x64000,1000x8000,5000x4500x300"
IDLE_JS = "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"


def write(folder: Path, calls: int, max_context: int, summary_tokens: int = 1500) -> int:
    w = generate(calls, seed=3, max_context=max_context, summary_tokens=summary_tokens)
    folder.mkdir(parents=True)
    (folder / "trace.jsonl").write_bytes(b"\n".join(w.records) + b"\n")
    return w.tokens


def server_process(url: str) -> psutil.Process | None:
    port = int(url.rsplit(":", 1)[1])
    for proc in psutil.process_iter(["cmdline"]):
        line = proc.info["cmdline"] or []
        for flag in ("--server.port", "--port"):  # `streamlit run` or `rollout-graph view`
            if flag in line and line.index(flag) + 1 < len(line) and line[line.index(flag) + 1] == str(port):
                return proc
    return None


def server_rss(url: str) -> int:
    proc = server_process(url)
    return 0 if proc is None else proc.memory_info().rss


def server_cpu(url: str) -> float:
    """CPU seconds the server has used so far: its own threads and its worker processes (running,
    or exited and waited for)."""
    proc = server_process(url)
    if proc is None:
        return 0.0
    t = proc.cpu_times()
    total = t.user + t.system + t.children_user + t.children_system
    for child in proc.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            c = child.cpu_times()
            total += c.user + c.system
    return total


def _title(page, node_id: str, timeout: float = 120_000) -> None:
    page.wait_for_function(
        "(id) => { const t = document.querySelector('.rg-node-title');"
        " return t && t.textContent.startsWith(id + ' ') && !document.querySelector('[data-testid=\"stStatusWidget\"]'); }",
        arg=node_id,
        timeout=timeout,
    )


def _title_text(page) -> str:
    return page.eval_on_selector(".rg-node-title", "t => t.textContent.split(' ')[0]")


class Frames:
    """Bytes of websocket frames the server sent to this page."""

    def __init__(self, page) -> None:
        self.bytes = 0
        page.on("websocket", lambda ws: ws.on("framereceived", self._add))

    def _add(self, payload) -> None:
        self.bytes += len(payload)


def paint(url: str, path: str = "") -> tuple[float, int]:
    with browser_page(height=1400) as page:
        frames = Frames(page)
        start = time.perf_counter()
        page.goto(url + path)
        wait_ready(page, timeout=600_000)
        return time.perf_counter() - start, frames.bytes


def _pick(page, label: str) -> float:
    """Choose a call in the picker by typing its arrival index; seconds until its detail shows."""
    box = page.locator('[data-testid="stSelectbox"]').filter(has_text="Call").first
    box.scroll_into_view_if_needed()
    box.click()
    page.keyboard.type(label)
    start = time.perf_counter()
    page.keyboard.press("Enter")
    return start


def _finding(page, current: str) -> float | None:
    """Open the findings panel and its first group, and click its first finding about another call
    than ``current``; None when the rollout has no findings panel."""
    outer = page.locator('[data-testid="stExpander"]').filter(has_text="Findings:").first
    if not outer.count():
        return None
    group = outer.locator('[data-testid="stExpander"]').first
    if not group.is_visible():
        outer.locator("summary").first.click()
    group.wait_for(timeout=60_000)
    group.locator("summary").first.click()
    button = (
        group.get_by_role("button")
        .filter(has_not_text="Ring its")
        .filter(has_not_text="Clear the rings")
        .filter(has_not_text=f"{current}:")
        .first
    )
    button.wait_for(timeout=60_000)
    button.scroll_into_view_if_needed()
    start = time.perf_counter()
    button.click()
    return start


CHANGED_JS = (
    "(old) => { const t = document.querySelector('.rg-node-title');"
    " return t && !t.textContent.startsWith(old + ' ') && !document.querySelector('[data-testid=\"stStatusWidget\"]'); }"
)
# Words of the synthetic traces' texts (benchmarks/synthetic.py): each search is a new query.
SEARCHES = ("failing test", "main.py", "pytest again")


def key_steps(page, steps: int = 6) -> list[float]:
    """Press j (next call) ``steps`` times with the focus on the page; seconds from each key press
    until the next call's detail is shown and the page is idle."""
    times = []
    for _ in range(steps):
        before = _title_text(page)
        page.evaluate("document.activeElement && document.activeElement.blur()")
        start = time.perf_counter()
        page.keyboard.press("j")
        page.wait_for_function(CHANGED_JS, arg=before, timeout=120_000)
        times.append(time.perf_counter() - start)
    return times


def search_steps(page) -> list[float]:
    """Type each of ``SEARCHES`` in the search box and press Enter; seconds until its hits are
    listed and the page is idle."""
    box = page.get_by_label("Search this rollout")
    times = []
    for text in SEARCHES:
        box.fill(text)
        start = time.perf_counter()
        box.press("Enter")
        page.wait_for_function(
            "(text) => Array.from(document.querySelectorAll('.st-key-rg-search-hits button'))"
            "  .some(b => b.textContent.includes(text))"
            "  && !document.querySelector('[data-testid=\"stStatusWidget\"]')",
            arg=text,
            timeout=120_000,
        )
        times.append(time.perf_counter() - start)
        box.fill("")
        box.press("Enter")
        page.wait_for_function(
            "() => !document.querySelector('.st-key-rg-search-hits button')"
            " && !document.querySelector('[data-testid=\"stStatusWidget\"]')",
            timeout=120_000,
        )
    return times


def _entries() -> int:
    return sum(p.name.startswith("v") for p in Path(os.environ["ROLLOUT_GRAPH_CACHE"]).glob("*"))


def measure(folder: Path, node: int, other: int) -> dict[str, float]:
    out: dict[str, float] = {}
    entries = _entries()
    with running_app("--", str(folder)) as url:
        idle = server_rss(url)
        out["cold"], out["bytes"] = paint(url)
        out["rss"] = server_rss(url) - idle
        with browser_page(height=1400) as page:
            page.goto(url)
            wait_ready(page, timeout=600_000)
            # chains are collapsed: click the drawn call nearest to the one asked for (in the first
            # screen's window of the chart: ask for an early call)
            shown = page.evaluate(DAG_JS + "() => Array.from(dag()._fullData[1].customdata)")
            node = min(shown, key=lambda c: (abs(c - node), c))
            page.wait_for_timeout(500)
            start = click_until(page, lambda: node_position(page, node), ".rg-node-title", 3, 30_000)
            page.wait_for_function(IDLE_JS, timeout=120_000)
            out["click"] = time.perf_counter() - start
            clicked = _title_text(page)
            page.mouse.move(0, 0)
            deep = page.url
            try:
                start = _pick(page, f"#{other} ·")
                page.wait_for_function(
                    "(old) => { const t = document.querySelector('.rg-node-title');"
                    " return t && !t.textContent.startsWith(old + ' ') && !document.querySelector('[data-testid=\"stStatusWidget\"]'); }",
                    arg=clicked,
                    timeout=120_000,
                )
                out["picker"] = time.perf_counter() - start
            except Exception as exc:  # a benchmark reports what it could not measure
                print(f"  picker: not measured ({type(exc).__name__})", file=sys.stderr)
            try:
                before = _title_text(page)
                start = _finding(page, before)
                if start is not None:
                    page.wait_for_function(
                        "(old) => { const t = document.querySelector('.rg-node-title');"
                        " return t && !t.textContent.startsWith(old + ' ') && !document.querySelector('[data-testid=\"stStatusWidget\"]'); }",
                        arg=before,
                        timeout=120_000,
                    )
                    out["finding"] = time.perf_counter() - start
            except Exception as exc:
                print(f"  finding: not measured ({type(exc).__name__})", file=sys.stderr)
            try:
                out["keys"] = statistics.median(key_steps(page))
            except Exception as exc:
                print(f"  j/k: not measured ({type(exc).__name__})", file=sys.stderr)
            try:
                out["search"] = statistics.median(search_steps(page))
            except Exception as exc:
                print(f"  search: not measured ({type(exc).__name__})", file=sys.stderr)
        # a second visitor opens the deep link to the clicked call: the trace is already parsed
        with browser_page(height=1400) as page:
            start = time.perf_counter()
            page.goto(deep)
            _title(page, clicked, timeout=600_000)
            out["deep_link"] = time.perf_counter() - start
            page.get_by_role("tab", name="Sequence").click()
            page.wait_for_function(IDLE_JS, timeout=120_000)
            start = time.perf_counter()
            page.get_by_role("button", name="▶").first.click()
            page.wait_for_selector("text=/page 2 of/", timeout=60_000)
            out["flip"] = time.perf_counter() - start
        # the cache entry is written in the background after the first paint: a user reopening
        # the trace later finds it; wait for it (bounded) rather than kill the server mid-write
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and _entries() <= entries:
            time.sleep(0.5)
    # a new server: what a persistent cache of parsed traces saves (nothing, without one)
    with running_app("--", str(folder)) as url:
        out["reopen"], _ = paint(url)
    return out


COLUMNS = [
    ("cold", "cold first paint", "{:.1f} s"),
    ("reopen", "reopen (new server)", "{:.1f} s"),
    ("click", "chart click", "{:.2f} s"),
    ("picker", "picker", "{:.2f} s"),
    ("finding", "finding row", "{:.2f} s"),
    ("keys", "j/k key step", "{:.2f} s"),
    ("search", "search", "{:.2f} s"),
    ("deep_link", "deep link", "{:.2f} s"),
    ("flip", "token page flip", "{:.2f} s"),
    ("bytes", "bytes pushed (first paint)", "{:.1f} MB"),
    ("rss", "server memory", "{:.0f} MB"),
]


READ_JS = """
import sys, time
from pathlib import Path
import psutil
from rollout_graph.ingest.load import pool
from rollout_graph.ingest.load.files import read_files
start, cpu = time.perf_counter(), time.process_time()
loaded = read_files([Path(sys.argv[1])], workers=int(sys.argv[2]))
wall = time.perf_counter() - start
workers = sum(sum(c.cpu_times()[:2]) for c in psutil.Process().children(recursive=True))
pool.shutdown()
print(wall, time.process_time() - cpu + workers, sum(len(s.calls) for s in loaded.sessions.values()))
"""


def _read(path: Path, workers: int) -> tuple[float, float]:
    out = subprocess.run(
        [sys.executable, "-c", READ_JS, str(path), str(workers)], capture_output=True, text=True, check=True
    ).stdout.split()
    return float(out[0]), float(out[1])


@contextlib.contextmanager
def busy_core():
    """Another process keeping one core busy for as long as the block runs."""
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        yield
    finally:
        spin.kill()
        spin.wait()


def crossover(path: Path, runs: int) -> None:
    """One process against two workers, interleaved, quiet and with a core busy."""
    print(f"{path.stat().st_size / 1e6:.0f} MB, {os.cpu_count()} cores")
    print("| condition | one process: wall | CPU | two workers: wall | CPU | ratio (workers / one) | load average |")
    print("|---|---|---|---|---|---|---|")
    for name, around in (("no other process added", contextlib.nullcontext), ("one core kept busy", busy_core)):
        seen: dict[int, list[tuple[float, float]]] = {1: [], 2: []}
        loads = []
        with around():
            for _ in range(runs):
                for workers in (1, 2):
                    loads.append(os.getloadavg()[0])
                    seen[workers].append(_read(path, workers))
        one = [statistics.median(v) for v in zip(*seen[1], strict=True)]
        two = [statistics.median(v) for v in zip(*seen[2], strict=True)]
        print(
            f"| {name} | {one[0]:.2f} s | {one[1]:.2f} s | {two[0]:.2f} s | {two[1]:.2f} s | {two[0] / one[0]:.2f} |"
            f" {min(loads):.1f} to {max(loads):.1f} |",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument(
        "--sizes", default=DEFAULT_SIZES, help="CALLSxMAX_CONTEXT[xSUMMARY_TOKENS],... (default %(default)s)"
    )
    parser.add_argument("--crossover", action="store_true", help="the cold read: one process against two workers")
    parser.add_argument("--trace", type=Path, help="with --crossover: this trace file instead of a synthetic one")
    args = parser.parse_args()
    if args.crossover and args.trace:
        crossover(args.trace, args.runs)
        return
    if args.crossover and args.sizes == DEFAULT_SIZES:
        args.sizes = "5000x4500x300"
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["ROLLOUT_GRAPH_CACHE"] = str(Path(tmp) / "cache")
        if not args.crossover:
            print("| trace | " + " | ".join(title for _, title, _ in COLUMNS) + " | load average |")
            print("|---" * (len(COLUMNS) + 2) + "|")
        for size in args.sizes.split(","):
            parts = size.split("x")
            n, max_context = int(parts[0]), int(parts[1]) if len(parts) > 1 else 8000
            summary = parts[2] if len(parts) > 2 else "1500"
            folder = Path(tmp) / f"c{n}x{max_context}x{summary}"
            tokens = write(folder, n, max_context, int(summary))
            mb = (folder / "trace.jsonl").stat().st_size / 1e6
            if args.crossover:
                crossover(folder / "trace.jsonl", args.runs)
                continue
            loads = os.getloadavg()[0]
            results = [measure(folder, node=min(n - 2, 30), other=min(n - 1, 60)) for _ in range(args.runs)]
            cells = []
            for key, _, fmt in COLUMNS:
                values = [r[key] for r in results if key in r]
                if not values:
                    cells.append("n/a")
                    continue
                value = statistics.median(values)
                cells.append(fmt.format(value / 1e6 if key in ("bytes", "rss") else value))
            label = f"{n:,} calls, {max_context // 1000}k contexts, {tokens / 1e6:.1f}M tokens, {mb:.0f} MB"
            cells.append(f"{loads:.1f} to {os.getloadavg()[0]:.1f}")
            print(f"| {label} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
