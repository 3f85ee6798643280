"""Parquet read with a bound before it decodes (graph/ingest/files/parquet.py; issue 41 items 2-4).

Bombs are built here with pyarrow: a few hundred bytes whose footer declares a megabyte and whose
one dictionary string, repeated by its indices, decodes to gigabytes; the same string repeated
inside one row's list; a footer too large; more rows than the limit. Each is refused as a trace, a
signals file and an audit table, with a reason naming the limit and the flag that raises it, and
a capped process shows the refusal allocates no gigabytes. A legitimate file reads row group by
row group to what ``pyarrow.parquet.read_table`` gives, and a Parquet trace reads under an address
space far below the 4 GB the reader used to reserve.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout_graph.ingest.files.parquet import decoded_bytes, open_parquet, read_parquet_bounded
from rollout_graph.ingest.files.sources import Source
from rollout_graph.ingest.limits import PUBLIC, LimitExceeded, Limits
from rollout_graph.ingest.values.binary import values
from rollout_graph.signals.reading import SignalsError, read_signals_bytes
from tests.support.builders import examples

ROOT = Path(__file__).resolve().parents[2]
MB = 1 << 20


def _repeated(text: str, times: int) -> pa.DictionaryArray:
    """``text`` ``times`` times, as a dictionary of one entry and its indices (never expanded here)."""
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(times, dtype=np.int32)), pa.array([text]))


def _bytes(table: pa.Table, store_schema: bool = False, **options) -> bytes:
    out = io.BytesIO()
    pq.write_table(table, out, compression="zstd", store_schema=store_schema, **options)
    return out.getvalue()


def dictionary_bomb(rows: int = 2000, store_schema: bool = False) -> bytes:
    """Signals-shaped rows whose keys are one 1 MB string: ``rows`` MB per column once decoded."""
    key = _repeated("s" * MB, rows)
    return _bytes(pa.table({"session_id": key, "leaf_id": key}), store_schema)


def list_bomb(copies: int = 2000) -> bytes:
    """One row whose list column holds one 1 MB string ``copies`` times: the row count says nothing."""
    texts = pa.ListArray.from_arrays(pa.array([0, copies], type=pa.int32()), _repeated("t" * MB, copies))
    return _bytes(pa.table({"session_id": ["s1"], "leaf_id": ["n1"], "texts": texts}))


BOMBS = {
    "dictionary": dictionary_bomb(),
    "dictionary, arrow schema stored": dictionary_bomb(store_schema=True),
    "list": list_bomb(),
}


def test_the_bombs_are_small_and_their_footers_declare_little():
    for name, data in BOMBS.items():
        meta = pq.ParquetFile(io.BytesIO(data)).metadata
        declared = sum(
            meta.row_group(g).column(c).total_uncompressed_size
            for g in range(meta.num_row_groups)
            for c in range(meta.num_columns)
        )
        assert len(data) < 2048 and declared < 4 * MB, name  # decoding, they make 2 GB or more


def _named(message: str) -> bool:
    return "max_parquet_bytes" in message and "--max-parquet-bytes" in message


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_a_bomb_is_refused_as_an_audit_table_naming_the_limit_and_its_flag(name):
    with pytest.raises(LimitExceeded) as refused:
        read_parquet_bounded("audit.parquet", BOMBS[name], PUBLIC)
    assert _named(str(refused.value)) and str(refused.value).startswith("audit.parquet: ")


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_a_bomb_is_refused_as_a_trace_and_as_signals(name):
    got = list(values(Source.from_bytes("t.parquet", BOMBS[name]), PUBLIC))
    assert len(got) == 1 and got[0].error is not None and got[0].error.startswith("over a limit: ")
    assert _named(got[0].error)
    with pytest.raises(SignalsError) as refused:
        read_signals_bytes("bomb.signals.parquet", BOMBS[name], PUBLIC)
    assert _named(str(refused.value)) and "over a limit" in str(refused.value)


# A process whose address space is capped far below what a bomb decodes to: it reads a bomb as an
# audit table, as signals and as a trace through the command, and reports what pyarrow's memory
# pool and the process held at their peak.
_CAPPED = """
import json, resource, sys
cap = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
import pyarrow as pa
from rollout_graph.ingest.files.parquet import read_parquet_bounded
from rollout_graph.ingest.limits import PUBLIC
from rollout_graph.signals.reading import SignalsError, read_signals_bytes
from rollout_graph.cli import main
data = open(sys.argv[2], "rb").read()
out = {}
try:
    read_parquet_bounded("audit.parquet", data, PUBLIC)
except ValueError as exc:
    out["audit"] = str(exc)
try:
    read_signals_bytes("bomb.signals.parquet", data, PUBLIC)
except SignalsError as exc:
    out["signals"] = str(exc)
