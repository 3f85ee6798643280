"""The cache writer's shortcuts (graph/ingest/load/cache.py) write exactly what the checked path writes:
a call's strings, line and None values go into its row as they are (no per-value dump and check),
a finding's too, and the queued pieces of arrays.bin and top.bin are joined a batch at a time
(each piece of a MB or more written as it is); odd values (a "null" in a name, a lone surrogate,
a huge int, a bool, a str subclass, NaN) give the same row, or the same refusal."""

from __future__ import annotations

import io

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout_graph.core.records import Call, Finding
from rollout_graph.ingest.load import cache_format, cache_write


class _Name(str):
    pass


def _reference_row(call: Call, eager, tops, values) -> bytes:
    """The row as the writer built it before the shortcut: every value through ``_json``."""
    row: list = [cache_write._json(getattr(call, name)) for name in cache_format.TEXT_FIELDS]
    row.append(eager.describe(call.prompt_ids))
    row.append(eager.describe(call.sampled_ids))
    row.append(eager.describe(call.sampled_logprobs))
    row.append(tops.describe(call.top_k))
    row.append(None if call.request_messages is None else [values.index(m) for m in call.request_messages])
    row.append(None if call.tools is None else values.index(call.tools))
    row.extend(cache_write._json(getattr(call, name)) for name in cache_format.JSON_FIELDS)
    row.append(
        [
            [
                cache_write._json(f.level),
                cache_write._json(f.code),
                cache_write._json(f.detail),
                cache_write._json(f.node_id),
                cache_write._json(f.leaf_id),
            ]
            for f in call.issues
        ]
    )
    try:
        return orjson.dumps(row)
    except TypeError as exc:
        raise cache_format.NotCacheable(str(exc)) from None


class _Sink:
    def __init__(self) -> None:
        self.file = io.BytesIO()

    def write(self, data) -> None:
        self.file.write(data)


def _written(build, call: Call):
    calls = [call]
    eager, tops, values = cache_write._Eager(calls), cache_write._Top(), cache_write._Values(_Sink())  # type: ignore[arg-type]
    try:
        return build(call, eager, tops, values)
    except cache_format.NotCacheable:
        return "not cacheable"


ODD = st.one_of(
    st.none(),
    st.text(max_size=8),
    st.sampled_from(["null", "a null", "\ud800", "NaN", ""]),
    st.builds(_Name, st.text(max_size=4)),
    st.integers(-(2**70), 2**70),
    st.booleans(),
    st.floats(allow_nan=True, allow_infinity=True),
)


@settings(max_examples=300, deadline=None)
@given(ODD, ODD, ODD, ODD, st.lists(st.tuples(ODD, ODD, ODD, ODD, ODD), max_size=3))
def test_a_row_is_what_the_checked_path_writes(node_id, model, finish, line, findings):
    call = Call(node_id, "s", "trace.jsonl", line, "vllm_chat", np.arange(3, dtype=np.int32))
    call.model, call.finish_reason = model, finish
    call.issues = [Finding(*f) for f in findings]
    new = _written(cache_write._row, call)
    old = _written(_reference_row, call)
    assert new == old
    if new != "not cacheable":
        assert orjson.loads(new)[0] == node_id or type(node_id) is float  # NaN is refused, inf too


@pytest.mark.parametrize(
    "sizes", [[0, 3, 5], [cache_format.CHUNK + 7], [10, cache_format.CHUNK, 4, 2 * cache_format.CHUNK, 1], []]
)
def test_the_pieces_are_written_in_order_whatever_their_sizes(tmp_path, sizes):
    rng = np.random.default_rng(7)
    pieces = [memoryview(rng.integers(0, 256, n, dtype=np.uint8)) if k % 2 else bytes(n) for k, n in enumerate(sizes)]
    sink = cache_write._Checked(tmp_path / "out.bin")
    cache_write._flush(pieces, sink)
    sink.file.close()
    data = b"".join(bytes(p) for p in pieces)
    assert (tmp_path / "out.bin").read_bytes() == data
    import zlib

    assert sink.crc == zlib.crc32(data)
