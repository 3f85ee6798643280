"""TraceTextDecoder.pieces looks long runs of ids up in a table of pieces (graph/analysis/decode.py):
the same strings, in the same order, as the id-by-id lookup, whatever the ids, their type and
their order of arrival (the table grows when a larger id comes)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout_graph.analysis import decode
from rollout_graph.analysis.decode import TraceTextDecoder


def one_by_one(known: dict[int, str], ids) -> list[str]:
    return [known.get(i, f"<{i}>") for i in np.asarray(ids).tolist()]


KNOWN = {0: "a", 5: " the", 70: "\u00e9", 1000: "", decode.TABLE_IDS - 1: "last", decode.TABLE_IDS: "beyond"}

runs = st.lists(
    st.lists(
        st.integers(0, 2000) | st.sampled_from([decode.TABLE_IDS - 1, decode.TABLE_IDS, 2**31 - 1, -1]),
        max_size=3 * decode.TABLE_MIN_RUN,
    ),
    min_size=1,
    max_size=4,
)


@settings(deadline=None, max_examples=200)
@given(runs, st.sampled_from([np.int32, np.int64, np.uint32, "list"]))
def test_pieces_are_the_id_by_id_lookup(arrays, dtype):
    decoder = TraceTextDecoder(dict(KNOWN))
    for ids in arrays:
        if dtype != "list":
            if dtype == np.uint32 and any(i < 0 for i in ids):
                continue
            ids = np.array(ids, dtype=dtype)
        got = decoder.pieces(ids)
        assert got == one_by_one(KNOWN, ids)
        assert all(type(piece) is str for piece in got)
        text, lengths = decoder.joined_pieces(ids)
        assert text == "".join(got)
        assert lengths.dtype == np.int64 and lengths.tolist() == [len(piece) for piece in got]


def test_long_runs_take_the_table_and_it_grows():
    decoder = TraceTextDecoder(dict(KNOWN))
    small = np.arange(decode.TABLE_MIN_RUN, dtype=np.int32)
    assert decoder.pieces(small) == one_by_one(KNOWN, small)
    assert decoder._table is not None and decoder._table[0].shape[0] >= decode.TABLE_MIN_RUN
    first = decoder._table[0]
    large = np.arange(5000, 5000 + decode.TABLE_MIN_RUN, dtype=np.int64)
    assert decoder.pieces(large) == one_by_one(KNOWN, large)
    texts, lengths = decoder._table
    assert texts.shape[0] > 5000 + decode.TABLE_MIN_RUN - 1 and texts.shape == lengths.shape
    assert all(texts[i] is first[i] for i in range(first.shape[0]))  # grown, not made again
    assert lengths.tolist() == [len(t) for t in texts.tolist()]
    beyond = np.full(decode.TABLE_MIN_RUN, decode.TABLE_IDS, dtype=np.int64)  # past the table: one by one
    assert decoder.pieces(beyond) == ["beyond"] * decode.TABLE_MIN_RUN
    assert decoder.joined_pieces(beyond)[0] == "beyond" * decode.TABLE_MIN_RUN
    assert decoder._table[0].shape[0] <= decode.TABLE_IDS


def test_from_calls_decoder_builds_its_texts_first():
    decoder = TraceTextDecoder.from_calls([])
    ids = np.arange(decode.TABLE_MIN_RUN)
    assert decoder.pieces(ids) == [f"<{i}>" for i in range(decode.TABLE_MIN_RUN)]
