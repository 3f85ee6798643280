"""The persistent cache's reopen (graph/ingest/load/cache.py, entry format 2): what a summary needs is
read first, the rest on first use, and every shortcut gives exactly what a fresh load gives.

- prompts that share an id arena are written once and reopened as views of one buffer;
- the top-k alternatives stay in ``top.bin`` until read (checksummed; an entry removed after the
  reopen stays readable, one changed in place gives empty alternatives saying why);
- a stale, truncated or corrupt entry is ignored with a note, never a traceback.
"""

from __future__ import annotations

import logging
import os
import pickle
import shutil

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rollout_graph.core.records import Call, Finding, LoadResult, SessionInput, TopK
from rollout_graph.ingest.load import cache, cache_format, cache_read
from rollout_graph.ingest.load.files import load_files, load_paths
from rollout_graph.ui.state.workspace_cache import estimate_bytes
from tests.support.builders import Turn, assert_same_load, vllm_chat


def _calls(result: LoadResult) -> list[Call]:
    return [c for s in result.sessions.values() for c in s.calls]


def _vllm_trace(path, n: int = 12, sampled: int = 40):
    """A vLLM chat trace whose prompts extend each other (one id arena) and carry alternatives."""
    lines, prompt = [], [1, 2, 3]
    for i in range(n):
        ids = [1000 + i * sampled + k for k in range(sampled)]
        t = Turn(f"c{i}", list(prompt), ids, logprobs=[-0.25 - k / 100 for k in range(sampled)])
        t.messages = [{"role": "user", "content": f"question {j}"} for j in range(i + 1)]
        t.tools = [{"type": "function", "function": {"name": "search", "parameters": {}}}]
        lines.append(orjson.dumps(vllm_chat(t)))
        prompt = prompt + ids + [9] * 70
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


@pytest.fixture
def reopened(tmp_path):
    trace = _vllm_trace(tmp_path / "t.jsonl")
    folder = tmp_path / "cache"
    fresh = load_files([trace], folder=folder, workers=1)
    again = load_files([trace], folder=folder, workers=1)
    (entry,) = folder.iterdir()
    return trace, folder, entry, fresh, again


def test_a_reopen_equals_a_fresh_load_and_leaves_the_alternatives_in_the_entry(reopened):
    trace, _, entry, fresh, again = reopened
    assert entry.name.startswith(f"v{cache.FORMAT}-")
    assert sorted(p.name for p in entry.iterdir()) == sorted(cache_format.FILES)
    calls = _calls(again)
    assert all(c.top_k is not None and c.top_k.pending for c in calls)  # nothing read yet
    assert [c.top_k.rows for c in calls] == [c.top_k.rows for c in _calls(fresh)]
    assert_same_load(again, load_paths([trace]))  # reads every call's alternatives
    assert not any(c.top_k.pending or c.top_k.unavailable for c in calls)


def test_shared_prompts_stay_shared_and_the_estimate_counts_them_once(reopened):
    _, _, entry, fresh, again = reopened
    prompts = [c.prompt_ids for c in _calls(again)]
    bases = {id(p.base) for p in prompts if p is not None}
    assert len(bases) == 1  # every array is a view of the one buffer the entry was read into
    fresh_prompts = [c.prompt_ids for c in _calls(fresh)]
    assert sum(p is not None and not p.flags.writeable for p in fresh_prompts) >= len(prompts) - 1  # arena views
    assert [p is not None and p.flags.writeable for p in prompts] == [
        p is not None and p.flags.writeable for p in fresh_prompts
    ]
    total = sum(p.nbytes for p in prompts if p is not None)
    assert (entry / "arrays.bin").stat().st_size < total / 2  # the arena part written once
    # the server's byte bound counts what is held: alternatives left in the entry count once read
    assert estimate_bytes(again) < estimate_bytes(fresh)
    assert all(c.top_k is not None and c.top_k.ids.size for c in _calls(again))
    assert estimate_bytes(again) == estimate_bytes(fresh)
    # messages repeated by every call are one object, as in a fresh load
    first, last = _calls(again)[1], _calls(again)[-1]
    assert first.request_messages is not None and last.request_messages is not None
    assert first.request_messages[0] is last.request_messages[0]
    assert first.tools is last.tools


