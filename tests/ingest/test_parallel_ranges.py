"""split_ranges (graph/ingest/load/pool.py) cuts a plain JSONL file for the process pool with the
same few positional reads as the two-part read's split, never a memory map: its ranges must be
exactly those of the rules it states, on any file (blank runs, over-long lines, broken lines,
a last line without its newline), and it must work with memory maps unavailable."""

from __future__ import annotations

import mmap

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rollout_graph.ingest.load import file_probes, pool

GOOD = b'{"a": 1}'


def _expected(data: bytes, chunk: int, max_line: int | None) -> list[tuple[int, int, int]]:
    """The rules of split_ranges restated over the file's bytes (blank: nothing but whitespace,
    bytes.strip(); a range starts at a non-blank line that parses alone or is over the limit)."""
    size = len(data)
    whole = [(0, -1, 1)]
    if size <= chunk or data[:4].startswith((b"\x1f\x8b", b"\x28\xb5\x2f\xfd")):
        return whole
    lines = []  # (start, bytes without the newline)
    at = 0
    while at < size:
        end = data.find(b"\n", at)
        end = size if end < 0 else end
        lines.append((at, data[at:end]))
        at = end + 1

    def too_long(text: bytes) -> bool:
        return max_line is not None and len(text) > max_line

    def alone(text: bytes) -> bool:
        return too_long(text) or file_probes.standalone(text)

    first = next((text for _, text in lines if text.strip()), None)
    if first is None or too_long(first) or not file_probes.standalone(first):
        return whole
    starts = [0]
    target = chunk
    while target < size:
        cut = next((s for s, text in lines if s > target and text.strip() and alone(text)), None)
        if cut is None:
            break
        starts.append(cut)
        target = cut + chunk
    ends = starts[1:] + [size]
    return [(s, e, data[:s].count(b"\n") + 1) for s, e in zip(starts, ends, strict=True)]


LINE = st.one_of(
    st.just(GOOD),
    st.just(b'{"b": [1, 2, 3], "c": "x"}'),
    st.just(b""),
    st.just(b"   \t"),
    st.just(b"\x0b\x0c"),  # whitespace to bytes.strip()
    st.just(b'{"broken'),
    st.just(b"}"),
    st.just(b" " * 300),  # a blank line over a small line limit
    st.binary(max_size=40),
    st.builds(lambda n: b'{"long": "' + b"y" * n + b'"}', st.integers(50, 400)),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lines=st.lists(LINE, min_size=1, max_size=40),
    newline_at_end=st.booleans(),
    chunk=st.integers(1, 400),
    max_line=st.one_of(st.none(), st.integers(10, 200)),
)
def test_ranges_follow_the_rules_on_any_file(tmp_path_factory, monkeypatch, lines, newline_at_end, chunk, max_line):
    path = tmp_path_factory.mktemp("ranges") / "t.jsonl"
    data = b"\n".join(lines) + (b"\n" if newline_at_end else b"")
    path.write_bytes(data)
    monkeypatch.setattr(file_probes, "PROBE_BYTES", 7)  # lines and blank runs across many probes
    monkeypatch.setattr(file_probes, "COUNT_WINDOW", 5)
    monkeypatch.setattr(mmap, "mmap", None)  # never a memory map (docs/limits.md)
    assert pool.split_ranges(path, chunk=chunk, max_line_bytes=max_line) == _expected(data, chunk, max_line)


def test_a_compressed_file_and_a_document_are_one_range(tmp_path):
    gz = tmp_path / "t.jsonl"
    gz.write_bytes(b"\x1f\x8b" + (GOOD + b"\n") * 100)
    assert pool.split_ranges(gz, chunk=50) == [(0, -1, 1)]
    doc = tmp_path / "d.json"
    doc.write_bytes(b"[\n" + (GOOD + b",\n") * 100 + GOOD + b"\n]\n")
    assert pool.split_ranges(doc, chunk=50) == [(0, -1, 1)]
    ranges = pool.split_ranges(tmp_path / "d.json", chunk=10**9)
    assert ranges == [(0, -1, 1)]


def test_newlines_counts_every_range(tmp_path):
    path = tmp_path / "t.jsonl"
    data = b"a\n\nbb\n" * 1000 + b"tail"
    path.write_bytes(data)
    with open(path, "rb") as f:
        for start, end in ((0, len(data)), (3, 4000), (5999, 6000), (10, 10), (0, len(data) + 50)):
            assert file_probes.newlines(f.fileno(), start, end) == data[start:end].count(b"\n")
