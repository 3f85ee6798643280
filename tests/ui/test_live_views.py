"""The live view's pure parts: the newest call's ring in the DAG figure and the status line, and a
live source that extends its workspace as the file grows."""

from __future__ import annotations

from rollout_graph.ingest.load.files import load_paths
from rollout_graph.pipeline import analyse
from rollout_graph.ui.builders.dag import dag_figure
from rollout_graph.ui.state.live import (
    QUIET_AFTER_SECONDS,
    QUIET_TICK_SECONDS,
    TICK_SECONDS,
    LiveSource,
    mark_newest,
    status_html,
)
from tests.support.builders import Turn, jsonl, vllm_chat


def grow(path, *turns):
    with open(path, "ab") as f:
        f.write(jsonl([vllm_chat(t) for t in turns]))


def test_live_source_extends_its_workspace_and_names_the_newest_call(tmp_path):
    path = tmp_path / "t.jsonl"
    grow(path, Turn("c0", [1, 2], [3]))
    live = LiveSource([path], "live")
    first = live.workspace()
    assert [c.node_id for c in first.rollouts["s1"].calls] == ["c0"]
    grow(path, Turn("c1", [1, 2, 3, 4], [5]))
    live.last_poll = 0  # no waiting for the poll interval in a test
    second = live.workspace()
    assert second.key != first.key
    rollout = second.rollouts["s1"]
    assert rollout.topology.parents == [None, 0]
    assert live.newest_index(rollout) == 1
    assert [c.node_id for c in first.rollouts["s1"].calls] == ["c0"]  # earlier snapshots do not change
    # the same answer as a batch load
    batch = analyse(load_paths([path]).sessions["s1"])
    assert batch.topology.parents == rollout.topology.parents
    with open(path, "ab") as f:
        f.write(b'{"call_id": "c2", ')
    live.last_poll = 0
    third = live.workspace()
    assert third.key == second.key  # a partial line changes nothing ...
    assert "unfinished line" in status_html(live, third, paused=False)  # ... but is said


def test_the_newest_call_is_ringed_over_its_node(tmp_path):
    path = tmp_path / "t.jsonl"
    grow(path, Turn("c0", [1, 2], [3]), Turn("c1", [1, 2, 3, 4], [5]))
    rollout = analyse(load_paths([path]).sessions["s1"])
    fig = mark_newest(dag_figure(rollout), 1)
    nodes = next(t for t in fig.data if t.name == "calls")
    ring = next(t for t in fig.data if t.name == "newest")
    assert (ring.x[0], ring.y[0]) == (nodes.x[1], nodes.y[1])
    assert ring.hoverinfo == "skip"
    assert fig.data[1].name == "calls"  # clicks still land on the calls trace
    # no WebGL in the DAG: a context set up for one ring costs the first paint about 0.2 s
    assert {t.type for t in fig.data} == {"scatter"}


def test_status_line_escapes_and_says_paused(tmp_path):
    path = tmp_path / "t.jsonl"
    grow(path, Turn("c0", [1, 2], [3]))
    live = LiveSource([path], "live")
    text = status_html(live, live.workspace(), paused=True, now=live.last_change + 5)
    # a file that has not grown since it was opened has no "last new call ... ago"
    assert "Paused" in text and "1 call ·" in text and "s ago" not in text and "no new call since" in text
    grow(path, Turn("c1", [1, 2, 3, 4], [5]))
    live.last_poll = 0.0
    workspace = live.workspace()
    text = status_html(live, workspace, paused=False, now=live.last_change + 5)
    assert "2 calls ·" in text and "last new call 5 s ago" in text


def test_a_quiet_trace_is_looked_at_less_often(tmp_path):
    """Every second while calls arrive (and for a minute after the last one, or while a line is
    being written); every 3 s for a trace that has not grown since it was opened or went quiet."""
    path = tmp_path / "t.jsonl"
    grow(path, Turn("c0", [1, 2], [3]))
    live = LiveSource([path], "live")
    live.workspace()
    assert live.tick_seconds() == QUIET_TICK_SECONDS  # opened, never grew
    grow(path, Turn("c1", [1, 2, 3, 4], [5]))
    live.last_poll = 0.0
    live.workspace()
    assert live.tick_seconds(now=live.last_change + 1) == TICK_SECONDS
    assert live.tick_seconds(now=live.last_change + QUIET_AFTER_SECONDS + 1) == QUIET_TICK_SECONDS
    with open(path, "ab") as f:
        f.write(b'{"call_id": "c2", ')  # a line being written: the writer is at work
    live.last_poll = 0.0
    live.workspace()
    assert live.tick_seconds(now=live.last_change + QUIET_AFTER_SECONDS + 1) == TICK_SECONDS
