"""Memory shortcuts must give exactly what the plain path gives: prompt ids as views of the id
arena (graph/ingest/shortcuts/id_arrays.py), roots grouped without copying their prompts
(graph/core/topology.py), and repeated messages and tool lists shared
(rollout_graph.core.messages.share_repeats)."""

from __future__ import annotations

import json
import pickle
import random

import numpy as np
import orjson
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rollout_graph.core.messages import share_repeats
from rollout_graph.core.records import Call
from rollout_graph.core.topology import build_topology, sibling_groups
from rollout_graph.ingest.files.sources import Source
from rollout_graph.ingest.load.calls import load_sources
from rollout_graph.ingest.shortcuts import id_arrays
from rollout_graph.ingest.shortcuts.id_arrays import IdArrayCutter
from rollout_graph.ingest.values.line import cut_line
from rollout_graph.ingest.values.read import read_values
from rollout_graph.pipeline import analyse
from rollout_graph.reports.contract import inspect_json
from tests.support.builders import Turn, agent_records, assert_same_load, examples, vllm_chat


def _jsonl(records: list[dict], style: str = "compact") -> bytes:
    separators = (",", ":") if style == "compact" else (", ", ": ")
    return b"".join(json.dumps(r, separators=separators).encode() + b"\n" for r in records)


def _load(data: bytes, monkeypatch: pytest.MonkeyPatch, *, fast: bool, arena_ids: int = 2048):
    """A load of ``data``: through the arena (small arenas, so many are started), or with the
    byte-level cut turned off (every id array parsed by the JSON parser and validated)."""
    with monkeypatch.context() as m:
        m.setattr(id_arrays, "ARENA_IDS", arena_ids)
        if not fast:
            m.setattr(IdArrayCutter, "_ids", lambda self, text: None)
        return load_sources([Source.from_bytes("trace.jsonl", data)])


def _printed(loaded) -> bytes:
    rollouts = [analyse(s) for s in loaded.sessions.values()]
    return orjson.dumps(inspect_json(loaded, rollouts, with_tokens=False), option=orjson.OPT_SERIALIZE_NUMPY)


def _odd_trace(seed: int) -> list[dict]:
    """Agent chains with retries and compactions, shuffled in small blocks (a parent often read
    after its children), forks, prompts with ids beyond int32, with a negative id, empty, short."""
    rng = random.Random(seed)
    records = agent_records(240, session="a", chain=60, retry_every=7)
    for i in range(0, len(records), 5):  # children before parents, siblings far apart
        block = records[i : i + 5]
        rng.shuffle(block)
        records[i : i + 5] = block
    fork_base = records[30]["response"]["prompt_token_ids"]
    extra = [
        vllm_chat(Turn("fork1", fork_base + [7, 8, 9], [1, 2], session="a")),
        vllm_chat(Turn("fork2", fork_base + [7, 8, 10], [1, 2], session="a")),
        vllm_chat(Turn("fork3", fork_base + [7, 8, 9, 11], [3], session="a")),
        vllm_chat(Turn("big", list(range(100, 200)) + [2**40], [5], session="b")),
        vllm_chat(Turn("big2", list(range(100, 200)) + [2**40, 6, 7], [5], session="b")),
        vllm_chat(Turn("neg", list(range(100, 200)) + [-1], [5], session="b")),
        vllm_chat(Turn("empty", [], [5], session="b")),
        vllm_chat(Turn("short", [1, 2, 3], [5], session="b")),
        vllm_chat(Turn("huge", list(range(5000)), [5], session="c")),  # larger than an arena
        vllm_chat(Turn("huge2", list(range(5000)) + [1], [5], session="c")),
        vllm_chat(Turn("huge0", list(range(4000)), [5], session="c")),
    ]
    for k, record in enumerate(extra):
        records.insert(rng.randrange(len(records) + 1) if k < 3 else len(records), record)
    return records


@pytest.mark.parametrize("style", ["compact", "spaced"])
@pytest.mark.parametrize("seed", [0, 1])
def test_arena_load_equals_plain_load(monkeypatch, style, seed):
    data = _jsonl(_odd_trace(seed), style)
    fast = _load(data, monkeypatch, fast=True)
    plain = _load(data, monkeypatch, fast=False)
    assert_same_load(fast, plain)
    assert _printed(fast) == _printed(plain)
    calls = [c for s in fast.sessions.values() for c in s.calls]
    viewed = [c for c in calls if c.prompt_ids is not None and c.prompt_ids.base is not None]
    assert len(viewed) > 200, "the arena was not used"
    assert len({id(c.prompt_ids.base) for c in viewed}) > 3, "small arenas: several were started"
    big = next(c for c in calls if c.node_id == "big2")
    assert big.prompt_ids.dtype == np.int64 and big.prompt_ids[-3] == 2**40


