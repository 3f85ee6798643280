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

from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-dev-shm-usage",
]
ARTIFACTS = ROOT / "tests" / "artifacts"
# `ROLLOUT_GRAPH_DOCS_SCREENSHOTS=1 pytest tests/browser/test_browser.py` refreshes the docs' screenshots.
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
        stop_group(proc)
        log.close()


def stop_group(proc: subprocess.Popen) -> None:
    """Stop a process started in a session of its own and everything it started (its process
    group): SIGTERM, then SIGKILL after 10 s. Nothing an app started may outlive its test."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


# Streamlit's runs as the page sees them on its websocket, kept in ``window.__rgRuns`` by an init
# script (``track_runs``): every rerun request the page sends (a BackMsg ``rerun_script``, field 11;
# its ClientState's ``is_auto_rerun``, field 6, tells a followed trace's tick from a user's
# request), every run start (a ForwardMsg ``new_session``, field 4, one per run, fragment runs too)
# and end (``script_finished``, field 6; after "finished early for rerun", 2, another run
# follows), and the last user input on the page (a key, a click, a text typed or a field left).
# Only the tags of each message are read (varints and lengths, bounded by the frame), so no
# protobuf library is needed. Streamlit's status widget cannot tell a run is coming: it shows only
# after 500 ms of running, and a widget's request can leave the page a moment after the key or
# click (a text box's Enter, a component's message), so right after an action the page looks idle.
RUNS_INIT_JS = """(() => {
  if (window.__rgRuns) return;
  const runs = window.__rgRuns = { events: 0, asked: 0, user: 0, started: 0, open: 0, rerun: false, at: 0, input: -1e9, acted: 0,
                                   ticks: 0, starts: 0 };
  const varint = (b, i, end) => { let v = 0, m = 1, c;
    do { if (i >= end) return [-1, end]; c = b[i++]; v += (c & 127) * m; m *= 128; } while (c & 128);
    return [v, i]; };
  // the fields of one protobuf message in b[i:end]: [[field, varint value or -1, start, end], ...]
  const fields = (b, i, end) => { const out = [];
    while (i < end) { let tag, v; [tag, i] = varint(b, i, end); if (tag < 0) break;
      const f = Math.floor(tag / 8), w = tag % 8;
      if (w === 0) { [v, i] = varint(b, i, end); if (v < 0) break; out.push([f, v, i, i]); }
      else if (w === 2) { [v, i] = varint(b, i, end); if (v < 0 || i + v > end) break; out.push([f, -1, i, i + v]); i += v; }
      else if (w === 1) { i += 8; } else if (w === 5) { i += 4; } else break; }
    return out; };
  const bytes = (d) => d instanceof ArrayBuffer ? new Uint8Array(d)
    : ArrayBuffer.isView(d) ? new Uint8Array(d.buffer, d.byteOffset, d.byteLength) : null;
  const note = () => { runs.events += 1; runs.at = performance.now(); return runs.events; };
  const Native = window.WebSocket;
  const send = Native.prototype.send;
  Native.prototype.send = function (data) {
    const b = bytes(data);
    if (b) for (const [f, , s, e] of fields(b, 0, b.length)) {
      if (f !== 11) continue;
      runs.asked = note();
      if (!fields(b, s, e).some(([g, v]) => g === 6 && v === 1)) runs.user = runs.asked;  // not a tick
      else runs.ticks += 1;
    }
    return send.call(this, data);
  };
  window.WebSocket = function (...args) {
    const ws = new Native(...args);
    ws.addEventListener("message", (event) => {
      const b = bytes(event.data);
      if (b) for (const [f, v] of fields(b, 0, b.length)) {
        // one run at a time per session: a start opens it, any end closes it, and an end "early
        // for rerun" (2) promises the next run (the rerun asked for, or the script's st.rerun)
        if (f === 4) { runs.started = note(); runs.starts += 1; runs.open = 1; runs.rerun = false; }
        else if (f === 6) { note(); runs.open = 0; runs.rerun = v === 2; }
      }
    });
    return ws;
  };
  window.WebSocket.prototype = Native.prototype;
  Object.assign(window.WebSocket, { CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3 });
  for (const type of ["keydown", "mousedown", "click", "input", "change", "focusout"])
    window.addEventListener(type, () => { runs.input = performance.now(); runs.acted = runs.events; }, true);
})();"""
# How long the page must have been quiet on its websocket (no request, start or end) to be ready:
# a run the server starts right after another's end (a request that reached it while a tick ran)
# is announced within milliseconds of that end, and Streamlit draws a run's end a frame or two
# after receiving it.
QUIET_MS = 250
# How long after a user input the page may still send that input's request; an input followed by
# a user's request (not a tick) needs no more. An action that asks for no run (a key typed into a
# box, a click on text) costs this wait.
INPUT_GRACE_MS = 1000
# Every request the page sent has a run start after it, no run is open nor promised, the websocket has been
# quiet for ``QUIET_MS``, and the last input has had its request (or ``INPUT_GRACE_MS``); true on
# a page without the tracker (one a test opened itself).
RUNS_IDLE = (
    "((r) => !r || (r.started >= r.asked && r.open === 0 && !r.rerun"
    f" && performance.now() - r.at >= {QUIET_MS}"
    f" && (r.user > r.acted || performance.now() - r.input >= {INPUT_GRACE_MS})))(window.__rgRuns)"
)


def track_runs(page) -> None:
    """Keep Streamlit's runs in ``window.__rgRuns`` on every document ``page`` opens (``RUNS_INIT_JS``)."""
    page.add_init_script(RUNS_INIT_JS)


