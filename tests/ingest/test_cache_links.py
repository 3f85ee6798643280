"""The links a cache entry keeps (format 3): a reopen does not link again, and what it analyses
from the kept links equals what it analyses by linking (tokens, messages, roots, retries, a rollout
document); a damaged links record rebuilds the entry like any damage."""

from __future__ import annotations

import logging
import zlib

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rollout_graph.live.trace as live_trace
import rollout_graph.pipeline as pipeline
from rollout_graph.core.linking import link
from rollout_graph.core.records import LoadResult, SessionInput
from rollout_graph.ingest.load import cache
from rollout_graph.ingest.load.files import load_files, load_paths
from rollout_graph.live.trace import LiveTrace
from rollout_graph.reports.contract import session_json
from tests.support.builders import (
    Turn,
    agent_records,
    assert_same_load,
    calls_from_tokens,
    examples,
    harness_traces,
    jsonl,
    message_only,
    message_traces,
    vllm_chat,
)


def _records() -> list[dict]:
    """Three sessions: token chains with retries, compactions and subagents; calls linked by their
    messages only (a continuation, a retry, a fresh conversation); one lone call."""
    records = agent_records(120, session="agent", chain=30, retry_every=7)
    chat = [{"role": "user", "content": "plan the trip"}]
    reply = {"role": "assistant", "content": "ok"}
    records.append(message_only(Turn("m0", None, [], messages=chat, session="chat")))
    records.append(
        message_only(Turn("m1", None, [], messages=[*chat, reply, {"role": "user", "content": "go"}], session="chat"))
    )
    records.append(message_only(Turn("m2", None, [], messages=chat, session="chat")))  # retried
    records.append(message_only(Turn("m3", None, [], messages=[{"role": "user", "content": "new"}], session="chat")))
    records.append(vllm_chat(Turn("lone", [1, 2], [3], session="lone")))
    return records