def test_arena_shares_memory_with_the_parent_prompt(monkeypatch):
    records = agent_records(60, session="a", chain=60, retry_every=0)
    records[20], records[21] = records[21], records[20]  # a parent read after its child (both > 64 ids)
    loaded = _load(_jsonl(records), monkeypatch, fast=True, arena_ids=1 << 16)
    calls = loaded.sessions["a"].calls
    by_id = {c.node_id: c for c in calls}
    later, earlier = by_id[records[20]["call_id"]], by_id[records[21]["call_id"]]
    assert later.n_prompt > earlier.n_prompt > 64
    assert np.shares_memory(later.prompt_ids, earlier.prompt_ids)  # the parent is a view of its child
    # every prompt after the first is its predecessor's ids plus a tail, in the same memory
    assert all(np.shares_memory(calls[i].prompt_ids, calls[i + 1].prompt_ids) for i in range(22, 59))


def test_arena_views_are_read_only_and_pickle_as_their_own_ids(monkeypatch):
    loaded = _load(_jsonl(agent_records(40, session="a")), monkeypatch, fast=True, arena_ids=1 << 16)
    prompt = loaded.sessions["a"].calls[30].prompt_ids
    assert prompt.base is not None and prompt.base.nbytes > 4 * prompt.nbytes
    assert not prompt.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        prompt[0] = 1
    blob = pickle.dumps(prompt)  # the parallel reader's workers and upload workers send calls so
    assert len(blob) < prompt.nbytes + 512  # the view's ids, never the whole arena
    assert np.array_equal(pickle.loads(blob), prompt)


@pytest.mark.parametrize("body", [b"[1, ,2]", b"[ ,1]", b"[1,\t,2]", b"[1 2,3]", b"[1,2,]", b"[,1]"])
def test_an_array_that_is_not_json_is_refused_like_the_json_parser_refuses_it(body):
    line = b'{"response":{"prompt_token_ids":' + body + b',"choices":[]}}\n'
    (value,) = read_values(Source.from_bytes("t.jsonl", line))
    assert value.error is not None and "not JSON" in value.error
    assert "unmatched data" not in value.error  # the JSON parser's reason, not numpy's


