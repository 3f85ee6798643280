"""Request messages left in the file (graph/ingest/shortcuts/messages.py, ``leave_messages_in_file``):
a call that holds where its messages are gives exactly the messages the eager load builds, field
by field (key order, types, unicode, escapes, numbers), on odd inputs too; a file changed since
gives None and says why, never other messages; the command's JSON is byte-identical with and
without (generated traces, every bundled sample and test fixture)."""

from __future__ import annotations

import json
import os
import pickle
import random
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rollout_graph.cli import main
from rollout_graph.core.records import MessagesInFile, messages_left_in_file
from rollout_graph.ingest.load import cache
from rollout_graph.ingest.load.files import load_files
from rollout_graph.ingest.shortcuts import messages as message_prefix
from rollout_graph.ingest.shortcuts.messages import MessageCutter
from tests.support.builders import assert_same_load, examples

ROOT = Path(__file__).resolve().parents[2]
WORDS = "agent ran pytest the fixed failing read ls main.py before again then".split()


def _pair(i: int, messages: list, reply: str = "done") -> bytes:
    return json.dumps(  # the stdlib: integers beyond 64 bits too (orjson, on reading, refuses them)
        {
            "call_id": f"c{i}",
            "session_id": "s",
            "request": {"model": "m", "messages": messages, "temperature": 1.0},
            "response": {
                "object": "chat.completion",
                "model": "m",
                "prompt_token_ids": [1, 2, 3 + i],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": reply},
                        "finish_reason": "stop",
                        "token_ids": [7, 8],
                    }
                ],
            },
        },
        separators=(",", ":"),
        ensure_ascii=False,
    ).encode()


def _text(rng: random.Random, n: int = 400) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _conversations(n: int, seed: int = 0) -> list[bytes]:
    """``n`` calls of distinct conversations (nothing for the prefix shortcut to reuse)."""
    rng = random.Random(seed)
    return [
        _pair(i, [{"role": "system", "content": _text(rng)}, {"role": "user", "content": _text(rng, 50)}])
        for i in range(n)
    ]