@pytest.fixture
def entry(tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(jsonl(_records()))
    folder = tmp_path / "cache"
    fresh = load_files([trace], folder=folder, workers=1)
    again = load_files([trace], folder=folder, workers=1)
    return trace, folder, fresh, again


def _linked(session: SessionInput) -> tuple[list, list]:
    links = link(session.calls)
    return links.parents, links.linked_by


def test_a_reopen_holds_the_links_of_its_calls(entry):
    _, _, fresh, again = entry
    assert all(s.links is None for s in fresh.sessions.values())  # a parse links in the analysis
    assert list(again.sessions) == list(fresh.sessions) == ["agent", "chat", "lone"]
    kinds = set()
    for sid, session in again.sessions.items():
        assert session.links is not None
        assert (session.links.parents, session.links.linked_by) == _linked(fresh.sessions[sid]) == _linked(session)
        kinds |= set(session.links.linked_by)
    assert kinds == {"tokens", "messages", None}  # every kind of link went through the entry


def test_the_analysis_of_a_reopen_equals_a_fresh_analysis(entry, monkeypatch):
    trace, _, fresh, again = entry
    expected = {sid: session_json(pipeline.analyse(s), True) for sid, s in load_paths([trace]).sessions.items()}

    def no_linking(calls):
        raise AssertionError("a reopen linked again")

    monkeypatch.setattr(pipeline, "link", no_linking)
    for sid, session in again.sessions.items():
        got = session_json(pipeline.analyse(session, links=session.links), True)
        assert orjson.dumps(got, option=orjson.OPT_SERIALIZE_NUMPY) == orjson.dumps(
            expected[sid], option=orjson.OPT_SERIALIZE_NUMPY
        )


def test_the_command_reopening_an_entry_does_not_link_again(entry, monkeypatch, capsysbinary):
    """`inspect --json` from a cache entry analyses with its links (pipeline.analyse takes a
    session's own), and prints what a fresh read prints; a session whose calls no longer match its
    links (one appended since) is linked again."""
    from rollout_graph.cli import main

    trace, folder, _, again = entry
    # the cache of the reopen below (--no-cache leaves the variable alone: tests/cli/test_cli_cache_options.py)
    monkeypatch.setenv(cache.ENV_DIR, str(folder))
    assert main(["inspect", "--json", "--no-cache", str(trace)]) == 0
    fresh_out = capsysbinary.readouterr().out
    monkeypatch.setenv(cache.ENV_DIR, str(folder))
    assert main(["inspect", "--json", str(trace)]) == 0  # the command's own entry written
    assert capsysbinary.readouterr().out == fresh_out

    def no_linking(calls):
        raise AssertionError("a reopen linked again")

    real_link = pipeline.link
    monkeypatch.setattr(pipeline, "link", no_linking)
    assert main(["inspect", "--json", str(trace)]) == 0
    assert capsysbinary.readouterr().out == fresh_out
    session = again.sessions["agent"]
    session.calls = session.calls[:-1]  # calls the kept links are not of
    linked = []
    monkeypatch.setattr(pipeline, "link", lambda calls: linked.append(len(calls)) or real_link(calls))
    pipeline.analyse(session)
    assert linked == [len(session.calls)]


def test_a_followed_trace_reopened_from_the_cache_does_not_link_again(tmp_path, monkeypatch):
    monkeypatch.setattr(live_trace, "BATCH_MIN_BYTES", 0)  # the batch loader (and its cache entry)
    monkeypatch.setenv("ROLLOUT_GRAPH_CACHE", str(tmp_path / "cache"))
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(jsonl(_records()))
    cold = LiveTrace([trace], use_cache=False)  # writes no entry of its own to race the one below
    cold.poll()
    cold_rollouts = {sid: session_json(cold.rollout(sid), True) for sid in cold.session_ids}
    cache.store(cache.key_for_files([trace]), load_paths([trace]))  # the entry the first paint writes
    calls_linked = []
    real_link = pipeline.link
    monkeypatch.setattr(pipeline, "link", lambda calls: calls_linked.append(len(calls)) or real_link(calls))
    reopened = LiveTrace([trace])
    reopened.poll()
    assert all(reopened.loaded.sessions[sid].links is not None for sid in reopened.session_ids)
    got = {sid: session_json(reopened.rollout(sid), True) for sid in reopened.session_ids}
    assert calls_linked == []
    assert orjson.dumps(got, option=orjson.OPT_SERIALIZE_NUMPY) == orjson.dumps(
        cold_rollouts, option=orjson.OPT_SERIALIZE_NUMPY
    )
    # a call appended: the session is linked incrementally, never with the entry's links for fewer calls
    with trace.open("ab") as f:
        f.write(jsonl([vllm_chat(Turn("late", [1, 2, 3, 7], [4], session="lone"))]))
    reopened.poll()
    lone = reopened.rollout("lone")
    assert [c.node_id for c in lone.calls] == ["lone", "late"]
    assert lone.topology.parents == [None, 0]


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=harness_traces(), messages=message_traces(), document=st.booleans())
def test_any_links_come_back_as_linking_gives_them(tmp_path_factory, spec, messages, document):
    tokens = SessionInput("t", calls_from_tokens(spec), document={"nodes": []} if document else None)
    chat = SessionInput("m", messages)
    for s in (tokens, chat):
        for i, call in enumerate(s.calls):
            call.session_id, call.node_id = s.session_id, f"{s.session_id}{i}"
        s.node_ids = {c.node_id for c in s.calls}
    n = len(tokens.calls) + len(chat.calls)
    loaded = LoadResult({"t": tokens, "m": chat}, records=n, loaded=n, files=["mem"])
    folder = tmp_path_factory.mktemp("c")
    assert cache.store("k", loaded, folder)
    again = cache.load("k", folder)
    assert again is not None
    assert_same_load(again, loaded)
    for sid in ("t", "m"):
        kept = again.sessions[sid].links
        assert (kept.parents, kept.linked_by) == _linked(loaded.sessions[sid])


