"""The server ``rollout-graph view`` starts: ``streamlit run`` in this process, with the first
page's slow parts started as the server starts instead of when the first visitor arrives.

Entry point: ``main()``, run as ``python views/serve.py run APP [STREAMLIT FLAGS] -- [PATH ...]``
(graph/cli/view.py builds it): reads the command-line traces on a thread at once (``read_ahead``),
warms the first page's imports once the runtime exists (``warm_when_running``,
views/state/warm.py), then builds the first page's DAG figure (views/state/dag_figures.py); turns
Nagle's algorithm off on its connections (``no_delay``).

Where it sits: found beside the app script; the library never imports it. ``streamlit run app.py
-- PATH`` still works (docs/performance.md "The app's first paint")."""

from __future__ import annotations

import contextlib
import functools
import socket
import sys
import threading
import time


def trace_paths(argv: list[str]) -> list[str]:
    """The paths after ``--`` (the app's own arguments)."""
    return argv[argv.index("--") + 1 :] if "--" in argv else []


def read_ahead(paths: list[str]) -> bool:
    """Start the first read of the command-line traces now; a training run's folder opens on the
    Run page and is not read whole (views/app.py). Whether a read was started."""
    from rollout_graph.live.trace import read_ahead as start
    from rollout_graph.reports.run import looks_like_run

    if not paths or looks_like_run(paths):
        return False
    start(paths)
    return True


def warm_when_running(timeout: float = 60.0, paths: list[str] | None = None) -> threading.Thread:
    """Run views/state/warm.py ``warm`` on a thread once the server's runtime exists (the app's
    caches and components are set up against it); then, when ``paths`` (traces being read ahead)
    are given, build the DAG figure their first page draws once they are read
    (views/state/dag_figures.py ``first_page_drawing``)."""

    def run() -> None:
        from streamlit import runtime

        deadline = time.monotonic() + timeout
        while not runtime.exists():
            if time.monotonic() > deadline:
                return
            time.sleep(0.02)
        try:
            from rollout_graph.ui.state.warm import warm

            warm()
            if paths:
                from rollout_graph.ui.state.dag_figures import first_page_drawing

                first_page_drawing(paths)
        except Exception:  # noqa: BLE001 - warming is an optimisation: the first page run does it otherwise
            pass

    thread = threading.Thread(target=run, name="rg-warm", daemon=True)
    thread.start()
    return thread


def no_delay() -> bool:
    """Turn Nagle's algorithm off on the server's connections. Streamlit binds its listening
    socket itself, with protocol 0, and asyncio disables Nagle only on sockets whose protocol is
    TCP: every response or websocket message written in two parts (a header, then a small body)
    waited for the browser's delayed acknowledgement, about 40 ms, on a kept-alive connection
    (each of the ~60 script files of the page, each message of a page run). The listening socket
    gets TCP_NODELAY (inherited by its connections on Linux) and the TCP protocol number (so
    asyncio sets it on each connection it accepts, everywhere). Whether the server's bind was
    wrapped: not when Streamlit has no such function (another version: it then binds as it did)."""
    try:
        from streamlit.web.server.starlette import starlette_server
    except ImportError:
        return False
    bind = getattr(starlette_server, "_bind_socket", None)
    if bind is None:
        return False
    if getattr(bind, "no_delay", False):
        return True

    @functools.wraps(bind)
    def bind_no_delay(*args, **kwargs) -> socket.socket:
        sock = bind(*args, **kwargs)
        if sock.type != socket.SOCK_STREAM or sock.family not in (socket.AF_INET, socket.AF_INET6):
            return sock
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if sock.proto == socket.IPPROTO_TCP:
            return sock
        blocking = sock.getblocking()
        tcp = socket.socket(sock.family, sock.type, socket.IPPROTO_TCP, fileno=sock.detach())
        tcp.setblocking(blocking)
        return tcp

    bind_no_delay.no_delay = True  # type: ignore[attr-defined]
    starlette_server._bind_socket = bind_no_delay
    return True


def main(argv: list[str]) -> None:
    # Streamlit and pandas are imported to the end first: plotly (which Streamlit sets up on import)
    # looks pandas up in sys.modules, and the read's thread may be importing it (pyarrow does).
    import pandas  # noqa: F401
    from streamlit.web.cli import main as streamlit_main

    no_delay()
    paths = trace_paths(argv)
    reading = read_ahead(paths)
    warm_when_running(paths=paths if reading else None)
    sys.argv = ["streamlit", *argv]
    streamlit_main(prog_name="streamlit")


if __name__ == "__main__":
    main(sys.argv[1:])