def _write(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def _load(path: Path, leave: bool):
    MessagesInFile.forget()
    return load_files([path], use_cache=False, leave_messages=leave)


def _left(loaded) -> int:
    return sum(messages_left_in_file(c) is not None for s in loaded.sessions.values() for c in s.calls)


@pytest.fixture
def quick_probe(monkeypatch):
    """The shortcut decides after one line (not 128), so short traces leave their messages too."""
    monkeypatch.setattr(message_prefix, "_PROBE_LINES", 2)


def test_messages_left_in_the_file_are_the_eager_messages(tmp_path, quick_probe):
    path = _write(tmp_path / "t.jsonl", _conversations(40))
    eager, lazy = _load(path, False), _load(path, True)
    assert _left(eager) == 0
    assert _left(lazy) >= 38  # every call after the shortcut's probe
    assert_same_load(eager, lazy)  # reads every call's messages back, field by field
    call = lazy.sessions["s"].calls[-1]
    assert call.request_messages == call.request_messages  # read again (the window), still equal


def test_arrays_the_shortcut_reuses_stay_shared(tmp_path):
    rng = random.Random(1)
    history: list[dict] = [{"role": "system", "content": _text(rng)}]
    lines = []
    for i in range(10):  # one conversation growing call by call: the prefix shortcut pays
        history = [*history, {"role": "user", "content": _text(rng, 30)}]
        lines.append(_pair(i, history))
        history = [*history, {"role": "assistant", "content": _text(rng, 30)}]
    path = _write(tmp_path / "t.jsonl", lines)
    lazy, eager = _load(path, True), _load(path, False)
    calls = lazy.sessions["s"].calls
    assert messages_left_in_file(calls[0]) is not None  # parsed whole: left in the file
    assert all(messages_left_in_file(c) is None for c in calls[1:])  # the reused prefix stays shared
    assert_same_load(eager, lazy)


def test_a_copy_or_pickle_holds_the_values(tmp_path, quick_probe):
    path = _write(tmp_path / "t.jsonl", _conversations(5))
    lazy, eager = _load(path, True), _load(path, False)
    call, want = lazy.sessions["s"].calls[-1], eager.sessions["s"].calls[-1]
    assert messages_left_in_file(call) is not None
    copy = pickle.loads(pickle.dumps(call))  # the parallel reader's workers, an upload worker
    assert messages_left_in_file(copy) is None and copy.request_messages == want.request_messages


def test_a_changed_file_gives_none_and_says_why(tmp_path, quick_probe):
    path = _write(tmp_path / "t.jsonl", _conversations(6))
    lazy = _load(path, True)
    calls = lazy.sessions["s"].calls
    want = [c.request_messages for c in _load(path, False).sessions["s"].calls]
    MessagesInFile.forget()
    with path.open("ab") as f:  # appended (a live trace): every span is where it was
        f.write(_conversations(1, seed=9)[0] + b"\n")
    assert [c.request_messages for c in calls] == want
    MessagesInFile.forget()
    data = bytearray(path.read_bytes())
    third = data.index(b"\n", data.index(b"\n") + 1) + 1
    at = data.index(b"agent", third)  # inside the third call's messages (the first left in the file)
    data[at : at + 5] = b"AGENT"  # the same size: only the CRC-32 tells
    path.write_bytes(bytes(data))
    os.utime(path, ns=(1, 1))
    left = messages_left_in_file(calls[2])
    assert left is not None
    assert calls[2].request_messages is None
    assert left.unavailable is not None and "changed since it was loaded" in left.unavailable
    assert calls[3].request_messages == want[3]  # untouched spans still read (their CRC matches)


def test_a_file_gone_before_the_first_read_gives_none(tmp_path, quick_probe):
    path = _write(tmp_path / "t.jsonl", _conversations(4))
    calls = _load(path, True).sessions["s"].calls
    path.unlink()
    assert calls[-1].request_messages is None
    left = messages_left_in_file(calls[-1])
    assert left is not None and left.unavailable is not None and "cannot read" in left.unavailable


def test_the_window_of_read_messages_stays_bounded(tmp_path, quick_probe):
    path = _write(tmp_path / "t.jsonl", _conversations(60))
    calls = _load(path, True).sessions["s"].calls
    for c in calls:
        assert c.request_messages
    assert MessagesInFile._kept_bytes[0] <= MessagesInFile.KEPT_BYTES
    assert sum(v[0].size for v in MessagesInFile._kept.values()) == MessagesInFile._kept_bytes[0]


def test_entries_that_are_not_objects_keep_the_eager_path(tmp_path, quick_probe):
    rng = random.Random(3)
    lines = _conversations(3) + [_pair(9, [{"role": "system", "content": _text(rng)}, "not a message", 7])]
    path = _write(tmp_path / "t.jsonl", lines)
    lazy, eager = _load(path, True), _load(path, False)
    assert messages_left_in_file(lazy.sessions["s"].calls[-1]) is None  # dropped entries: held as loaded
    assert_same_load(eager, lazy)


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=30),
    st.sampled_from(['"', "\\", "[", "]", "{", "}", "\u2028", "é", "😀", '"messages":[', "\\u0041"]),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "user", "assistant", "tool"]), "content": _values},
    optional={"tool_calls": _values, "name": st.text(max_size=10), "n": st.integers()},
)


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(conversations=st.lists(st.lists(_message, min_size=1, max_size=4), min_size=3, max_size=5))
def test_odd_messages_left_in_the_file_equal_the_eager_ones(tmp_path, quick_probe, conversations):
    pad = {"role": "system", "content": "lorem ipsum " * 200}  # over the shortcut's 2 KB minimum
    path = _write(tmp_path / "odd.jsonl", [_pair(i, [pad, *c]) for i, c in enumerate(conversations)])
    eager, lazy = _load(path, False), _load(path, True)
    assert_same_load(eager, lazy)