def test_alternatives_are_read_after_the_entry_is_removed(reopened):
    trace, _, entry, _, again = reopened
    shutil.rmtree(entry)  # evicted by another process after the reopen: the open descriptor reads on
    assert_same_load(again, load_paths([trace]))


@pytest.mark.parametrize("how", ["flip", "truncate"])
def test_an_entry_changed_after_the_reopen_gives_empty_alternatives_saying_why(reopened, how):
    _, _, entry, _, again = reopened
    top = entry / "top.bin"
    data = bytearray(top.read_bytes())
    if how == "flip":
        data[10] ^= 0xFF  # inside the first call's chunk
        with open(top, "r+b") as f:  # in place: the reopen's descriptor sees it
            f.write(data)
    else:
        with open(top, "r+b") as f:
            f.truncate(len(data) // 2)
    tops = [c.top_k for c in _calls(again)]
    assert all(t is not None for t in tops)
    broken = [t for t in tops if t is not None and t.unavailable is not None]
    assert broken, "a damaged chunk must be noticed"
    for t in broken:
        assert t.ids.shape == (t.rows, 0) and t.logprobs.shape == (t.rows, 0)
        assert "cache entry" in str(t.unavailable)
    if how == "flip":
        assert len(broken) == 1  # the other chunks still check out and read normally
        assert sum(t is not None and t.unavailable is None and t.ids.shape[1] == 2 for t in tops) == len(tops) - 1


def test_a_pickled_reopen_reads_its_alternatives_by_path(reopened):
    trace, _, _, _, again = reopened
    copy = pickle.loads(pickle.dumps(again))
    assert all(c.top_k is not None and c.top_k.pending for c in _calls(copy))
    assert_same_load(copy, load_paths([trace]))


def _strip_top(loaded: LoadResult) -> LoadResult:
    for call in _calls(loaded):
        call.top_k = None
    return loaded


@pytest.mark.parametrize("name", cache_format.FILES)
@pytest.mark.parametrize("damage", ["truncate", "garbage", "missing"])
def test_a_damaged_entry_is_ignored_with_a_note_and_rebuilt(tmp_path, caplog, name, damage):
    trace = _vllm_trace(tmp_path / "t.jsonl", n=5)
    folder = tmp_path / "cache"
    fresh = load_files([trace], folder=folder, workers=1)
    (entry,) = folder.iterdir()
    path = entry / name
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        path.write_bytes(b"\xff{" + data[2:])
    else:
        path.unlink()
    with caplog.at_level(logging.WARNING, logger="rollout_graph.cache"):
        if name == "top.bin" and damage == "garbage":
            # the alternatives are checked when read (per call): the reopen goes on without them
            again = cache.load(cache.key_for_files([trace]), folder)
            assert again is not None
            first = _calls(again)[0].top_k
            assert first is not None and first.ids.shape == (first.rows, 0)
            assert "checksum" in str(first.unavailable)
            assert_same_load(_strip_top(again), _strip_top(load_paths([trace])))
        else:
            assert cache.load(cache.key_for_files([trace]), folder) is None
    assert not entry.exists()
    assert "cache entry" in caplog.text and str(entry) in caplog.text
    assert_same_load(load_files([trace], folder=folder, workers=1), fresh)
    assert cache.load(cache.key_for_files([trace]), folder) is not None


@pytest.mark.parametrize("gone", ["arrays.bin", "values.jsonl", "calls.jsonl"])
def test_an_entry_replaced_while_it_is_read_is_read_again_not_removed(tmp_path, caplog, monkeypatch, gone):
    """Two writers of one key (a command's background write, a page's deferred one) and a reader:
    the reader that was part way through the old entry when the new one was swapped in reads the
    new one; it never takes the half-gone old entry for a corrupt one and removes the new."""
    trace = _vllm_trace(tmp_path / "t.jsonl", n=5)
    folder = tmp_path / "cache"
    fresh = load_files([trace], folder=folder, workers=1)
    key = cache.key_for_files([trace])
    (entry,) = folder.iterdir()
    real_decode, reads = cache_read.read_entry, []

    def decode_while_replaced(path):
        reads.append(path)
        if len(reads) == 1:  # the first read loses a file to the writer swapping its entry in
            old = path.with_name(".reading")
            path.rename(old)
            (old / gone).unlink()
            assert cache.store(key, fresh, folder)
            return real_decode(old)
        return real_decode(path)

    monkeypatch.setattr(cache, "read_entry", decode_while_replaced)
    with caplog.at_level(logging.WARNING, logger="rollout_graph.cache"):
        again = cache.load(key, folder)
    assert again is not None and len(reads) == 2
    assert_same_load(again, load_paths([trace]))
    assert "cache entry" not in caplog.text
    assert entry.is_dir() and sorted(p.name for p in entry.iterdir()) == sorted(cache_format.FILES)


def test_a_store_over_an_entry_leaves_one_whole_entry_and_nothing_aside(tmp_path):
    trace = _vllm_trace(tmp_path / "t.jsonl", n=4)
    folder = tmp_path / "cache"
    fresh = load_files([trace], folder=folder, workers=1)
    key = cache.key_for_files([trace])
    (entry,) = folder.iterdir()
    before = os.stat(entry).st_ino
    assert cache.store(key, fresh, folder)
    assert [p.name for p in folder.iterdir()] == [entry.name]  # no .writing- or .old- folder left
    assert os.stat(entry).st_ino != before  # renamed into place, not written in the old folder
    assert_same_load(cache.load(key, folder), load_paths([trace]))


def test_an_entry_of_the_previous_format_is_ignored(tmp_path):
    trace = _vllm_trace(tmp_path / "t.jsonl", n=3)
    folder = tmp_path / "cache"
    folder.mkdir()
    key = cache.key_for_files([trace])
    old = folder / f"v1-{key}"
    old.mkdir()
    (old / "meta.json").write_bytes(b'{"format": 1}')
    assert cache.load(key, folder) is None
    assert_same_load(load_files([trace], folder=folder, workers=1), load_paths([trace]))


# ------------------------------------------------------------------------------------------------
# The writer's shortcuts on odd arrays and values: what comes back equals what went in


_DTYPES = ["<i4", "<i8", "<u2", "<f4", "<f8", "<i2"]


@st.composite
def _odd_loads(draw):
    """Calls whose arrays are views of shared buffers (overlapping, nested, disjoint, empty),
    strided views, other dtypes and 2-D arrays, with messages and values JSON can carry."""
    buffers = [np.arange(draw(st.integers(0, 300)), dtype=np.int32) * 7 for _ in range(draw(st.integers(1, 3)))]
    for b in buffers:
        b.flags.writeable = draw(st.booleans())
    floats = st.floats(allow_nan=False, allow_infinity=False, width=32)

    def array():
        kind = draw(st.sampled_from(["view", "view", "own", "strided", "none", "empty"]))
        if kind == "view":
            b = draw(st.sampled_from(buffers))
            lo = draw(st.integers(0, len(b)))
            return b[lo : draw(st.integers(lo, len(b)))]
        if kind == "own":
            dtype = np.dtype(draw(st.sampled_from(_DTYPES)))
            arr = np.array(draw(st.lists(st.integers(0, 100), max_size=20)), dtype=dtype)
            arr.flags.writeable = draw(st.booleans())
            return arr
        if kind == "strided":
            b = draw(st.sampled_from(buffers))
            return b[:: draw(st.integers(2, 4))]
        return None if kind == "none" else np.empty(0, dtype=np.int32)

    shared = {"role": "system", "content": draw(st.text(max_size=8))}
    calls = []
    for n in range(draw(st.integers(1, 8))):
        call = Call(f"n{n}", "s", "mem", n + 1, draw(st.sampled_from(["vllm_chat", "trace_entry"])), array())
        sampled = array()
        if sampled is not None:
            call.sampled_ids = sampled
        call.sampled_logprobs = None if sampled is None else np.full(sampled.shape, draw(floats), dtype=np.float32)
        if draw(st.booleans()):
            rows, k = draw(st.integers(0, 6)), draw(st.integers(0, 3))
            texts = draw(st.one_of(st.none(), st.lists(st.text(max_size=3), min_size=rows * k, max_size=rows * k)))
            call.top_k = TopK(
                np.arange(rows * k, dtype=np.int64).reshape(rows, k), np.full((rows, k), -1.5, dtype=np.float32), texts
            )
        zero = draw(st.sampled_from([0.0, -0.0, 1, True, None, "0"]))
        call.request_messages = [shared, {"role": "user", "content": "x", "v": zero}, {"role": "user", "v": -0.0}]
        call.response_message = {"role": "assistant", "content": draw(st.text(max_size=10))}
        call.tools = draw(st.sampled_from([None, [], [{"name": "t"}]]))
        call.requested_params = {"temperature": draw(floats)}
        call.timing = draw(st.sampled_from([{}, {"ms": 1.5}]))
        call.usage = draw(st.sampled_from([None, {"prompt_tokens": 3}]))
        call.model = draw(st.sampled_from([None, "m", "é\u2028"]))
        call.issues = [Finding("warn", "odd", "détail", node_id=f"n{n}")] if draw(st.booleans()) else []
        calls.append(call)
    session = SessionInput("s", calls=calls, document=draw(st.sampled_from([None, {"nodes": [1, 2.5, "x"]}])))
    session.node_ids = {c.node_id for c in calls}
    return LoadResult({"s": session}, records=len(calls), loaded=len(calls), files=["mem"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(loaded=_odd_loads())
def test_odd_arrays_and_values_come_back_exactly(tmp_path_factory, loaded):
    assume(any(c.prompt_ids is not None and c.prompt_ids.base is not None for c in _calls(loaded)))
    folder = tmp_path_factory.mktemp("c")
    assert cache.store("k", loaded, folder)
    again = cache.load("k", folder)
    assert again is not None
    assert_same_load(again, loaded)
    for a, b in zip(_calls(again), _calls(loaded), strict=True):
        for name in ("prompt_ids", "sampled_ids", "sampled_logprobs"):
            x, y = getattr(a, name), getattr(b, name)
            if y is not None:
                assert x.flags.writeable == y.flags.writeable, name
        # -0.0 and 0.0 (and 1 and True) are equal in Python: the shared messages must not merge them
        for m, n in zip(a.request_messages or [], b.request_messages or [], strict=True):
            for key in n:
                assert type(m[key]) is type(n[key]) and repr(m[key]) == repr(n[key])


@given(nan_where=st.sampled_from(["timing", "message", "document", "params"]))
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_values_json_cannot_carry_leave_the_load_uncached(tmp_path_factory, nan_where):
    folder = tmp_path_factory.mktemp("c")
    call = Call("n0", "s", "mem", 1, "trace_entry", np.arange(5, dtype=np.int32))
    session = SessionInput("s", calls=[call])
    if nan_where == "timing":
        call.timing = {"ms": float("nan")}
    elif nan_where == "message":
        call.request_messages = [{"role": "user", "content": float("inf")}]
    elif nan_where == "document":
        session.document = {"x": [float("nan")]}
    else:
        call.requested_params = {"t": float("-inf")}
    loaded = LoadResult({"s": session}, records=1, loaded=1, files=["mem"])
    assert not cache.store("k", loaded, folder)
    assert cache.load("k", folder) is None


def test_alternatives_are_read_without_preadv_too(reopened, monkeypatch):
    trace, _, _, _, again = reopened
    monkeypatch.delattr(os, "preadv")  # as on Windows: seek and read under a lock
    assert_same_load(again, load_paths([trace]))
