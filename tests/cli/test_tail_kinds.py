"""`tail` equals `inspect` (issue 23): for every arrival order of a small trace, the last near miss
``tail`` reported for each call is the one ``inspect`` gives for the complete file, in the same
words; the discarded calls it prints when the follow ends are ``inspect``'s (and the naive
tests/support/reference.py's); and no verdict is ever printed before it is final, so none is taken back."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rollout_graph.analysis.near_miss import describe
from rollout_graph.ingest.load.files import load_paths
from rollout_graph.live.events import EventLog, event_text
from rollout_graph.live.trace import LiveTrace
from rollout_graph.pipeline import analyse
from tests.analysis.test_replays import discarded_continuer_direction, replay_chain
from tests.support.builders import Turn, examples, harness_traces, jsonl, vllm_chat
from tests.support.reference import reference_discarded, reference_token_parents

VERDICTS = ("discarded", "undiscarded")


def tail_events(path: Path, records: list[dict]) -> list[dict]:
    """Append the records one poll at a time, then end the follow (``EventLog.finish``)."""
    path.write_bytes(b"")
    trace, log = LiveTrace([path]), EventLog()
    events: list[dict] = []
    for record in records:
        with open(path, "ab") as f:
            f.write(jsonl([record]))
        events += log.events(trace, trace.poll())
    return events + log.finish(trace)


def last_misses(events: list[dict]) -> dict[str, tuple]:
    """The last near miss reported per call (a discarded event carries the discarded call's)."""
    last: dict[str, tuple | None] = {}
    for e in events:
        if "near_miss" in e:
            miss = e["near_miss"]
            last[e["node_id"]] = None if miss is None else (miss["kind"], miss["node_id"], miss["why"])
    return {k: v for k, v in last.items() if v is not None}


def tail_kinds(path: Path, records: list[dict]) -> tuple[dict[str, tuple], list[dict]]:
    events = tail_events(path, records)
    return last_misses(events), events


def inspect_of(path: Path):
    sessions = list(load_paths([path]).sessions.values())
    return analyse(sessions[0]) if sessions else None


def inspect_kinds(path: Path) -> dict[str, tuple]:
    r = inspect_of(path)
    if r is None:
        return {}
    return {
        r.calls[i].node_id: (m.kind, r.calls[m.other].node_id, describe(r.calls, m)) for i, m in r.near_misses.items()
    }


def _records_of(spec) -> list[dict]:
    return [vllm_chat(Turn(f"c{i}", prompt, sampled)) for i, (prompt, sampled) in enumerate(spec) if prompt]


def _ids(record: dict) -> tuple[list[int], list[int]]:
    choice = record["response"]["choices"][0]
    return list(record["response"]["prompt_token_ids"]), list(choice["token_ids"])


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_tail_final_kinds_equal_inspect_for_every_arrival_order(tmp_path_factory, data):
    source = data.draw(st.sampled_from(["chain", "direction", "generated", "generated"]))
    if source == "chain":
        records = replay_chain()
    elif source == "direction":
        records = discarded_continuer_direction()
    else:
        records = _records_of(data.draw(harness_traces(max_calls=8)))
    order = list(data.draw(st.permutations(records)))
    path = tmp_path_factory.mktemp("tail") / "t.jsonl"
    events = tail_events(path, order)
    # the same near miss, in the same words, for every call
    assert last_misses(events) == inspect_kinds(path)
    # no verdict while following: every one is printed once, when the follow ends
    final = next(k for k, e in enumerate(events) if e["event"] == "final")
    assert not [e for e in events[:final] if e["event"] in VERDICTS or e.get("discarded")]
    verdicts = [e for e in events[final + 1 :] if e["event"] in VERDICTS]
    assert all(e["event"] == "discarded" for e in verdicts)
    assert len({e["node_id"] for e in verdicts}) == len(verdicts) == events[final]["n_discarded"]
    # ... and they are inspect's, and the naive reference's (the file's order is the arrival order)
    r = inspect_of(path)
    told = {e["node_id"]: e["continued_by"] for e in verdicts}
    if r is None:
        assert not told
        return
    assert told == {r.calls[i].node_id: r.calls[c].node_id for i, c in r.topology.discarded.items()}
    prompts, sampled = zip(*(_ids(rec) for rec in order), strict=True)
    parents = reference_token_parents(list(zip(prompts, sampled, strict=True)))
    names = [rec["call_id"] for rec in order]
    assert told == {names[i]: names[c] for i, c in reference_discarded(list(prompts), parents).items()}


def _tail(path: Path, turns: list[Turn]) -> list[dict]:
    return tail_events(path, [vllm_chat(t) for t in turns])


P = Turn("p", [1, 2, 3], [4])
A = Turn("a", [1, 2, 3, 4, 5], [6])
A2 = Turn("a2", [1, 2, 3, 4, 5, 6, 7], [8])
X = Turn("x", [1, 2, 3, 4, 9], [10])
X2 = Turn("x2", [1, 2, 3, 4, 9, 10, 11], [12])


def test_a_call_is_not_called_discarded_before_its_conversation_moves_on(tmp_path):
    """P has a continued child A; X arrives as P's other child, then X's own child: X was never
    discarded, and tail never said it was."""
    events = _tail(tmp_path / "t.jsonl", [P, A, A2, X, X2])
    about_x = [e for e in events if e.get("node_id") == "x"]
    assert about_x[0]["event"] == "call" and about_x[0]["discarded"] is False
    assert not any(e["event"] in VERDICTS or "discarded" in event_text(e) for e in about_x)


def test_a_branch_that_continues_after_its_sibling_moved_on_is_never_called_discarded(tmp_path):
    """The flip of the last stop: X is childless while A's branch moves on (A2), then X2 continues
    X. Two branches of one fork progressing at once (subagents) arrive like this."""
    events = _tail(tmp_path / "t.jsonl", [P, A, X, A2, X2])
    assert not [e for e in events if e["event"] in VERDICTS]
    assert [event_text(e) for e in events if e["event"] == "final"] == ["· the follow ended: no call is discarded"]


def test_a_discard_undone_and_made_again_by_adoption_is_printed_once_at_the_end(tmp_path):
    """X2 first continues X, then XL (X's prompt sampled longer) adopts X2: X is discarded in the
    end, and tail says so once, when the follow ends."""
    xl = Turn("xl", [1, 2, 3, 4, 9], [10, 11])
    x2 = Turn("x2", [1, 2, 3, 4, 9, 10, 11, 13], [12])
    events = _tail(tmp_path / "t.jsonl", [P, A, A2, X, x2, xl])
    verdicts = [e for e in events if e["event"] in VERDICTS]
    assert [(e["node_id"], e["continued_by"]) for e in verdicts] == [("x", "a")]
    assert events.index(verdicts[0]) > next(k for k, e in enumerate(events) if e["event"] == "final")
    r = inspect_of(tmp_path / "t.jsonl")
    assert {r.calls[i].node_id for i in r.topology.discarded} == {"x"}


def test_a_discard_is_reported_once_at_the_end_in_inspects_words(tmp_path):
    x = Turn("x", [1, 2, 3, 4, 9], [10])  # an attempt, re-sent as a
    a = Turn("a", [1, 2, 3, 4, 9], [6])
    a2 = Turn("a2", [1, 2, 3, 4, 9, 6, 7], [8])
    events = _tail(tmp_path / "t.jsonl", [P, x, a, a2])
    discards = [e for e in events if e["event"] in VERDICTS and e["node_id"] == "x"]
    assert [e["event"] for e in discards] == ["discarded"]
    assert (
        event_text(discards[0])
        == "[s1] x  discarded: a continued (retry: a re-sends x's prompt [the identical prompt ids])"
    )
    assert discards[0]["replaced_by"]["node_id"] == "a" and discards[0]["near_miss"] is None  # a came later
    assert discards[0]["replaced_by"]["dropped"] == "x is discarded: a re-sent its prompt"
    finals = [event_text(e) for e in events if e["event"] == "final"]
    assert finals == [
        "· the follow ended: 1 discarded call (verdicts wait until now: a later call can continue any call)"
    ]


def _bundled() -> list[Path]:
    from rollout_graph import samples

    root = Path(samples.__file__).parent
    return sorted(p for p in root.rglob("*") if p.suffix in (".jsonl", ".gz") and "signals" not in p.parts)


def test_bundled_samples_end_with_inspects_verdicts_and_near_misses(tmp_path):
    """Every bundled trace the way a user tails it (read whole, then the follow ends), and the
    vLLM sample appended line by line: the verdicts and near misses ``inspect`` gives."""
    paths = _bundled()
    assert paths
    for path in paths:
        trace, log = LiveTrace([path]), EventLog()
        events = log.events(trace, trace.poll())
        assert not [e for e in events if e["event"] in VERDICTS]
        events += log.finish(trace)
        misses, told = {}, {}
        for e in events:
            if "near_miss" in e:
                misses[(e["session_id"], e["node_id"])] = e["near_miss"] and e["near_miss"]["why"]
            if e["event"] == "discarded":
                told[(e["session_id"], e["node_id"])] = e["continued_by"]
        expected_misses, expected_told = {}, {}
        for sid, session in load_paths([path]).sessions.items():
            r = analyse(session)
            expected_misses |= {(sid, r.calls[i].node_id): describe(r.calls, m) for i, m in r.near_misses.items()}
            expected_told |= {(sid, r.calls[i].node_id): r.calls[c].node_id for i, c in r.topology.discarded.items()}
        assert told == expected_told, path.name
        assert {k: v for k, v in misses.items() if v} == expected_misses, path.name
    (jsonl,) = [p for p in paths if p.name == "agent-rollouts.jsonl"]
    lines = jsonl.read_bytes().splitlines(keepends=True)
    target = tmp_path / jsonl.name
    target.write_bytes(b"")
    trace, log = LiveTrace([target]), EventLog()
    events = []
    for raw in lines:
        with open(target, "ab") as f:
            f.write(raw)
        events += log.events(trace, trace.poll())
    assert not [e for e in events if e["event"] in VERDICTS]
    final = log.finish(trace)
    assert final[0]["n_discarded"] == sum(
        len(analyse(s).topology.discarded) for s in load_paths([jsonl]).sessions.values()
    )