def runs(page) -> dict:
    """The page's run counters (``RUNS_INIT_JS``), or {} on a page without the tracker."""
    return page.evaluate("() => window.__rgRuns ? Object.assign({}, window.__rgRuns) : {}")


@contextlib.contextmanager
def browser_page(width: int = 1500, height: int = 1100):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            track_runs(page)
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


# The page is ready: every run the page asked for has ended (``RUNS_IDLE``), the script is not
# running, the DAG is drawn and every element is (no skeleton left while an element's code loads:
# the chart's code is loaded first, so the DAG can be drawn before the widgets above it, and shown
# elements can be hidden again while one loads).
READY = (
    f"{RUNS_IDLE} && !!dag() && !document.querySelector('[data-testid=\"stStatusWidget\"]')"
    " && !document.querySelector('[data-testid=\"stSkeleton\"]')"
)
READY_JS = DAG_JS + f"() => {READY}"


# Two animation frames: whatever the page changed before this is painted (a condition, not a clock).
PAINTED_JS = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))"
# The page is still: its runs have ended (``RUNS_IDLE``), nothing is loading, web fonts are in and no
# finite CSS animation or transition is running (an expander opening, a scroll-in); infinite ones
# (a spinner) are not waited for.
STILL_JS = (
    f"() => {RUNS_IDLE} && !document.querySelector('[data-testid=\"stStatusWidget\"]')"
    " && !document.querySelector('[data-testid=\"stSkeleton\"]') && document.fonts.status === 'loaded'"
    " && document.getAnimations().every(a => a.playState !== 'running'"
    " || (a.effect && a.effect.getTiming().iterations === Infinity))"
)
# The DAG's chart is drawn and listens: plotly is not replotting or transitioning and its drag layer is there.
CHART_IDLE_JS = DAG_JS + (
    "() => { const gd = dag(); return !!gd && !!gd._fullLayout && !gd._fullLayout._replotting"
    " && !gd._transitioning && !!gd.querySelector('.nsewdrag'); }"
)
# The DAG client (views/panels/dag_client) has drawn the rings of the latest run's arguments.
RINGS_APPLIED_JS = "() => { const s = window.__rgDagState; return !!s && !s.busy && s.wanted === s.drawn; }"


def painted(page) -> None:
    """Until what the page changed is painted (two animation frames)."""
    page.evaluate(PAINTED_JS)


def settle(page, timeout: float = 60_000) -> None:
    """Until the page is still (``STILL_JS``) and painted: before a screenshot or a reading of the
    page that an animation or a run under way would change."""
    page.wait_for_function(STILL_JS, timeout=timeout)
    painted(page)


def chart_idle(page, timeout: float = 30_000) -> None:
    """Until the DAG is drawn and takes clicks (``CHART_IDLE_JS``) and its rings are drawn."""
    page.wait_for_function(CHART_IDLE_JS, timeout=timeout)
    page.wait_for_function(RINGS_APPLIED_JS, timeout=timeout)
    painted(page)


def hovered(page, text: str, timeout: float = 10_000) -> None:
    """Until plotly shows a hover label holding ``text`` (plotly takes a click on the point it hovers)."""
    page.wait_for_function(
        "(t) => Array.from(document.querySelectorAll('.hoverlayer .hovertext')).some(h => h.textContent.includes(t))",
        arg=text,
        timeout=timeout,
    )


