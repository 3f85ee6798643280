"""One unit test per break kind whose evidence issue 23 asked for: a side agent with the history
pasted in (never ``resumed``), a resume named by its time gap and dropped turns, a compaction that
drops turns, thin evidence as ``unknown``, and a fork's second branch explained."""

from __future__ import annotations

from dataclasses import astuple

from rollout_graph.analysis.near_miss import COMPACTION, RESUMED, SIDE_CALL, SUBAGENT, UNKNOWN, describe
from rollout_graph.core.records import NearMiss, SessionInput
from rollout_graph.pipeline import analyse
from tests.support.builders import calls_from_tokens

SYSTEM = list(range(100, 140))
GEN = [1, 5]
SYS = {"role": "system", "content": "You are a coding agent working in a repository."}
TASK = {"role": "user", "content": "The test in tests/test_loader.py fails; fix configlib/loader.py."}
LIMIT = {"role": "user", "content": "Output token limit hit. Resume directly."}
TOOLS = [{"type": "function", "function": {"name": "bash"}}]


def build(spec, messages, replies=None, tools=None, times=None):
    calls = calls_from_tokens(spec)
    for k, call in enumerate(calls):
        call.request_messages = messages[k]
        call.response_message = {"role": "assistant", "content": (replies or {}).get(k, f"reply {k}")}
        call.tools = (tools or {}).get(k, TOOLS)
        if times:
            call.timing = {"started_at": times[k][0], "ended_at": times[k][1]}
    return analyse(SessionInput("s", calls))


def test_a_memory_agent_with_the_history_pasted_in_is_a_side_call_not_resumed():
    reply = "I found that the loader never sets a default timeout value."
    main = [SYS, TASK]
    pasted = f"Conversation:\nuser: {TASK['content']}\nassistant: {reply}\n\nList the facts worth saving."
    memory = [
        {"role": "system", "content": "Extract durable memories as a bullet list."},
        {"role": "user", "content": pasted},
    ]
    r = build([(SYSTEM + [7] + GEN, [50, 2]), ([1, 300, 301] + GEN, [60, 2])], [main, memory], {0: reply}, {1: None})
    miss = r.near_misses[1]
    assert miss.kind == SIDE_CALL != RESUMED
    assert "its own system prompt; 2 of n0's conversation's messages pasted into a user message" in miss.evidence


def test_a_resume_is_named_by_its_gap_and_the_turns_it_dropped():
    """Same system prompt and tools, the conversation re-sent two minutes later without the limit turns."""
    a1, a2 = "Looking at the loader.", "The timeout key is never set."
    first = [SYS, TASK, {"role": "assistant", "content": a1}, LIMIT]
    resumed = [SYS, TASK, {"role": "assistant", "content": a1}, {"role": "assistant", "content": a2}]
    spec = [(SYSTEM + [7] + GEN, [50]), (SYSTEM + [7] + GEN + [50, 8, 9] + GEN, [51]), (SYSTEM + [7] + GEN + [50, 10] + GEN, [52]),
            (SYSTEM + [7] + GEN + [50, 10] + GEN + [52, 11] + GEN, [53])]  # fmt: skip
    messages = [[SYS, TASK], first, resumed, [*resumed, {"role": "user", "content": "go on"}]]
    r = build(spec, messages, {0: a1, 1: a2}, times=[(0, 1), (2, 3), (200, 201), (202, 203)])
    assert r.topology.forks == [0] and r.topology.discarded == {1: 2}  # the graph's flags: exact rules
    miss = r.near_misses[2]  # the later branch names the earlier one (causality) ...
    assert (miss.kind, miss.earlier, miss.later) == (RESUMED, 1, 2)
    assert r.replaced_by[1] == NearMiss(1, 2, *astuple(miss)[2:])  # ... which it replaced
    assert (
        "197 s after n1 ended" in miss.evidence and "dropped 1 message (user 'Output token limit hit." in miss.evidence
    )
    assert describe(r.calls, miss).startswith("resumed: n2 resumes n1's conversation")


def test_dropped_turns_without_a_new_invocation_are_a_compaction_that_names_them():
    a1 = "Looking at the loader."
    first = [SYS, TASK, {"role": "assistant", "content": a1}, LIMIT]
    later = [SYS, TASK, {"role": "assistant", "content": a1}, {"role": "user", "content": "go on"}]
    spec = [(SYSTEM + [7] + GEN, [50]), (SYSTEM + [7] + GEN + [50, 8, 9] + GEN, [51]), (SYSTEM + [7] + GEN + [50, 10] + GEN, [52]),
            (SYSTEM + [7] + GEN + [50, 10] + GEN + [52, 11] + GEN, [53])]  # fmt: skip
    r = build(spec, [[SYS, TASK], first, later, [*later, {"role": "assistant", "content": "x"}]], {0: a1})
    miss = r.near_misses[2]  # n1 is discarded: n2 continued
    assert (miss.kind, miss.earlier) == (COMPACTION, 1) and "dropped" in miss.evidence
    assert r.replaced_by[1].later == 2


def test_thin_evidence_is_unknown():
    calls2 = calls_from_tokens([(SYSTEM + GEN, [50]), (SYSTEM + GEN + [50, 7], [51]), ([1, 2, 3], [4])])
    r = analyse(SessionInput("s", calls2))
    assert r.near_misses[2].kind == UNKNOWN
    assert "no messages recorded" in r.near_misses[2].evidence


def test_a_subagent_with_its_own_prompt_and_tools():
    sub = [
        {"role": "system", "content": "You review diffs and answer yes or no."},
        {"role": "user", "content": "Review."},
    ]
    spec = [
        (SYSTEM + [7] + GEN, [50]),
        (SYSTEM + [7] + GEN + [50, 9] + GEN, [51]),
        ([1, 300] + GEN, [60]),
        ([1, 300] + GEN + [60, 9] + GEN, [61]),
    ]
    r = build(spec, [[SYS, TASK], [SYS, TASK], sub, sub])
    assert r.near_misses[2].kind == SUBAGENT and "its own system prompt" in r.near_misses[2].evidence


def test_a_resume_that_drops_only_user_turns_is_resumed_without_a_gap():
    """Claude Code's --continue right away: every reply kept, its 'Output token limit hit' turns gone."""
    a1, a2 = "Looking at the loader.", "The timeout key is never set."
    first = [SYS, TASK, {"role": "assistant", "content": a1}, LIMIT]
    resumed = [SYS, TASK, {"role": "assistant", "content": a1}, {"role": "assistant", "content": a2}]
    spec = [(SYSTEM + [7] + GEN, [50]), (SYSTEM + [7] + GEN + [50, 8, 9] + GEN, [51]), (SYSTEM + [7] + GEN + [50, 10] + GEN, [52]),
            (SYSTEM + [7] + GEN + [50, 10] + GEN + [52, 11] + GEN, [53])]  # fmt: skip
    messages = [[SYS, TASK], first, resumed, [*resumed, {"role": "user", "content": "go on"}]]
    r = build(spec, messages, {0: a1, 1: a2})
    miss = r.near_misses[2]
    assert (miss.kind, miss.earlier) == (RESUMED, 1) and "only the harness's user messages dropped" in miss.evidence