_ops = st.lists(
    st.tuples(
        st.sampled_from(["extend", "extend", "extend", "repeat", "prefix", "root", "wide", "odd"]),
        st.integers(0, 40),
        st.lists(st.integers(0, 2**31 - 1), min_size=0, max_size=90),
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=examples(300), deadline=None)
@given(_ops, st.sampled_from([", ", ","]), st.sampled_from([256, 1024, 1 << 20]))
def test_every_cut_array_keeps_its_ids_whatever_comes_after(ops, sep, arena_ids):
    """Prompts that extend a recent one, repeat an older one, are a prefix of a recent one (a
    parent after its child), start over, hold ids beyond int32 or values the cut refuses: each
    array handed out equals what JSON says, and still does after every later write."""
    cutter = IdArrayCutter(arena_ids=arena_ids)
    made: list[list[int]] = []
    got: list[tuple[list[int], np.ndarray]] = []
    for move, pick, ids in ops:
        earlier = made[-1 - pick % len(made)] if made else []
        if move == "extend":
            prompt = earlier + ids
        elif move == "repeat":
            prompt = list(earlier)
        elif move == "prefix":
            prompt = earlier[: len(earlier) - pick]
        elif move == "wide":
            prompt = earlier + ids + [2**33]
        elif move == "odd":
            prompt = earlier + [-1] + ids
        else:
            prompt = list(ids)
        made.append([v for v in prompt if 0 <= v < 2**31])
        line = b'{"prompt_token_ids":[' + sep.join(map(str, prompt)).encode() + b"]}"
        cut, arrays = cut_line(line, cutter)
        if arrays:
            (arr,) = arrays.values()
            got.append((prompt, arr))
        else:
            assert cut == line and any(v < 0 for v in prompt)  # only refused values stay in the line
    assume(len(got) > 1)
    for prompt, arr in got:
        assert arr.tolist() == prompt
        if max(prompt, default=0) >= 2**31:
            assert arr.dtype == np.int64
        elif len(prompt) > 64:
            assert arr.dtype == np.int32 and not arr.flags.writeable  # an arena view


def _old_root_groups(calls: list[Call], roots: list[int]) -> list[list[int]]:
    by_prompt: dict[bytes, list[int]] = {}
    for r in roots:
        prompt = calls[r].prompt_ids
        if prompt is not None and prompt.shape[0]:
            by_prompt.setdefault(prompt.astype(np.int64).tobytes(), []).append(r)
    return [g for g in by_prompt.values() if len(g) > 1]


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.lists(st.integers(0, 3), max_size=40)),
            st.sampled_from([np.int32, np.int64]),
        ),
        min_size=1,
        max_size=20,
    )
)
def test_roots_with_the_same_prompt_are_grouped_as_by_their_bytes(prompts):
    """Identical root prompts (whatever their dtype; long ones differing only in the middle,
    where the fingerprint does not look) are one group, as keying by their bytes made them."""
    calls = []
    for i, (ids, dtype) in enumerate(prompts):
        if ids is not None and len(ids) > 33:
            ids[len(ids) // 2 - 12] = 3  # outside the sampled middle: same print, other prompt
        calls.append(
            Call(f"c{i}", "s", "m", i + 1, "t", prompt_ids=None if ids is None else np.array(ids, dtype=dtype))
        )
    roots = list(range(len(calls)))
    assert sibling_groups(calls, [[] for _ in calls], roots, []) == _old_root_groups(calls, roots)
    build_topology(calls, [None] * len(calls))


def _call(messages, tools=None, response=None) -> Call:
    return Call("c", "s", "m", 1, "t", request_messages=messages, tools=tools, response_message=response)


def test_repeated_messages_and_tools_are_one_object_and_lookalikes_are_not():
    shared: dict = {}
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
    first = _call(
        [{"role": "system", "content": "s" * 50}, {"role": "user", "content": "hi", "weight": 1}],
        tools=tools,
        response={"role": "assistant", "content": "x" * 30},
    )
    share_repeats(first, shared)
    second = _call(
        [
            {"role": "system", "content": "s" * 50},
            {"role": "user", "content": "hi", "weight": True},  # equal to 1 in Python: not shared
            {"content": "s" * 50, "role": "system"},  # other key order: not the same dict
            {"role": "assistant", "content": "x" * 30},
        ],
        tools=json.loads(json.dumps(tools)),
    )
    share_repeats(second, shared)
    a, b = first.request_messages, second.request_messages
    assert b[0] is a[0]
    assert b[1] is not a[1] and b[1]["weight"] is True and a[1]["weight"] == 1 and type(a[1]["weight"]) is int
    assert b[2] is not a[0] and list(b[2]) == ["content", "role"] and b[2]["content"] is a[0]["content"]
    assert b[3]["content"] is first.response_message["content"]
    assert second.tools is first.tools
    nan = _call([], tools=[{"default": float("nan")}])
    none = _call([], tools=[{"default": None}])
    share_repeats(nan, shared)
    share_repeats(none, shared)
    assert none.tools is not nan.tools and none.tools[0]["default"] is None
    wide = _call([], tools=[{"default": 2**70}])
    share_repeats(wide, shared)
    assert wide.tools[0]["default"] == 2**70


def test_the_app_cache_counts_shared_prompt_ids_once(monkeypatch):
    """The app's byte-bounded cache sizes a load by what it holds: prompts sharing one arena
    count its written part once, so an arena-backed load is counted far below its plain twin."""
    from rollout_graph.ui.state.workspace_cache import estimate_bytes

    data = _jsonl(agent_records(200, session="a", chain=100, retry_every=0))
    fast = _load(data, monkeypatch, fast=True, arena_ids=1 << 16)
    plain = _load(data, monkeypatch, fast=False)
    prompts = [c.prompt_ids for c in fast.sessions["a"].calls]
    arena = id_arrays.held_bytes(prompts)
    assert arena < sum(p.nbytes for p in prompts) / 5
    assert arena >= max(p.nbytes for p in prompts)  # never less than the longest prompt
    plain_prompts = [c.prompt_ids for c in plain.sessions["a"].calls]
    assert id_arrays.held_bytes(plain_prompts) == sum(p.nbytes for p in plain_prompts)
    assert estimate_bytes(fast) < estimate_bytes(plain) - (sum(p.nbytes for p in prompts) - arena)


def test_a_small_trace_maps_a_small_arena_and_a_refused_mapping_skips_lines(monkeypatch):
    data = _jsonl(agent_records(30, session="a"))
    loaded = load_sources([Source.from_bytes("trace.jsonl", data)])
    prompt = loaded.sessions["a"].calls[-1].prompt_ids
    assert prompt.base is not None and prompt.base.nbytes <= 1 << 20

    def refused(*args, **kwargs):
        raise OSError(12, "Cannot allocate memory")

    monkeypatch.setattr(id_arrays.mmap, "mmap", refused)
    loaded = load_sources([Source.from_bytes("trace.jsonl", data)])
    # the lines whose ids needed an arena are skipped, each naming its line and why; nothing raises
    assert loaded.loaded < 30 and loaded.records == 30
    assert loaded.skipped and all("MemoryError" in s.reason and s.line > 0 for s in loaded.skipped)
