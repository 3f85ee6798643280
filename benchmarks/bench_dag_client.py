"""What a j/k step, a chart click and a search cost in the browser, on one trace folder given on
the command line: for each step, the wall time until the next call's detail (or the hits) is
shown, the server's CPU, the bytes pushed, what plotly was asked to do (``Plotly.newPlot``,
``react``, ``relayout``, ``update``, ``restyle``: calls and ms, timed in the page) and the
main thread's long tasks (a ``PerformanceObserver``). Then, with ``--micro``, what each way of
moving a ring costs on the page's DAG (a relayout of the shapes, of one shape, of the
annotations, a restyle, a react of the same figure).

``python benchmarks/bench_dag_client.py FOLDER [--steps 6] [--micro]``: one headless Chromium page
at 1440x900. Wall times on a shared machine are noise: read the plotly column and the CPU.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bench_app import SEARCHES, server_cpu  # noqa: E402

from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, DAG_JS, click_until, node_position, running_app, wait_ready  # noqa: E402

INSTRUMENT = """() => {
  if (window.__rgT) return;
  window.__rgT = {plotly: {}, long: 0};
  for (const name of ['newPlot', 'react', 'update', 'relayout', 'restyle']) {
    const f = window.Plotly[name];
    window.Plotly[name] = function (...a) {
      const t0 = performance.now(), r = f.apply(this, a);
      const add = () => { const o = window.__rgT.plotly[name] || (window.__rgT.plotly[name] = [0, 0]);
                          o[0] += 1; o[1] += performance.now() - t0; };
      if (r && r.then) r.then(add, add); else add();
      return r;
    };
  }
  new PerformanceObserver(l => l.getEntries().forEach(e => { window.__rgT.long += e.duration; }))
    .observe({entryTypes: ['longtask']});
}"""
TAKE = "() => { const t = JSON.parse(JSON.stringify(window.__rgT)); window.__rgT.plotly = {}; window.__rgT.long = 0; return t; }"
CHANGED = (
    "(before) => { const t = document.querySelector('.rg-node-title');"
    " return t && !t.textContent.startsWith(before + ' ') && !document.querySelector('[data-testid=\"stStatusWidget\"]'); }"
)
IDLE = "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
HITS = (
    "(text) => Array.from(document.querySelectorAll('.st-key-rg-search-hits button')).some(b => b.textContent.includes(text))"
    " && !document.querySelector('[data-testid=\"stStatusWidget\"]')"
)
MICRO = (
    DAG_JS
    + """async () => {
  const gd = dag(), P = window.Plotly, out = {}, c = gd._fullData[1];
  const time = async (name, f) => { const t0 = performance.now();
    try { await f(); out[name] = Math.round(performance.now() - t0); } catch (e) { out[name] = 'error: ' + e.message; } };
  const copy = (v) => JSON.parse(JSON.stringify(v));
  const ri = (gd.layout.shapes || []).findIndex(s => s.name === 'rg-ring-selected');
  out.drawn_calls = c.x.length;
  await time('relayout of the shapes array', () => P.relayout(gd, {shapes: copy(gd.layout.shapes)}));
  await time('react, same data and layout', () => P.react(gd, gd.data, gd.layout));
  if (ri >= 0) await time('relayout of one shape', () =>
    P.relayout(gd, {[`shapes[${ri}].xanchor`]: c.x[6], [`shapes[${ri}].yanchor`]: c.y[6]}));
  await time('relayout of the annotations', () => P.relayout(gd, {annotations: [{x: c.x[5], y: c.y[5], text: 'x', name: 'bench'}]}));
  await time('restyle of the labels colours', () =>
    P.restyle(gd, {'textfont.color': [gd.data[3].textfont.color.slice()]}, [3]));
  await P.relayout(gd, {annotations: []});
  return out;
}"""
)


def fmt(t: dict) -> str:
    calls = ", ".join(f"{k} {n}x {ms:.0f} ms" for k, (n, ms) in sorted(t["plotly"].items())) or "none"
    return f"plotly: {calls}; long tasks {t['long']:.0f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--micro", action="store_true", help="also time each way of moving a ring")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with running_app("--", args.folder) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
        pushed = [0]
        page.on("websocket", lambda ws: ws.on("framereceived", lambda m: pushed.__setitem__(0, pushed[0] + len(m))))
        page.goto(url)
        wait_ready(page, timeout=600_000)
        page.wait_for_timeout(1500)
        page.evaluate(INSTRUMENT)
        shown = page.evaluate(DAG_JS + "() => Array.from(dag()._fullData[1].customdata)")
        node = min(shown, key=lambda c: (abs(c - 30), c))  # an early call: in the first window

        def measure(what: str, act, done) -> float:
            page.evaluate(TAKE)
            pushed[0] = 0
            cpu = server_cpu(url)
            start = time.perf_counter()
            act()
            done()
            wall = time.perf_counter() - start
            page.wait_for_timeout(700)  # what the browser does after the detail is shown
            print(
                f"{what}: {wall:.2f} s, server CPU {server_cpu(url) - cpu:.2f} s, pushed {pushed[0] / 1e6:.2f} MB,"
                f" {fmt(page.evaluate(TAKE))}, load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
            return wall

        measure(
            "chart click",
            lambda: click_until(page, lambda: node_position(page, node), ".rg-node-title", 3, 30_000),
            lambda: page.wait_for_function(IDLE, timeout=120_000),
        )
        steps = []
        for _ in range(args.steps):
            before = page.eval_on_selector(".rg-node-title", "t => t.textContent.split(' ')[0]")
            page.evaluate("document.activeElement && document.activeElement.blur()")
            steps.append(
                measure(
                    "  j step",
                    lambda: page.keyboard.press("j"),
                    lambda before=before: page.wait_for_function(CHANGED, arg=before, timeout=120_000),
                )
            )
        print(f"j step median {statistics.median(steps):.2f} s", flush=True)
        box = page.get_by_label("Search this rollout")
        for text in SEARCHES:
            box.fill(text)
            measure(
                f"  search {text!r}",
                lambda: box.press("Enter"),
                lambda text=text: page.wait_for_function(HITS, arg=text, timeout=120_000),
            )
            box.fill("")
            box.press("Enter")
            page.wait_for_function("() => !document.querySelector('.st-key-rg-search-hits button')", timeout=120_000)
            page.wait_for_function(IDLE, timeout=120_000)
        if args.micro:
            for _ in range(2):
                print("micro (ms):", page.evaluate(MICRO), f"load {os.getloadavg()[0]:.1f}", flush=True)
        browser.close()


if __name__ == "__main__":
    main()
