"""The explorer's first screen on one trace folder given on the command line, step by step:
cold first paint (new server, empty parsed-trace cache), a chart click to the call's detail, a
deep link opened by a second visitor (in a new browser, and in a browser that has the app's
scripts cached), then the same on a second new server that finds the persistent cache (reopen).
Prints each step as it is measured.

``python benchmarks/bench_paint.py FOLDER`` (e.g. a folder holding the 5,000-call trace written
by ``synthetic.py``). One headless Chromium page at 1440x900; the cache goes to a temporary
folder, removed at the end.

``--profile DIR``: the server sampled by py-spy (``pip install py-spy``) from its start to the first
paint, for each session: ``DIR/cold.txt`` and ``DIR/reopen.txt`` (collapsed stacks per thread, idle
samples included, so a thread waiting on a lock shows where it waited). ``--paint-only``: stop after
each first paint (no clicks, keys, searches or deep links). ``--compare-launch ROUNDS``: the first
paints only, ``streamlit run app.py`` (the traces read when the first page runs) against
``rollout-graph view`` (read as the server starts), interleaved, with a table of medians.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bench_app import key_steps, search_steps, server_cpu, server_process  # noqa: E402

from tests.support.browser import (  # noqa: E402
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


def _profiler(url: str, out: Path) -> subprocess.Popen | None:
    """py-spy sampling the server (and its worker processes) until stopped with SIGINT."""
    proc = server_process(url)
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if proc is None or not Path(spy).exists():
        print("profile: py-spy or the server not found: not profiled", flush=True)
        return None
    command = [spy, "record", "--pid", str(proc.pid), "--subprocesses", "--threads", "--idle", "--rate", "100"]
    command += ["--format", "raw", "--output", str(out), "--nonblocking"]
    spying = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)  # attached before the page is opened
    return spying


def _memory(url: str) -> str:
    """The server's resident memory now and its peak (Linux), in MB."""
    proc = server_process(url)
    if proc is None:
        return "server memory not found"
    peak = ""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                peak = f", peak {int(line.split()[1]) / 1e3:,.0f} MB"
    return f"server memory {proc.memory_info().rss / 1e6:,.0f} MB{peak}"


def _stop(spying: subprocess.Popen | None) -> None:
    if spying is not None:
        spying.send_signal(signal.SIGINT)
        spying.wait(timeout=60)


def session(
    folder: str, label: str, cache: str, profile: str | None = None, paint_only: bool = False, via_cli: bool = True
) -> dict[str, float]:
    """One new server and its first visitor; returns the first paint's figures."""
    from playwright.sync_api import sync_playwright

    launched = time.perf_counter()
    args = (folder,) if via_cli else ("--", folder)
    with running_app(*args, via_cli=via_cli) as url, sync_playwright() as p:
        up = time.perf_counter() - launched
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        first = browser.new_context(viewport=VIEW)  # the first visitor (browser cache empty)
        page = first.new_page()
        pushed = [0]
        page.on("websocket", lambda ws: ws.on("framereceived", lambda p: pushed.__setitem__(0, pushed[0] + len(p))))
        spying = _profiler(url, Path(profile) / f"{label}.txt") if profile else None
        cpu = server_cpu(url)
        start = time.perf_counter()
        page.goto(url)
        wait_ready(page, timeout=600_000)
        now = time.perf_counter()
        figures = {
            "paint": now - start,
            "command": now - launched,
            "cpu_window": server_cpu(url) - cpu,
            "cpu_total": server_cpu(url),
            "load": os.getloadavg()[0],
        }
        print(
            f"{label}: first paint {now - start:.1f} s (server CPU {server_cpu(url) - cpu:.1f} s),"
            f" pushed {pushed[0] / 1e6:.2f} MB, load {os.getloadavg()[0]:.1f};"
            f" from the command {now - launched:.1f} s (server up in {up:.1f} s, server CPU since its start"
            f" {server_cpu(url):.1f} s); {_memory(url)}",
            flush=True,
        )
        _stop(spying)
        if paint_only:
            _wait_store(cache)
            browser.close()
            return figures
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
        _wait_store(cache)
        return figures


def _wait_store(cache: str) -> None:
    """The cache entry is written in the background once the page is idle: wait for it (bounded)
    before this server stops."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not list(Path(cache).glob("*/meta.json")):
        time.sleep(0.5)


def compare_launch(folder: str, rounds: int) -> None:
    """Cold and reopen first paints, the two launches interleaved (each with an empty cache first)."""
    seen: dict[tuple[str, str], list[dict[str, float]]] = {}
    for _ in range(rounds):
        for launch in ("streamlit", "cli"):
            cache = tempfile.mkdtemp(prefix="rollout-graph-bench-cache-")
            os.environ["ROLLOUT_GRAPH_CACHE"] = cache
            try:
                for label in ("cold", "reopen"):
                    figures = session(folder, label, cache, paint_only=True, via_cli=launch == "cli")
                    seen.setdefault((launch, label), []).append(figures)
            finally:
                shutil.rmtree(cache, ignore_errors=True)
    names = {
        "streamlit": "`streamlit run` (read at the first page run)",
        "cli": "`rollout-graph view` (read with the server)",
    }
    print(f"\n{rounds} interleaved rounds, medians (lower is better):\n")
    print(
        "| launch, first paint | from opening the page | from the command | server CPU in the window | server CPU since its start | load |"
    )
    print("|---|---|---|---|---|---|")
    for (launch, label), runs in seen.items():
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        loads = [r["load"] for r in runs]
        print(
            f"| {names[launch]}, {label} | {med['paint']:.1f} s | {med['command']:.1f} s | {med['cpu_window']:.1f} s |"
            f" {med['cpu_total']:.1f} s | {min(loads):.1f} to {max(loads):.1f} |",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("folder")
    parser.add_argument(
        "--profile", metavar="DIR", help="py-spy the server to each first paint (DIR/cold.txt, reopen.txt)"
    )
    parser.add_argument("--paint-only", action="store_true", help="measure the first paints only")
    parser.add_argument(
        "--launch",
        choices=("cli", "streamlit"),
        default="cli",
        help="start the server with `rollout-graph view` (default: what users run) or `streamlit run app.py`",
    )
    parser.add_argument(
        "--compare-launch",
        type=int,
        metavar="ROUNDS",
        help="first paints only, `streamlit run` (read at the first page run) against `rollout-graph view`"
        " (read with the server), interleaved, ROUNDS times each; prints a table of medians",
    )
    args = parser.parse_args()
    if args.compare_launch:
        compare_launch(args.folder, args.compare_launch)
        return
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
    cache = tempfile.mkdtemp(prefix="rollout-graph-bench-cache-")
    os.environ["ROLLOUT_GRAPH_CACHE"] = cache
    try:
        via_cli = args.launch == "cli"
        session(args.folder, "cold", cache, args.profile, args.paint_only, via_cli)
        session(args.folder, "reopen", cache, args.profile, args.paint_only, via_cli)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