def _inspect(capsysbinary, path: Path) -> tuple[int, bytes]:
    code = main(["inspect", "--json", "--no-cache", str(path)])  # 2: records, none of which loads
    assert code in (0, 2), path
    return code, capsysbinary.readouterr().out


def _traces() -> list[Path]:
    return sorted(p for folder in ("sample_traces", "tests/fixtures") for p in (ROOT / folder).rglob("*.jsonl"))


def test_the_command_prints_the_same_json_with_and_without(tmp_path, capsysbinary, monkeypatch, quick_probe):
    monkeypatch.setenv(cache.ENV_DIR, "off")
    generated = _write(tmp_path / "g.jsonl", _conversations(30))
    paths = [generated, *_traces()]
    lazy = [_inspect(capsysbinary, p) for p in paths]
    monkeypatch.setattr(MessageCutter, "_left", lambda self, *a: None)  # nothing left in the file
    eager = [_inspect(capsysbinary, p) for p in paths]
    for path, a, b in zip(paths, lazy, eager, strict=True):
        assert a == b, path
    assert len(paths) > 10


@pytest.mark.parametrize("depth", [900, 1019, 1030])
def test_deep_messages_get_the_validating_verdict(tmp_path, quick_probe, depth):
    pad = {"role": "system", "content": "lorem ipsum " * 200}
    line = _pair(3, [pad, {"role": "user", "content": "DEEP"}])
    line = line.replace(b'"DEEP"', b"[" * depth + b'"x"' + b"]" * depth)  # deeper than an encoder walks
    path = _write(tmp_path / "deep.jsonl", [*_conversations(3), line])
    eager, lazy = _load(path, False), _load(path, True)
    assert eager.report() == lazy.report()
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 5 * depth))  # the comparison walks the nesting
    try:
        assert_same_load(eager, lazy)
    finally:
        sys.setrecursionlimit(limit)


def test_search_bundle_and_explain_give_the_same_with_and_without(tmp_path, capsysbinary, monkeypatch, quick_probe):
    """The commands that read every call's messages (search, an HTML bundle) or the near-miss
    explanations read them back and print what the loaded messages give."""
    monkeypatch.setenv(cache.ENV_DIR, "off")
    path = _write(tmp_path / "g.jsonl", _conversations(20))

    def run(tag: str) -> list[bytes]:
        out = []
        for argv in (
            ["search", "--json", "pytest", str(path)],
            ["explain", str(path)],
            ["bundle", "--out", str(tmp_path / f"{tag}.html"), str(path)],
        ):
            assert main(argv) == 0, argv
            out.append(capsysbinary.readouterr().out)
        return [*out, (tmp_path / f"{tag}.html").read_bytes()]

    lazy = run("lazy")
    monkeypatch.setattr(MessageCutter, "_left", lambda self, *a: None)
    eager = run("eager")
    texts = [json.loads(line)["request"]["messages"][0]["content"][:40].encode() for line in _conversations(20)]
    assert b'"hits":[{' in lazy[0] and any(t in lazy[3] for t in texts)  # messages were read back
    assert [o.replace(b"lazy.html", b"") for o in lazy] == [o.replace(b"eager.html", b"") for o in eager]


def test_an_array_after_an_earlier_cut_is_left_in_the_file_at_its_place(tmp_path, quick_probe):
    """The response (its id arrays cut) before the request: every span is found on the line as
    read, so the array is left in the file at its own place, and read back the same."""
    moved = []
    for line in _conversations(5):
        record = json.loads(line)
        record = {"response": record.pop("response"), **record}
        record["response"]["prompt_token_ids"] = list(range(3000))  # a long array the id cutter cuts
        moved.append(json.dumps(record, separators=(",", ":")).encode())
    path = _write(tmp_path / "moved.jsonl", moved)
    lazy, eager = _load(path, True), _load(path, False)
    assert _left(lazy) >= 3 and _left(eager) == 0
    assert_same_load(eager, lazy)
