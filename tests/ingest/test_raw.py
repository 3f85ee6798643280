"""The raw record is read back by file and line exactly as it stands (JSONL plain or gzip), or
as the item of a JSON array document, and a missing line is a clear error."""

from __future__ import annotations

import gzip
import json

import pytest

from rollout_graph.ingest.files.sources import Source
from rollout_graph.ingest.load.calls import load_sources
from rollout_graph.ingest.values.record_text import read_record
from tests.support.builders import Turn, vllm_chat

LINES = [
    '{"call_id": "a",   "note": "odd  spacing kept", "x": 1.50}',
    "",
    json.dumps(vllm_chat(Turn("b", [1, 2], [3]))),
]


def test_jsonl_line_is_byte_for_byte(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(LINES) + "\n")
    record = read_record(Source.from_path(path), 1)
    assert record.exact and record.text == LINES[0] and record.where == "line 1"
    loaded = load_sources([Source.from_path(path)])
    call = next(c for s in loaded.sessions.values() for c in s.calls if c.node_id == "b")
    assert read_record(Source.from_path(path), call.line).text == LINES[2]


def test_gzip_and_uploads(tmp_path):
    data = gzip.compress(("\n".join(LINES) + "\n").encode())
    assert read_record(Source.from_bytes("t.jsonl.gz", data), 3).text == LINES[2]


def test_json_array_document_gives_the_item(tmp_path):
    items = [vllm_chat(Turn("a", [1], [2])), vllm_chat(Turn("b", [1, 2, 3], [4]))]
    source = Source.from_bytes("doc.json", json.dumps(items, indent=2).encode())
    record = read_record(source, 2)
    assert not record.exact and json.loads(record.text) == items[1]
    assert "item 2" in record.where
    one = json.dumps(items[0], indent=2)
    whole = read_record(Source.from_bytes("one.json", one.encode()), 1)
    assert whole.exact and whole.text == one


def test_a_missing_line_is_a_lookup_error(tmp_path):
    source = Source.from_bytes("t.jsonl", ("\n".join(LINES) + "\n").encode())
    with pytest.raises(LookupError, match="no line 9"):
        read_record(source, 9)