out["inspect"] = main(["inspect", "--json", "--no-cache", "--max-parquet-bytes", "256M", sys.argv[2]])
out["pool_peak"] = pa.default_memory_pool().max_memory()
out["rss_peak"] = int([l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]) * 1024
print("REPORT " + json.dumps(out))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc")
@pytest.mark.parametrize("name", sorted(BOMBS))
def test_a_bomb_is_refused_without_allocating_gigabytes(tmp_path, name):
    path = tmp_path / "bomb.parquet"
    path.write_bytes(BOMBS[name])
    done = subprocess.run(
        [sys.executable, "-c", _CAPPED, str(1 << 30), str(path)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("REPORT "))[7:])
    assert _named(report["audit"]) and _named(report["signals"]) and report["inspect"] == 2  # refused: nothing loads
    skipped = json.loads(done.stdout.split("REPORT ")[0])["load"]["skipped"]
    assert len(skipped) == 1 and _named(skipped[0]["reason"])
    assert report["pool_peak"] < 64 * MB, report  # a decoded 2 GB never existed, not even for a moment
    assert report["rss_peak"] < 512 * MB, report


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS")
def test_a_parquet_trace_reads_under_an_address_space_far_below_4_gb():
    """The reader once asked for ``max_file_bytes + 1`` (4 GB) before reading a byte: no Parquet
    trace, not even TRL's two rows, could be read under a 4 GB cap."""
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
        "from rollout_graph.cli import main\n"
        "sys.exit(main(['inspect', '--json', '--no-cache', sys.argv[1]]))\n"
    )
    folder = ROOT / "tests" / "fixtures" / "frameworks" / "trl" / "completions"
    done = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    load = json.loads(done.stdout)["load"]
    assert load["loaded"] == load["records"] == 4 and load["skipped"] == []


def test_rows_over_the_limit_are_refused_from_the_footer():
    data = _bytes(pa.table({"n": pa.array(np.arange(5000))}), row_group_size=1000)
    with pytest.raises(LimitExceeded, match=r"5,000 rows \(limit max_parquet_rows 4,000, --max-parquet-rows"):
        open_parquet(data, Limits(max_parquet_rows=4000))
    got = list(values(Source.from_bytes("t.parquet", data), Limits(max_parquet_rows=4000)))
    assert len(got) == 1 and "max_parquet_rows" in (got[0].error or "")


def test_a_footer_too_large_for_the_limit_is_refused_before_pyarrow_reads_it():
    table = pa.table({f"column_{i}": [i] for i in range(200)})
    data = _bytes(table)
    footer = int.from_bytes(data[-8:-4], "little")
    limits = Limits(max_parquet_bytes=8 * footer)  # the footer may take 1/16 of it
    with pytest.raises(LimitExceeded, match="footer holds"):
        open_parquet(data, limits)
    assert open_parquet(data, Limits()).names[:2] == ["column_0", "column_1"]


def test_a_file_over_max_file_bytes_is_refused_naming_its_flag():
    data = _bytes(pa.table({"n": [1, 2, 3]}))
    got = list(values(Source.from_bytes("t.parquet", data), Limits(max_file_bytes=len(data) - 1)))
    assert len(got) == 1 and "--max-file-bytes" in (got[0].error or "")


def test_a_corrupt_file_is_named_as_such():
    got = list(values(Source.from_bytes("t.parquet", b"PAR1" + b"\x00" * 64 + b"PAR1"), Limits()))
    assert len(got) == 1 and (got[0].error or "").startswith("not a readable Parquet file: ")


_ROWS = st.lists(
    st.fixed_dictionaries(
        {
            "session_id": st.sampled_from(["a", "b", "c" * 40]),
            "n": st.integers(-(2**40), 2**40),
            "texts": st.lists(st.sampled_from(["x", "yy", "", "ü"]), max_size=5),
            "maybe": st.one_of(st.none(), st.text(max_size=6)),
            "inner": st.fixed_dictionaries({"k": st.sampled_from(["p", "q"]), "v": st.floats(allow_nan=False)}),
        }
    ),
    min_size=0,
    max_size=40,
)


@settings(max_examples=examples(60), deadline=None)
@given(_ROWS, st.sampled_from([1, 3, 64]), st.booleans(), st.booleans())
def test_a_legitimate_file_reads_to_what_read_table_gives(rows, group, dictionary, store_schema):
    table = pa.Table.from_pylist(rows) if rows else pa.table({"session_id": pa.array([], pa.string())})
    data = _bytes(table, store_schema, row_group_size=group, use_dictionary=dictionary)
    want = pq.read_table(io.BytesIO(data))
    got = read_parquet_bounded("t.parquet", data, Limits())
    assert got.schema == want.schema and got.to_pylist() == want.to_pylist()
    lines = list(values(Source.from_bytes("t.parquet", data), Limits()))
    assert [v.line for v in lines] == list(range(1, len(rows) + 1))
    assert all(v.error is None for v in lines)


@settings(max_examples=examples(100), deadline=None)
@given(
    st.lists(st.text(max_size=30), min_size=1, max_size=8),
    st.lists(st.integers(0, 7), max_size=50),
    st.booleans(),
)
def test_what_a_dictionary_decodes_to_is_counted_without_decoding_it(words, picks, nested):
    """decoded_bytes counts each repeat of a string: at least the bytes the expanded strings hold."""
    picks = [p % len(words) for p in picks]
    array = pa.DictionaryArray.from_arrays(pa.array(picks, type=pa.int32()), pa.array(words))
    expanded = array.dictionary_decode()
    text_bytes = pc.sum(pc.binary_length(expanded)).as_py() or 0
    if nested:
        offsets = pa.array([0, len(picks) // 2, len(picks)], type=pa.int32())
        array, expanded = pa.ListArray.from_arrays(offsets, array), pa.ListArray.from_arrays(offsets, expanded)
    assert decoded_bytes(array) >= text_bytes
    assert decoded_bytes(array) <= text_bytes + 16 * (len(picks) + 3)  # offsets, not a dictionary a row
