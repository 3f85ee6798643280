"""Identity keys given twice (docs/limits.md): a key spelled with an escape (``"session_\\u0069d"``)
is the same key to every JSON parser, so the record naming its session twice that way is skipped
like one naming it twice plainly, in the Python search and where the C search runs; a ``metadata``
object naming the session twice keeps the last, with a WARN ``malformed_field`` on the call."""

from __future__ import annotations

import json

import pytest

from rollout_graph.ingest import speedups
from rollout_graph.ingest.load.files import load_paths
from rollout_graph.ingest.values.line import _identity_problems
from tests.support.builders import Turn, load_records, vllm_chat

PLAIN_REASON = "duplicate key 'session_id' in one object: which value counts is ambiguous"


def _line(turn: Turn, session_key: str = "session_id") -> str:
    record = vllm_chat(turn)
    record.pop("session_id", None)
    body = json.dumps(record)
    return '{"' + session_key + '": "elsewhere", "session_id": "' + turn.session + '", ' + body[1:]


def _records() -> list:
    return [
        vllm_chat(Turn("c0", [1, 2], [3])),
        _line(Turn("c1", [1, 2, 3], [4]), "session_\\u0069d"),  # escaped letter
        _line(Turn("c2", [1, 2, 3], [5]), "session\\u005fid"),  # escaped underscore
        _line(Turn("c3", [1, 2, 3], [6]), "session_id"),  # plain
        vllm_chat(Turn("c4", [1, 2, 3, 4], [7])),
    ]


@pytest.fixture(params=["python", "c"])
def search(request, monkeypatch):
    if request.param == "c":
        if speedups.native is None:
            pytest.skip("the C speedups are not built")
    else:
        monkeypatch.setattr(speedups, "native", None)
    return request.param


def _check(loaded) -> None:
    reasons = {s.line: s.reason for s in loaded.skipped}
    assert reasons == {2: PLAIN_REASON, 3: PLAIN_REASON, 4: PLAIN_REASON}
    assert [c.node_id for c in loaded.sessions["s1"].calls] == ["c0", "c4"]
    assert "elsewhere" not in loaded.sessions


def test_an_escaped_key_beside_the_plain_one_is_the_same_duplicate(search):
    _check(load_records(_records()))


def test_an_escaped_duplicate_is_skipped_when_read_from_a_file(search, tmp_path):
    path = tmp_path / "trace.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in _records()))
    _check(load_paths([path]))


def test_an_escaped_key_alone_is_the_key():
    record = json.dumps(vllm_chat(Turn("c0", [1, 2], [3], session="s9"))).replace('"session_id"', '"session_\\u0069d"')
    loaded = load_records([record])
    assert not loaded.skipped
    assert [c.node_id for c in loaded.sessions["s9"].calls] == ["c0"]


def test_escapes_nothing_spells_a_key_with_are_not_duplicates():
    # escapes JSON writers do make (Go's \u003c, \u0026; control characters) leave the check alone
    text = json.dumps({"session_id": "a", "x": "<b>&\x01"}).replace("<", "\\u003c").replace("&", "\\u0026")
    assert _identity_problems(text.encode()) == (None, ())
    nested = b'{"session_id":"a","x":{"session_\\u0069d":"b","session_id":"c"}}'
    assert _identity_problems(nested) == (None, ())  # twice, but not in the top-level object
    assert _identity_problems(b'{"call_\\u0069d":"a","call_id":"b"}') == ("call_id", ())


def _metadata_twice(turn: Turn) -> str:
    record = vllm_chat(turn)
    record.pop("session_id", None)
    body = json.dumps(record)
    return '{"metadata": {"session_id": "a", "harness": "h", "session_id": "b"}, ' + body[1:]


def test_metadata_naming_the_session_twice_warns_on_the_call(search, tmp_path):
    path = tmp_path / "meta.jsonl"
    lines = [json.dumps(vllm_chat(Turn("c0", [1, 2], [3], session="b"))), _metadata_twice(Turn("c1", [1, 2, 3], [4]))]
    path.write_text("\n".join(lines) + "\n")
    loaded = load_paths([path])
    assert not loaded.skipped
    calls = {c.node_id: c for c in loaded.sessions["b"].calls}  # the last is used
    warned = calls["c1"]
    assert (warned.source, warned.line) == (str(path), 2)
    notes = [(i.level, i.code, i.detail) for i in warned.issues if i.code == "malformed_field"]
    assert notes == [("WARN", "malformed_field", "metadata.session_id given twice; the last, 'b', is used")]
    assert not [i for i in calls["c0"].issues if i.code == "malformed_field"]


def test_metadata_naming_it_once_beside_a_top_level_id_is_no_warning():
    record = vllm_chat(Turn("c0", [1, 2], [3]))
    record["metadata"] = {"session_id": "s1", "call_id": "x"}
    record["request"]["metadata"] = {"session_id": "s1"}
    line = json.dumps(record).encode()
    assert _identity_problems(line) == (None, ())
    loaded = load_records([record])
    assert not loaded.skipped
    assert not [i for i in loaded.sessions["s1"].calls[0].issues if i.code == "malformed_field"]


def test_a_range_read_by_a_pool_worker_keeps_the_warning(tmp_path):
    from rollout_graph.ingest.load.pool import Task, _parse_range

    path = tmp_path / "meta.jsonl"
    first = json.dumps(vllm_chat(Turn("c0", [1, 2], [3], session="b"))) + "\n"
    path.write_text(first + _metadata_twice(Turn("c1", [1, 2, 3], [4])) + "\n")
    start = len(first.encode())  # the range holds the second line only, line 2 of the file
    outcome = _parse_range(Task(str(path), str(path), start, path.stat().st_size, 2, "meta"))
    [(line, error, parsed)] = outcome.events
    assert (line, error) == (2, None)
    [call] = parsed.calls
    assert (call.line, call.session_id) == (2, "b")
    assert [i.detail for i in call.issues if i.code == "malformed_field"] == [
        "metadata.session_id given twice; the last, 'b', is used"
    ]
