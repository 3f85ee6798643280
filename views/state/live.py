"""Following the command-line traces while they grow.

Entry points: ``source(paths, label) -> LiveSource`` (one shared ``LiveTrace`` per server: only
appended bytes are parsed, calls linked incrementally), ``prefetch``, ``follow(source, draw)`` (a
small fragment polls every ``TICK_SECONDS`` and reruns the page only when the snapshot changed),
``sidebar_controls``, ``status_html``, ``mark_newest`` (the newest call's ring in the figure).

Where it sits: the sidebar opens it for command-line traces; the explorer draws through
``follow`` (views/screens/explorer.py). docs/user-guide.md, "Following a live trace"."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from pathlib import Path

import plotly.graph_objects as go
import streamlit as st

from rollout_graph.core.rollout import Rollout
from rollout_graph.escape import html_text
from rollout_graph.ingest.files.sources import Source
from rollout_graph.live.trace import LiveTrace, take_read_ahead
from rollout_graph.ui import state
from rollout_graph.ui.builders.dag import MARKS_AXIS, drawn_point
from rollout_graph.ui.builders.palette import NEWEST_RING
from rollout_graph.ui.state.lru import LRU
from rollout_graph.ui.state.sources import Workspace, store_after_paint

COMMAND_LINE_LABEL = "command-line traces"  # the source's label (sidebar and prefetch open the same one)
TICK_SECONDS = 1.0  # how often the live panel looks for new calls while calls arrive
# ... and once the trace is quiet (no call appended for QUIET_AFTER_SECONDS, or none since it was
# opened, and no line being written): each look costs the page about 45 ms of its main thread at
# any trace size, so a finished trace open in a tab is looked at a third as often (docs/user-guide.md)
QUIET_TICK_SECONDS = 3.0
QUIET_AFTER_SECONDS = 60.0
MIN_POLL_SECONDS = 0.5  # however many browser sessions look, the files are read at most this often
NEWEST_COLOR = NEWEST_RING  # green: red rings are search hits, the dark ring the selected call


class LiveSource:
    """One followed set of paths; :meth:`workspace` returns an immutable snapshot of it."""

    def __init__(self, paths: list[Path], label: str) -> None:
        self.paths = paths
        self.label = label
        digest = hashlib.sha256("\n".join(str(p.resolve()) for p in paths).encode()).hexdigest()[:12]
        self.key = f"live-{digest}"
        # the read `rollout-graph view` started with the server, else a new one; the cache entry is
        # written after the first paint either way
        ahead = take_read_ahead(paths, defer_store=store_after_paint)
        self.trace = ahead if ahead is not None else LiveTrace(paths, defer_store=store_after_paint)
        self.generation = 0
        self.last_poll = 0.0
        self.last_change = time.time()
        self.grew = False  # a call was appended after the first read: the trace is growing
        self.newest: dict[str, str] = {}
        self.pending: dict[str, int] = {}  # files ending in an unfinished line, as of the last poll
        self._lock = threading.Lock()
        self._workspace: Workspace | None = None
        self.prefetched = False

    @property
    def ready(self) -> bool:
        """Whether the first read has ended (a snapshot exists): :meth:`workspace` will not wait for it."""
        return self._workspace is not None

    def workspace(self, poll: bool = True) -> Workspace:
        """The current snapshot; reads what is new first unless paused (or read just now)."""
        with self._lock:
            now = time.monotonic()
            if self._workspace is None or (poll and now - self.last_poll >= MIN_POLL_SECONDS):
                self.last_poll = now
                update = self.trace.poll()
                self.pending = self.trace.pending_bytes()
                if update.changed or self._workspace is None:
                    first = self._workspace is None
                    self._snapshot()
                    if update.added:
                        self.last_change = time.time()
                        self.grew = self.grew or not first
            assert self._workspace is not None
            return self._workspace

    def _snapshot(self) -> None:
        self.generation += 1
        rollouts = {sid: self.trace.rollout(sid) for sid in self.trace.session_ids}
        loaded = self.trace.snapshot()
        files = [Path(f) for f in loaded.files]
        sources = {str(f): Source.from_path(f) for f in files}  # Raw JSON reads the records back from them
        self._workspace = Workspace(f"{self.key}-g{self.generation}", self.label, loaded, files, rollouts, sources)
        self.newest = dict(self.trace.newest)

    def tick_seconds(self, now: float | None = None) -> float:
        """How often the page looks for new calls: every ``TICK_SECONDS`` while the trace grows
        (a call appended in the last ``QUIET_AFTER_SECONDS``, or a file ending in a line still
        being written), else every ``QUIET_TICK_SECONDS``; the first new call a look finds reruns
        the page, which looks every second again."""
        now = time.time() if now is None else now
        growing = self.grew and now - self.last_change < QUIET_AFTER_SECONDS
        return TICK_SECONDS if growing or self.pending else QUIET_TICK_SECONDS

    def newest_index(self, rollout: Rollout) -> int | None:
        """The arrival index of the call read last in this rollout."""
        node_id = self.newest.get(rollout.session_id)
        try:
            return None if node_id is None else rollout.index_of(node_id)
        except KeyError:
            return None


_SOURCES: LRU[tuple[str, ...], LiveSource] = LRU(4)
_PREFETCH_LOCK = threading.Lock()


def _source_key(paths: list[Path] | list[str]) -> tuple[str, ...]:
    return tuple(str(Path(p)) for p in paths)


def source(paths: list[Path], label: str) -> LiveSource:
    """The server-wide live source for these paths (created on first use)."""
    return _SOURCES.get_or_create(_source_key(paths), lambda: LiveSource(paths, label))


def prefetch(paths: list[str]) -> None:
    """Start the first read of the command-line traces (all their files, as the sidebar opens them
    by default) on a thread of its own, once per server: it then runs while the first page run
    imports the panels and draws the sidebar, and that run's first look waits for it instead of
    starting it (docs/performance.md)."""
    found = source([Path(p) for p in paths], COMMAND_LINE_LABEL)
    with _PREFETCH_LOCK:
        if found.prefetched:
            return
        found.prefetched = True
    threading.Thread(target=_first_read, args=(found,), name="rg-first-read", daemon=True).start()


def read_already(paths: list[str]) -> bool:
    """Whether the first read of these command-line traces has ended (the server read them as it
    started, from the persistent cache on a reopen): a page run then draws them without waiting."""
    found = _SOURCES.get(_source_key(paths))
    return found is not None and (found.ready or found.trace.first_read_done)


def _first_read(found: LiveSource) -> None:
    try:
        found.workspace()
    except Exception:  # noqa: BLE001 - the page's own first look reads again and reports it
        found.prefetched = False


def sidebar_controls() -> tuple[bool, bool]:
    """(paused, follow newest), from the sidebar toggles."""
    paused = st.sidebar.toggle(
        "Pause following",
        key=state.LIVE_PAUSED,
        help="The files given on the command line are followed: new calls appear within about two seconds "
        "while the trace grows (a quiet trace is looked at every 3 s, so its first new call can take up to "
        "4 s). Pause to stop reading them; resuming reads only what was appended meanwhile.",
    )
    newest = st.sidebar.toggle(
        "Follow the newest call",
        key=state.LIVE_FOLLOW_NEWEST,
        help="Select each new call of the open rollout as it arrives.",
    )
    return paused, newest


def status_html(live: LiveSource, workspace: Workspace, paused: bool, now: float | None = None) -> str:
    """The live status line (pure): following or paused, files, calls, the newest call and when it came."""
    now = time.time() if now is None else now
    calls = sum(len(r.calls) for r in workspace.rollouts.values())
    pending = live.pending
    dot = "#94a3b8" if paused else "#16a34a"
    what = "Paused" if paused else "Following"
    parts = [f"{len(workspace.loaded.files)} file(s)", f"{calls:,} call{'' if calls == 1 else 's'}"]
    if live.grew:  # only while the trace grows: a finished file has no "last new call"
        parts.append(f"last new call {max(0.0, now - live.last_change):.0f} s ago")
    else:
        parts.append("no new call since it was opened")
    if pending:
        parts.append(f"{len(pending)} file(s) end in an unfinished line (waiting)")
    text = " · ".join(html_text(p) for p in parts)
    return (
        f'<div class="rg-live" style="font-size:13px;color:#334155;margin:2px 0 6px">'
        f'<span style="display:inline-block;width:9px;height:9px;border-radius:50%;background:{dot};'
        f'margin-right:6px"></span><b>{what}</b> {text}</div>'
    )


def mark_newest(fig: go.Figure, index: int) -> go.Figure:
    """Ring the newest call in the DAG figure (pure): a marker drawn over point ``index`` of the
    trace named ``calls``, which takes no hover or clicks. An SVG trace like the rest of the DAG: a
    WebGL one would make plotly set up WebGL for one point, about 0.2 s of the page's first paint
    (docs/performance.md "The app")."""
    point = drawn_point(fig, index)
    if point is None:
        return fig
    fig.add_trace(
        go.Scatter(
            x=[point[0]],
            y=[point[1]],
            mode="markers+text",
            text=["newest"],
            textposition="bottom center",
            textfont={"size": 10, "color": NEWEST_COLOR},
            marker={"size": 19, "symbol": "circle-open", "color": NEWEST_COLOR, "line": {"width": 2.5}},
            hoverinfo="skip",
            cliponaxis=False,  # its label under the bottom row is not cut by the plot area's edge
            showlegend=False,
            name="newest",
            xaxis=MARKS_AXIS,  # with the other markers, over the lines and out of the overview
        )
    )
    return fig


def follow(live: LiveSource, body: Callable[[Workspace], Rollout | None]) -> tuple[Workspace, Rollout | None]:
    """Draw the page with the followed traces as they are now, and watch them: a small fragment
    reruns every ``LiveSource.tick_seconds()`` (unless paused), polls the files and, only when
    something was appended, reruns the page. A tick with nothing new costs a look at the files'
    sizes, whatever the rollout's size; the page itself (the DAG, the call detail) is drawn only
    when it changed."""
    paused = bool(st.session_state.get(state.LIVE_PAUSED, False))
    follow_newest = bool(st.session_state.get(state.LIVE_FOLLOW_NEWEST, False))
    shown: dict[str, Workspace] = {}

    @st.fragment(run_every=None if paused else live.tick_seconds())
    def watch() -> None:
        workspace = live.workspace(poll=not paused)
        st.html(status_html(live, workspace, paused))
        if "page" not in shown:  # the page's own run: it draws this snapshot
            shown["page"] = workspace
        elif workspace.key != st.session_state.get(state.LIVE_GENERATION):
            st.rerun()  # new calls: draw the page again

    watch()
    workspace = shown["page"]
    if st.session_state.get(state.LIVE_GENERATION) != workspace.key:
        # the figure is rebuilt: let it draw the selected call as selected
        st.session_state[state.LIVE_GENERATION] = workspace.key
        st.session_state[state.HIGHLIGHT] = st.session_state.get(state.NODE)
    if follow_newest:
        _select_newest(live, workspace)
    return workspace, body(workspace)


def _select_newest(live: LiveSource, workspace: Workspace) -> None:
    """ "Follow the newest call": select the newest call of the open rollout once, when it arrives."""
    rollout = workspace.rollouts.get(st.session_state.get(state.SESSION) or "")
    if rollout is None:
        return
    newest = live.newest_index(rollout)
    seen = st.session_state.setdefault(state.LIVE_FOLLOWED, {})
    if newest is not None and seen.get(rollout.session_id) != rollout.calls[newest].node_id:
        seen[rollout.session_id] = rollout.calls[newest].node_id
        state.select_node(rollout, newest)