def _rewrite_meta(entry_dir, change) -> None:
    """Change meta.json's sessions and write it back with a matching checksum (a damage the
    checksum cannot see: only the links' own checks can)."""
    path = entry_dir / "meta.json"
    head, _, blob = path.read_bytes().partition(b"\n")
    assert int(head) == zlib.crc32(blob)
    meta = orjson.loads(blob)
    change(meta["sessions"][0])
    blob = orjson.dumps(meta)
    path.write_bytes(b"%d\n" % zlib.crc32(blob) + blob)


def _parents(session_row):
    return session_row[4]


def _set(index: int, value):
    def change(row):
        row[index][3] = value

    return change


DAMAGES = {
    "self link": lambda row: _parents(row).__setitem__(3, 3),
    "parent past the calls": lambda row: _parents(row).__setitem__(3, row[1]),
    "negative parent": lambda row: _parents(row).__setitem__(3, -1),
    "parent not a number": lambda row: _parents(row).__setitem__(3, "0"),
    "parent true": lambda row: _parents(row).__setitem__(3, True),
    "one parent short": lambda row: _parents(row).pop(),
    "a link without a way": _set(5, None),
    "a root with a way": lambda row: (_parents(row).__setitem__(3, None), row[5].__setitem__(3, "tokens")),
    "another way": _set(5, "document"),
    "no links": lambda row: row.__delitem__(slice(4, None)),
    "links not a list": lambda row: row.__setitem__(4, {"0": None}),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_damaged_links_rebuild_the_entry_with_a_note(tmp_path, caplog, damage):
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(jsonl(_records()))
    folder = tmp_path / "cache"
    fresh = load_files([trace], folder=folder, workers=1)
    (entry_dir,) = folder.iterdir()
    assert _linked(fresh.sessions["agent"])[0][3] is not None  # the call damaged has a parent
    _rewrite_meta(entry_dir, DAMAGES[damage])
    with caplog.at_level(logging.WARNING, logger="rollout_graph.cache"):
        assert cache.load(cache.key_for_files([trace]), folder) is None
    assert not entry_dir.exists()
    assert "cache entry" in caplog.text and str(entry_dir) in caplog.text
    assert_same_load(load_files([trace], folder=folder, workers=1), fresh)
    again = cache.load(cache.key_for_files([trace]), folder)
    assert again is not None and again.sessions["agent"].links.parents == _linked(fresh.sessions["agent"])[0]


def test_the_key_covers_the_linking_rules(tmp_path, monkeypatch):
    """Links from an older linking code must not be served: the key hashes the core's source."""
    from pathlib import Path

    sources = {p.name for p in (Path(cache.__file__).resolve().parents[2] / "core").glob("*.py")}
    assert {"linking.py", "messages.py", "ids.py", "records.py"} <= sources
    before = cache._code_fingerprint()
    cache._code_fingerprint.cache_clear()
    real = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: real(self) + (b"#" if self.name == "linking.py" else b""))
    try:
        assert cache._code_fingerprint() != before
    finally:
        cache._code_fingerprint.cache_clear()


def test_a_session_growing_while_it_is_written_gives_an_entry_of_the_calls_it_had(tmp_path):
    """A followed trace's session may grow while its first read is written after the paint: the
    rows, the counts and the links are of the calls the session had when the write began."""
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(jsonl(_records()))
    loaded = load_paths([trace])
    before = {sid: list(s.calls) for sid, s in loaded.sessions.items()}
    extra = load_paths([trace]).sessions["agent"].calls[:3]

    def grow() -> None:  # a poll appending calls between two batches
        if extra:
            loaded.sessions["agent"].calls.append(extra.pop())

    assert cache.store("k", loaded, tmp_path / "cache", between=grow)
    again = cache.load("k", tmp_path / "cache")
    assert again is not None and not extra
    for sid, calls in before.items():
        kept = again.sessions[sid]
        assert [c.node_id for c in kept.calls] == [c.node_id for c in calls]
        assert (kept.links.parents, kept.links.linked_by) == _linked(SessionInput(sid, calls))
