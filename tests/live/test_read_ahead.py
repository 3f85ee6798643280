"""The first read started with the server (``rollout-graph view``): the app's first look takes it,
and what it finds equals a read started by the page (and a batch load)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import rollout_graph.live.trace as live_trace
from rollout_graph.ingest.load import cache
from rollout_graph.ingest.load import files as load_module
from rollout_graph.ingest.load.files import load_paths
from rollout_graph.live.trace import LiveTrace, read_ahead, take_read_ahead
from rollout_graph.pipeline import analyse
from tests.support.builders import Turn, assert_same_load, jsonl, vllm_chat

TURNS = [
    Turn("c0", [1, 2, 3], [4, 5]),
    Turn("c2", [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12], [13]),  # before its parent
    Turn("c1", [1, 2, 3, 4, 5, 6], [7, 8, 9, 10]),
    Turn("c3", [1, 2, 3, 4, 5, 6, 7, 8, 99, 14], [15]),  # c1's reply cut: a near miss
]


@pytest.fixture
def trace_file(tmp_path, monkeypatch):
    monkeypatch.setattr(live_trace, "BATCH_MIN_BYTES", 0)  # the batch loader (and its cache entry)
    monkeypatch.setenv("ROLLOUT_GRAPH_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "t.jsonl"
    path.write_bytes(jsonl([vllm_chat(t) for t in TURNS]) + b"{broken\n")
    return path


def _picture(trace: LiveTrace) -> dict:
    out = {}
    for sid in trace.session_ids:
        rollout = trace.rollout(sid)
        out[sid] = (
            [c.node_id for c in rollout.calls],
            rollout.topology.parents,
            sorted((k, m.kind, m.other) for k, m in rollout.near_misses.items()),
            sorted((f.code, f.node_id) for f in rollout.findings),
        )
    return out


def test_a_read_ahead_equals_a_read_started_by_the_page(trace_file):
    ahead = LiveTrace([trace_file])
    ahead.read_ahead()
    update = ahead.poll()  # waits for the read started above and returns its update
    plain = LiveTrace([trace_file])
    plain_update = plain.poll()
    assert [c.node_id for c in update.added] == [c.node_id for c in plain_update.added]
    assert [(s.file, s.line) for s in update.skipped] == [(s.file, s.line) for s in plain_update.skipped]
    assert update.sessions == plain_update.sessions
    assert_same_load(ahead.snapshot(), plain.snapshot())
    assert_same_load(ahead.snapshot(), load_paths([trace_file]))
    assert _picture(ahead) == _picture(plain)
    batch = analyse(load_paths([trace_file]).sessions["s1"])
    assert _picture(ahead)["s1"][1] == batch.topology.parents
    # following goes on from there: an appended call links as in a batch load
    with open(trace_file, "ab") as f:
        f.write(jsonl([vllm_chat(Turn("c4", [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 13, 16], [17]))]))
    assert [c.node_id for c in ahead.poll().added] == ["c4"]
    assert_same_load(ahead.snapshot(), load_paths([trace_file]))


def test_the_cache_entry_waits_for_its_writer(trace_file):
    ahead = read_ahead([str(trace_file)])
    assert read_ahead([str(trace_file)]) is ahead  # one read per set of paths
    ahead.poll()
    assert ahead._held is not None  # read, not written: nobody has said who writes it
    assert not list(cache.cache_dir().glob("*/meta.json"))
    written = []
    taken = take_read_ahead([trace_file], defer_store=lambda key, result: written.append(key))
    assert taken is ahead  # the same paths as Path or str
    assert take_read_ahead([trace_file]) is None  # taken once
    assert len(written) == 1 and ahead._held is None
    cache.store(written[0], ahead.loaded)
    assert_same_load(cache.load(written[0]), load_paths([trace_file]))


def test_a_writer_named_before_the_read_ends_gets_the_entry(trace_file, monkeypatch):
    release = threading.Event()
    real = load_module.load_files

    def slow(*args, **kwargs):
        release.wait(10)
        return real(*args, **kwargs)

    monkeypatch.setattr(load_module, "load_files", slow)
    ahead = read_ahead([trace_file])
    written = []
    assert take_read_ahead([trace_file], defer_store=lambda key, result: written.append(result)) is ahead
    release.set()
    ahead.poll()
    assert len(written) == 1
    assert_same_load(written[0], load_paths([trace_file]))


def test_a_failed_read_ahead_is_raised_by_the_poll_that_waits_for_it(trace_file, monkeypatch):
    def broken(*args, **kwargs):
        raise OSError("disk gone")

    monkeypatch.setattr(load_module, "load_files", broken)
    ahead = LiveTrace([trace_file])
    ahead.read_ahead()
    with pytest.raises(OSError, match="disk gone"):
        ahead.poll()


# -- the app's side: the launcher `rollout-graph view` runs (views/serve.py) -------------------------


def test_the_launcher_reads_the_command_line_traces_ahead_and_the_page_takes_them(trace_file):
    from rollout_graph.ui import serve
    from rollout_graph.ui.state.live import LiveSource

    argv = ["run", "app.py", "--server.port", "1", "--", str(trace_file)]
    assert serve.trace_paths(argv) == [str(trace_file)]
    assert serve.trace_paths(["run", "app.py"]) == []
    assert serve.read_ahead(serve.trace_paths(argv))
    started = live_trace._READ_AHEAD[(str(trace_file),)]
    assert started._ahead is not None
    started._ahead.join()
    assert started.first_read_done  # read and analysed: the page need not load the chart code early
    assert not LiveTrace([trace_file]).first_read_done
    source = LiveSource([trace_file], "command-line traces")
    assert source.trace is started  # the page's first look takes the read started with the server
    fresh = LiveSource([trace_file], "command-line traces")  # nothing read ahead any more: a new read
    assert fresh.trace is not started
    ahead, plain = source.workspace(), fresh.workspace()
    assert_same_load(ahead.loaded, plain.loaded)
    assert {sid: r.topology.parents for sid, r in ahead.rollouts.items()} == {
        sid: r.topology.parents for sid, r in plain.rollouts.items()
    }


def test_a_training_run_folder_is_not_read_ahead(tmp_path):
    from rollout_graph.ui import serve

    run = tmp_path / "run"
    for step in range(1, 5):
        folder = run / f"step_{step}"
        folder.mkdir(parents=True)
        for k in range(13):  # 52 files naming 4 steps (reports/run.py RUN_MIN_FILES)
            (folder / f"rollout_{k}.jsonl").write_bytes(jsonl([vllm_chat(TURNS[0])]))
    from rollout_graph.reports.run import looks_like_run

    assert looks_like_run([str(run)])
    assert not serve.read_ahead([str(run)])
    assert (str(run),) not in live_trace._READ_AHEAD
    assert not serve.read_ahead([])


def test_warming_imports_the_first_page_but_modules_that_declare_a_component():
    from rollout_graph.ui.state import warm

    imported = [name for module, names in warm.page_imports(warm.SCREENS / warm.FIRST_PAGE) for name in names]
    assert "keyboard" in imported and "graph" in imported
    # Streamlit registers a component only inside a page run: imported earlier, the page would wait
    assert warm.declares_component("rollout_graph.ui.panels.keyboard")
    assert warm.declares_component("rollout_graph.ui.panels.graph")  # the DAG's browser component
    assert not warm.declares_component("rollout_graph.escape")
    done = warm.import_page(warm.SCREENS / warm.FIRST_PAGE)
    # neither component module is imported early, but what the DAG panel imports (its builder) is
    assert "rollout_graph.ui.panels.graph" not in done and "rollout_graph.ui.panels.keyboard" not in done
    assert "rollout_graph.ui.builders.dag" in done


def test_warming_maps_the_module_files_a_component_declaration_looks_up():
    """A component's declaration (the first page run's) finds its module with inspect.getmodule,
    whose first call maps every imported module's file: warming makes that map beforehand."""
    import inspect
    import sys

    from rollout_graph.ui.state import warm

    warm.warm()
    imported = [m for m in ("rollout_graph.ui.builders.dag", "plotly.graph_objects", "streamlit") if m in sys.modules]
    assert imported
    for name in imported:
        assert inspect.getabsfile(sys.modules[name]) in inspect.modulesbyfile, name


def test_the_page_knows_when_the_command_line_traces_are_read(trace_file):
    """views/app.py loads the chart code with a hidden chart only while the traces are still read."""
    from rollout_graph.ui.state import live

    paths = [str(trace_file)]
    assert not live.read_already(paths)  # no source yet
    found = live.source([Path(p) for p in paths], live.COMMAND_LINE_LABEL)
    assert not live.read_already(paths)  # nothing read ahead, nothing read yet
    found.workspace()
    assert live.read_already(paths)
