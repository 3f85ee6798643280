"""`tail` equals `inspect` on near misses (issue 23): for every arrival order of a small trace, the
last near miss ``tail`` reported for each call is the one ``inspect`` gives for the complete file,
in the same words; and a call whose parent is known is never reported discarded, then undiscarded."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rollout_graph.analysis.near_miss import describe
from rollout_graph.ingest.loading import load_paths
from rollout_graph.live.events import EventLog, event_text
from rollout_graph.live.trace import LiveTrace
from rollout_graph.pipeline import analyse
from tests.builders import Turn, examples, harness_traces, jsonl, vllm_chat
from tests.test_replays import discarded_continuer_direction, replay_chain


def tail_kinds(path: Path, records: list[dict]) -> tuple[dict[str, tuple], list[dict]]:
    """Append the records one poll at a time; the last near miss reported per call."""
    path.write_bytes(b"")
    trace, log = LiveTrace([path]), EventLog()
    events: list[dict] = []
    for record in records:
        with open(path, "ab") as f:
            f.write(jsonl([record]))
        events += log.events(trace, trace.poll())
    last: dict[str, tuple] = {}
    for e in events:
        if "near_miss" in e and e["event"] != "discarded":
            miss = e["near_miss"]
            last[e["node_id"]] = None if miss is None else (miss["kind"], miss["node_id"], miss["why"])
    return {k: v for k, v in last.items() if v is not None}, events


def inspect_kinds(path: Path) -> tuple[dict[str, tuple], set[str]]:
    """``inspect``'s near misses, and the calls whose verdict ``tail`` still holds back: discarded
    calls that arrived last in their conversation (nothing arrived after them to settle it)."""
    sessions = list(load_paths([path]).sessions.values())
    if not sessions:
        return {}, set()
    r = analyse(sessions[0])
    last = {root: i for i, root in enumerate(r.topology.root_of)}
    pending = {
        r.calls[i].node_id
        for i, m in r.near_misses.items()
        if m.node == m.earlier and i in r.topology.discarded and last[r.topology.root_of[i]] == i
    }
    kinds = {
        r.calls[i].node_id: (m.kind, r.calls[m.other].node_id, describe(r.calls, m)) for i, m in r.near_misses.items()
    }
    return {k: v for k, v in kinds.items() if k not in pending}, pending


def sampled_any(record: dict) -> bool:
    """Whether an engine-pair record's call sampled at least one token."""
    choices = (record.get("response") or {}).get("choices") or [{}]
    return bool(((choices[0].get("logprobs") or {}).get("content")) or choices[0].get("token_ids"))


def _records_of(spec) -> list[dict]:
    return [vllm_chat(Turn(f"c{i}", prompt, sampled)) for i, (prompt, sampled) in enumerate(spec) if prompt]


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_tail_final_kinds_equal_inspect_for_every_arrival_order(tmp_path_factory, data):
    source = data.draw(st.sampled_from(["chain", "direction", "generated"]))
    if source == "chain":
        records = replay_chain()
    elif source == "direction":
        records = discarded_continuer_direction()
    else:
        records = _records_of(data.draw(harness_traces(max_calls=7)))
    order = data.draw(st.permutations(records))
    path = tmp_path_factory.mktemp("tail") / "t.jsonl"
    tailed, events = tail_kinds(path, list(order))
    expected, pending = inspect_kinds(path)
    assert {k: v for k, v in tailed.items() if k not in pending} == expected
    assert not set(tailed) & pending
    # Known gap (issue 23 is open): a call that sampled nothing ends where its prompt ends, so a
    # later call with the same prompt is its child too and the verdict on its other children can
    # still flip when more calls arrive. The no-flip promise is checked where every call sampled.
    if any(not sampled_any(record) for record in order):
        return
    flips = [(e["event"], e["node_id"]) for e in events if e["event"] in ("discarded", "undiscarded")]
    for event, node in flips:
        assert (("undiscarded" if event == "discarded" else "discarded"), node) not in flips, flips


def test_a_call_is_not_called_discarded_before_its_conversation_moves_on(tmp_path):
    """P has a continued child A; X arrives as P's other child, then X's own child: X was never
    discarded, and tail never said it was."""
    p = Turn("p", [1, 2, 3], [4])
    a = Turn("a", [1, 2, 3, 4, 5], [6])
    a2 = Turn("a2", [1, 2, 3, 4, 5, 6, 7], [8])
    x = Turn("x", [1, 2, 3, 4, 9], [10])
    x2 = Turn("x2", [1, 2, 3, 4, 9, 10, 11], [12])
    path = tmp_path / "t.jsonl"
    _, events = tail_kinds(path, [vllm_chat(t) for t in (p, a, a2, x, x2)])
    about_x = [e for e in events if e.get("node_id") == "x"]
    assert about_x[0]["event"] == "call" and about_x[0]["discarded"] is False
    assert not any(e["event"] in ("discarded", "undiscarded") or "discarded" in event_text(e) for e in about_x)


def test_a_settled_discard_is_reported_once(tmp_path):
    p = Turn("p", [1, 2, 3], [4])
    x = Turn("x", [1, 2, 3, 4, 9], [10])  # an attempt, re-sent as a
    a = Turn("a", [1, 2, 3, 4, 9], [6])
    a2 = Turn("a2", [1, 2, 3, 4, 9, 6, 7], [8])
    path = tmp_path / "t.jsonl"
    _, events = tail_kinds(path, [vllm_chat(t) for t in (p, x, a, a2)])
    discards = [e for e in events if e["event"] in ("discarded", "undiscarded") and e["node_id"] == "x"]
    assert [e["event"] for e in discards] == ["discarded"]
    assert "retry: a re-sends x's prompt; x is discarded" in event_text(discards[0])
