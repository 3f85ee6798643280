"""Helpers for driving the real app in Debian's headless Chromium (Playwright, no downloads)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-dev-shm-usage",
]
ARTIFACTS = ROOT / "tests" / "artifacts"
# `ROLLOUT_GRAPH_DOCS_SCREENSHOTS=1 pytest tests/test_browser.py` refreshes the docs' screenshots.
DOCS_IMAGES = ROOT / "docs" / "images"


def require_chromium() -> None:
    if not Path(CHROMIUM).exists():
        if os.environ.get("ROLLOUT_GRAPH_REQUIRE_BROWSER"):
            pytest.fail("Chromium is required here (ROLLOUT_GRAPH_REQUIRE_BROWSER is set) but was not found")
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_app(*args: str, via_cli: bool = False):
    """Start the app and yield its URL once healthy: ``streamlit run app.py`` by default, or the
    project's own ``rollout-graph view`` command."""
    port = free_port()
    if via_cli:
        full = [sys.executable, "-m", "rollout_graph", "view", "--port", str(port), "--headless", *args]
    else:
        full = [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            str(ROOT / "app.py"),
            "--server.headless",
            "true",
            "--server.port",
            str(port),
            "--server.address",
            "127.0.0.1",
            *args,
        ]
    env = {**os.environ, "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
    # the server's output goes to a file: a pipe nobody reads fills up (64 KB of progress lines or
    # warnings) and then blocks the server's next write, which hangs the page being served
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(full, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:

        def up() -> str | None:
            if proc.poll() is not None:
                return "exited"
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                return "up" if response.read() == b"ok" else None

        try:
            state = wait_until(up, timeout=60, what="the app's health check", interval=0.3)
        except AssertionError:
            state = "timed out"
        if state != "up":
            log.seek(0)
            raise RuntimeError(f"the app did not start ({state}): {log.read().decode(errors='replace')[-2000:]}")
        yield url
    finally:
        # the whole process group: nothing the app started may outlive the test
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


@contextlib.contextmanager
def browser_page(width: int = 1500, height: int = 1100):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            yield page
        finally:
            browser.close()


# The DAG among the page's plotly charts: the one whose second trace holds the calls.
DAG_JS = """const dag = () => Array.from(document.querySelectorAll('.js-plotly-plot'))
    .find(g => g._fullData && g._fullData[1] && g._fullData[1].name === 'calls' && g.offsetParent !== null);
"""
# What the DAG client rings (views/panels/dag_client): its layout shapes named ``name``
# ("rg-ring-selected" or "rg-ring-hit"), each as the call drawn at its point (arrival index), or as
# "chain:<key>" for the handle of a collapsed chain, or -1 when nothing is drawn there.
_RINGS_FN = """(name) => { const gd = dag(), calls = gd._fullData[1], chains = gd._fullData[2];
    const at = (t, s) => { for (let i = 0; i < t.x.length; i++)
        if (t.x[i] === s.xanchor && t.y[i] === s.yanchor) return i; return -1; };
    return (gd._fullLayout.shapes || []).filter(s => s.name === name).map(s => {
        const k = at(calls, s); if (k >= 0) return calls.customdata[k];
        const c = at(chains, s); return c >= 0 ? 'chain:' + chains.customdata[c] : -1; }); }"""
RINGS_JS = DAG_JS + _RINGS_FN


def rings(page, name: str = "rg-ring-selected") -> list:
    """The calls (or "chain:<key>") the DAG rings now: ``RINGS_JS``."""
    return page.evaluate(RINGS_JS, name)


def wait_rings(page, expected: list, name: str = "rg-ring-selected", timeout: float = 30_000) -> None:
    """Until the DAG rings exactly ``expected``, in any order (the client rings a moment after the
    run's data arrives); the assertion names what it rings instead."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(
            DAG_JS + f"(a) => {{ const f = {_RINGS_FN}; return JSON.stringify(f(a[0]).map(String).sort()) === a[1]; }}",
            arg=[name, json.dumps(sorted(str(e) for e in expected), separators=(",", ":"))],
            timeout=timeout,
        )
    except PlaywrightTimeout:
        raise AssertionError(f"the DAG rings {rings(page, name)}, not {expected}") from None


def boxed(page) -> list[str]:
    """The text of the DAG's boxed id (the label of the selected call's box shape), as plotly holds it."""
    return page.evaluate(
        DAG_JS + "() => (dag()._fullLayout.shapes || []).filter(s => s.name === 'rg-ring-box').map(s => s.label.text)"
    )


# The page is ready: the script has finished running, the DAG is drawn and every element is (no
# skeleton left while an element's code loads: the chart's code is loaded first, so the DAG can be
# drawn before the widgets above it, and shown elements can be hidden again while one loads).
READY_JS = (
    DAG_JS + "() => !!dag() && !document.querySelector('[data-testid=\"stStatusWidget\"]')"
    " && !document.querySelector('[data-testid=\"stSkeleton\"]')"
)


def wait_ready(page, timeout: float = 60_000) -> None:
    """Until the page is ready (``READY_JS``)."""
    page.wait_for_function(READY_JS, timeout=timeout)


def node_position(page, node_index: int, trace: int = 1) -> tuple[float, float]:
    """Page coordinates of a call's marker in the DAG, from plotly's own axes. The point whose
    ``customdata`` is the call's arrival index (with chains collapsed, point k is not call k);
    with ``trace=rollout_graph.ui.builders.dag.CHAINS``, the handle of the collapsed chain whose key is ``node_index``."""
    return page.evaluate(
        DAG_JS
        + """([i, t]) => {
            const gd = dag();
            const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
            const trace = gd._fullData[t];
            const k = trace.customdata ? Array.from(trace.customdata).indexOf(i) : i;
            if (k < 0) throw new Error('not drawn: ' + i);
            const box = gd.getBoundingClientRect();
            return [box.left + xa._offset + xa.l2p(trace.x[k]), box.top + ya._offset + ya.l2p(trace.y[k])];
        }""",
        [node_index, trace],
    )


def screenshot(page, name: str, docs: bool = False) -> Path:
    folder = DOCS_IMAGES if docs and os.environ.get("ROLLOUT_GRAPH_DOCS_SCREENSHOTS") else ARTIFACTS
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def click_until(page, point, selector: str, attempts: int = 2, timeout: float = 20_000) -> float:
    """Click at ``point()`` (page coordinates, asked again before each try) until ``selector`` is
    shown: a chart that has just appeared can miss a click before plotly listens. Each try waits
    longer than the one before. Returns ``time.perf_counter()`` at the click that landed."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for attempt in range(attempts):
        x, y = point()
        start = time.perf_counter()
        page.mouse.click(x, y)
        try:
            page.wait_for_selector(selector, timeout=timeout * (attempt + 1))
            return start
        except PlaywrightTimeout:
            if attempt == attempts - 1:
                raise
    raise ValueError("attempts must be at least 1")


def wait_url(page, fragment: str, timeout: float = 15_000) -> None:
    """Wait until the page's URL holds ``fragment`` (the app writes it a moment after it draws)."""
    page.wait_for_function(f"() => location.href.includes({fragment!r})", timeout=timeout)
