"""The search index built ahead of the first search (views/state/search_index.py, with
``SearchIndex.prepare``): built in the background or by the search itself, it holds the same texts
and spans and gives the same hits; the background build pauses while a page runs, does not keep a
waiting search waiting on the pause, and builds only the newest index of a rollout."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from rollout_graph.analysis.decode import decoder_for
from rollout_graph.analysis.search import CONTEXT, SAMPLED, Query, SearchIndex, search
from rollout_graph.ingest.load.files import load_paths
from rollout_graph.pipeline import analyse
from rollout_graph.resources import SAMPLES
from rollout_graph.ui.state import search_index
from rollout_graph.ui.state.search_index import PreparedIndex
from rollout_graph.ui.state.workspace_cache import Activity

QUERIES = ["test", "Traceback", "config", "e", "no such text anywhere", r"\d+ passed", "def "]


@pytest.fixture(scope="module")
def rollouts():
    loaded = load_paths([SAMPLES])
    return [analyse(s) for s in loaded.sessions.values()]


def _index(rollout) -> SearchIndex:
    return SearchIndex(rollout, decoder_for(rollout.calls, [SAMPLES]))


def _same(a: SearchIndex, b: SearchIndex) -> None:
    ma, mb = a.messages(), b.messages()
    assert ma.texts == mb.texts and ma.roles == mb.roles
    assert len(ma.per_call) == len(mb.per_call) and all(
        np.array_equal(x, y) for x, y in zip(ma.per_call, mb.per_call, strict=True)
    )
    assert a.responses() == b.responses()
    for where in (SAMPLED, CONTEXT):
        sa, sb = a.span(where), b.span(where)
        assert [t for t, _ in sa] == [t for t, _ in sb]
        assert all(np.array_equal(x, y) for (_, x), (_, y) in zip(sa, sb, strict=True))


def _hits(index: SearchIndex) -> list:
    out = []
    for text in QUERIES:
        for regex in (False, True):
            for ignore_case in (False, True):
                out.append(search(index, Query.compile(text, regex=regex, ignore_case=ignore_case)))
    return out


def test_a_prepared_index_is_the_index_a_search_builds(rollouts):
    calls = []
    for rollout in rollouts:
        lazy, ahead = _index(rollout), _index(rollout)
        ahead.prepare(lambda: calls.append(1))
        _same(ahead, lazy)
        assert _hits(ahead) == _hits(lazy)
    assert calls  # the hook was called while building


def test_the_background_build_pauses_while_a_page_runs_and_gives_the_same_hits(rollouts):
    rollout = max(rollouts, key=lambda r: len(r.calls))
    activity = Activity()
    prepared = PreparedIndex(_index(rollout))
    paused = threading.Event()
    steps: list[int] = []
    real = prepared.index.prepare

    def prepare(between):
        def noted() -> None:
            steps.append(1)
            paused.set()
            between()

        real(noted)

    prepared.index.prepare = prepare  # type: ignore[method-assign]
    with activity.run():  # a page runs: the build waits for it at its first step
        worker = threading.Thread(target=prepared.build, args=(activity,))
        worker.start()
        assert paused.wait(10)
        # held in its first pause, which lasts while the page runs
        assert steps == [1] and not prepared.done.is_set()
    worker.join(timeout=30)
    assert prepared.done.is_set()
    assert _hits(prepared.index) == _hits(_index(rollout))


def test_a_search_does_not_wait_for_the_pause_of_a_build_it_waits_for(rollouts):
    rollout = max(rollouts, key=lambda r: len(r.calls))
    activity = Activity()
    prepared = PreparedIndex(_index(rollout))
    started = threading.Event()
    real = prepared.index.prepare

    def prepare(between):
        started.set()
        real(between)

    prepared.index.prepare = prepare  # type: ignore[method-assign]
    with activity.run():  # the search's own page run: the build pauses for it...
        worker = threading.Thread(target=prepared.build, args=(activity,))
        worker.start()
        assert started.wait(10)
        begun = time.monotonic()
        with prepared.searching() as index:  # ...until the search waits for it
            hits = _hits(index)
        assert time.monotonic() - begun < search_index.MAX_PAUSE / 2
    worker.join(timeout=30)
    assert hits == _hits(_index(rollout))


def test_only_the_newest_index_of_a_rollout_is_built_in_the_background(rollouts, monkeypatch):
    rollout = rollouts[0]
    monkeypatch.setattr(search_index, "_PENDING", search_index.OrderedDict())
    monkeypatch.setattr(search_index, "_WORKER", [])
    activity = Activity()
    older, newer = PreparedIndex(_index(rollout)), PreparedIndex(_index(rollout))
    with activity.run():  # not quiet yet: both are pending, the newer replaces the older
        search_index.prepare(older, rollout.session_id, activity, quiet=0.05)
        search_index.prepare(newer, rollout.session_id, activity, quiet=0.05)
        search_index.prepare(newer, rollout.session_id, activity, quiet=0.05)  # once per index
    assert newer.done.wait(30)
    # the older one was replaced in the queue before the worker took anything: it is never built
    assert all(ref() is not older for ref in search_index._PENDING.values())
    assert not older.done.is_set()
