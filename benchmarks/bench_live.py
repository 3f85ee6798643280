"""How fast a new call shows up when following a growing trace.

On a synthetic rollout (benchmarks/synthetic.py, contexts compacted at 8k tokens) whose last
``--appends`` calls are appended one at a time, prints medians of:

* library: one poll after one appended call (parse the new line, link it incrementally,
  re-analyse the rollout), against a batch reload of the whole file (what a click used to cost);
  the incremental link of one call against batch linking of all of them;
* ``rollout-graph tail --json``: from the append to its ``call`` event on stdout (polling 0.1 s);
* the app in headless Chromium: from the append to the DAG drawing the new call, no click
  (the live panel reruns every second).

``python benchmarks/bench_live.py [--calls 1000] [--appends 10] [--no-browser]``
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from synthetic import generate  # noqa: E402

from rollout_graph.core.linking import link  # noqa: E402
from rollout_graph.ingest.load.files import load_paths  # noqa: E402
from rollout_graph.live.linking import IncrementalLinker  # noqa: E402
from rollout_graph.live.trace import LiveTrace  # noqa: E402
from rollout_graph.pipeline import analyse  # noqa: E402


def append(path: Path, record: bytes) -> None:
    with open(path, "ab") as f:
        f.write(record + b"\n")


def library(records: list[bytes], folder: Path, appends: int) -> None:
    path = folder / "lib.jsonl"
    path.write_bytes(b"".join(r + b"\n" for r in records[:-appends]))
    trace = LiveTrace([path])
    start = time.perf_counter()
    trace.poll()
    sid = trace.session_ids[0]
    trace.rollout(sid)
    print(
        f"  first read of {len(records) - appends} calls (live reader, analysed): {time.perf_counter() - start:.2f} s"
    )
    polls = []
    for record in records[-appends:]:
        append(path, record)
        start = time.perf_counter()
        trace.poll()
        trace.rollout(sid)
        polls.append(time.perf_counter() - start)
    start = time.perf_counter()
    loaded = load_paths([path])
    session = next(iter(loaded.sessions.values()))
    analyse(session)
    reload = time.perf_counter() - start
    print(f"  one appended call, poll + link + re-analyse: median {statistics.median(polls) * 1000:.0f} ms")
    print(f"  batch reload + analyse of the whole file: {reload:.2f} s ({reload / statistics.median(polls):.0f}x)")
    calls = session.calls
    linker = IncrementalLinker()
    for call in calls[:-appends]:
        linker.add(call)
    adds = []
    for call in calls[-appends:]:
        start = time.perf_counter()
        linker.add(call)
        adds.append(time.perf_counter() - start)
    start = time.perf_counter()
    link(calls)
    batch = time.perf_counter() - start
    print(
        f"  linking one new call incrementally: median {statistics.median(adds) * 1000:.2f} ms; "
        f"batch linking of all {len(calls)}: {batch * 1000:.0f} ms"
    )


def tail(records: list[bytes], folder: Path, appends: int) -> None:
    path = folder / "tail.jsonl"
    path.write_bytes(b"".join(r + b"\n" for r in records[:-appends]))
    command = [sys.executable, "-m", "rollout_graph", "tail", "--json", "--interval", "0.1", str(path)]
    proc = subprocess.Popen(command, cwd=HERE.parent, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    seen: dict[str, float] = {}
    lock = threading.Lock()

    def reader() -> None:
        for raw in proc.stdout:
            if b'"event":"call"' in raw:
                node = raw.split(b'"node_id":"', 1)[1].split(b'"', 1)[0].decode()
                with lock:
                    seen[node] = time.perf_counter()

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 300
        while len(seen) < len(records) - appends:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("tail did not print the first calls")
            time.sleep(0.05)
        delays = []
        for record in records[-appends:]:
            node = orjson.loads(record)["call_id"]
            start = time.perf_counter()
            append(path, record)
            deadline = time.monotonic() + 60
            while node not in seen:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"tail never printed {node}")
                time.sleep(0.005)
            delays.append(seen[node] - start)
            time.sleep(0.3)
        print(
            f"  tail: append -> call event printed: median {statistics.median(delays) * 1000:.0f} ms, max {max(delays) * 1000:.0f} ms"
        )
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def app(records: list[bytes], folder: Path, appends: int) -> None:
    from tests.support.browser import DAG_JS, browser_page, running_app, wait_ready

    capture = folder / "capture"
    capture.mkdir()
    path = capture / "trace.jsonl"
    path.write_bytes(b"".join(r + b"\n" for r in records[:-appends]))
    with running_app("--", str(capture)) as url, browser_page() as page:
        page.goto(url)
        wait_ready(page, timeout=180_000)
        delays = []
        for record in records[-appends:]:
            before = page.evaluate(DAG_JS + "() => dag()._fullData[1].x.length")
            start = time.perf_counter()
            append(path, record)
            page.wait_for_function(
                DAG_JS + f"() => dag() && dag()._fullData[1].x.length > {before}", timeout=60_000, polling=50
            )
            delays.append(time.perf_counter() - start)
            time.sleep(0.5)
        print(
            f"  app: append -> DAG draws the call, no click: median {statistics.median(delays):.2f} s, "
            f"max {max(delays):.2f} s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--appends", type=int, default=10)
    parser.add_argument("--no-browser", action="store_true")
    args = parser.parse_args()
    w = generate(args.calls, seed=5, max_context=8_000)
    records = w.records
    print(
        f"{args.calls} calls, {w.tokens:,} tokens, {sum(map(len, records)) / 1e6:.0f} MB; last {args.appends} appended one by one"
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        library(records, folder, args.appends)
        tail(records, folder, args.appends)
        if not args.no_browser:
            app(records, folder, args.appends)


if __name__ == "__main__":
    main()