def pump_until(page, condition, timeout: float = 30.0, what: str = "the condition"):
    """Until ``condition()`` (Python state that Playwright's event handlers set: a websocket frame,
    a routed message) is truthy; each look lets the page paint a frame, which is when Playwright
    delivers the page's events."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        painted(page)


def wait_ready(page, timeout: float = 60_000) -> None:
    """Until the page is ready (``READY_JS``): after a search typed, a click or a key, until the run
    it started has ended and been drawn, not at once on the old page (``RUNS_INIT_JS``)."""
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


# A dataframe row as a user finds it: by what its cells say. Streamlit's dataframe is a canvas
# (glide-data-grid); for assistive technology it keeps a table of the rows in view (th: the column
# titles; tr aria-rowindex: 1 for the header, 2 for the first row), and its scroller holds the rows'
# full height (header and rows are the same height). The row whose cells hold exactly ``wanted``
# (column title -> text), with where it is drawn, or where the grid is scrolled when it is not in view.
TABLE_ROW_JS = """([nth, wanted]) => {
  const frames = Array.from(document.querySelectorAll('[data-testid="stDataFrame"]'));
  const frame = frames[nth < 0 ? frames.length + nth : nth];
  const grid = frame && frame.querySelector('table[role=grid]');
  const scroller = frame && frame.querySelector('.dvn-scroller');
  if (!grid || !scroller) return null;
  const heads = Array.from(grid.querySelectorAll('thead th')).map(th => th.textContent);
  const rows = Array.from(grid.querySelectorAll('tbody tr'));
  const hit = rows.find(tr => Object.entries(wanted).every(([title, text]) => {
    const k = heads.indexOf(title); return k >= 0 && !!tr.children[k] && tr.children[k].textContent === text; }));
  const height = scroller.scrollHeight / Number(grid.getAttribute('aria-rowcount'));
  const box = scroller.getBoundingClientRect();
  return { row: hit ? Number(hit.getAttribute('aria-rowindex')) - 2 : null, height, top: scroller.scrollTop,
           view: scroller.clientHeight, width: scroller.clientWidth, end: scroller.scrollHeight, x: box.left, y: box.top,
           last: rows.length ? Number(rows[rows.length - 1].getAttribute('aria-rowindex')) : 0,
           count: Number(grid.getAttribute('aria-rowcount')),
           shown: rows.map(tr => Array.from(tr.children).map(c => c.textContent).join(' | ')) };
}"""


def click_table_row(page, wanted: dict[str, str], nth: int = -1, timeout: float = 30.0) -> int:
    """Select the row of the ``nth`` dataframe whose cells hold exactly ``wanted`` (column title ->
    text), as a user does: scroll the table with the wheel until the row is fully in view, then click
    its checkbox. Returns the row's position in the table; fails naming the rows it saw."""
    frame = page.locator('[data-testid="stDataFrame"]').nth(nth)
    frame.scroll_into_view_if_needed()
    deadline = time.monotonic() + timeout
    seen: list[str] = []
    while time.monotonic() < deadline:
        info = page.evaluate(TABLE_ROW_JS, [nth, wanted])
        if info is None or not info["shown"]:  # the grid draws its rows' table a moment after the canvas
            painted(page)
            continue
        seen = info["shown"]
        step = info["height"]
        if info["row"] is None:
            if info["top"] + info["view"] >= info["end"] - 1:
                if info["last"] >= info["count"]:
                    break  # scrolled to the end and its rows' table says so: no such row
                painted(page)  # the rows' table follows the scroll a moment later
                continue
            delta = info["view"] / 2
        else:
            top = step * (info["row"] + 1) - info["top"]  # below the header, from the grid's top
            delta = 0.0
            if top < step:
                delta = top - step
            elif top + step > info["view"]:
                delta = top + step - info["view"]
            if not delta:
                page.mouse.click(info["x"] + 18, info["y"] + top + step / 2)  # its checkbox
                return int(info["row"])
        page.mouse.move(info["x"] + info["width"] / 2, info["y"] + info["view"] / 2)
        page.mouse.wheel(0, delta)
        page.wait_for_function(
            "([nth, was]) => { const f = Array.from(document.querySelectorAll('[data-testid=\"stDataFrame\"]'));"
            " const s = f[nth < 0 ? f.length + nth : nth].querySelector('.dvn-scroller'); return s.scrollTop !== was; }",
            arg=[nth, info["top"]],
            timeout=10_000,
        )
    raise AssertionError(f"no row with {wanted} in the table; rows seen: {seen}")
