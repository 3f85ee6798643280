"""Causality (docs/semantics.md, "Near misses"): a call's near miss always names a call that arrived
before it (and did not start after it, when both starts are recorded), whatever the arrival order;
which LATER call replaced a call is kept apart (``Rollout.replaced_by``, the contract's
``replaced_by``), and every near miss carries its evidence in words and as facts.

The traces come from a small simulated harness: conversations whose prompt ids are a tokenization
of their messages, with retries, re-tokenized and rewritten replays, compactions (a summary in the
history's place), resumes (the system prompt re-rendered), side calls and subagents with prompts
of their own, a subagent spawned by a tool call carrying its prompt, and the choices of one
request (n > 1). Each trace is analysed in every arrival order hypothesis draws."""

from __future__ import annotations

import hashlib

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rollout_graph.analysis.near_miss import KINDS, describe
from rollout_graph.core.records import Call, SessionInput
from rollout_graph.pipeline import analyse
from rollout_graph.reports.contract import session_json
from tests.support.builders import examples

CHECKED = settings(max_examples=examples(600), deadline=None, suppress_health_check=[HealthCheck.too_slow])
ROLE = {"system": 1, "user": 2, "assistant": 3, "tool": 4}
END = 5
WORDS = ["fix", "the", "loader", "test", "ls", "run", "pytest", "config", "done", "summary", "again", "note"]
SYSTEMS = [
    "You are a coding agent working in a repository with a failing test.",
    "You are a coding agent working in a repository with a failing test. Today is Tuesday.",
    "Summarise the conversation so far in a few bullet points for the next agent.",
]


def _word_ids(word: str, split: bool = False) -> list[int]:
    value = int(hashlib.sha256(word.encode()).hexdigest(), 16)
    if split and len(word) > 2:  # the same text cut into other tokens (a re-tokenization)
        return [10 + value % 40, 60 + value % 30]
    return [100 + value % 400]


def tokens(messages: list[dict], split_last: bool = False) -> list[int]:
    """The ids a template would give: a role id, each word's ids, tool calls, an end id; with
    ``split_last`` the last assistant message's words are cut into other ids (the same text)."""
    out: list[int] = []
    last = max((k for k, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
    for k, m in enumerate(messages):
        split = split_last and k == last
        out += [ROLE[m["role"]]] + [t for w in str(m.get("content") or "").split() for t in _word_ids(w, split)]
        for call in m.get("tool_calls") or ():
            out += [7] + [t for w in call["function"]["arguments"].split() for t in _word_ids(w)]
        out.append(END)
    return [*out, ROLE["assistant"]]


@st.composite
def simulated(draw, max_calls: int = 10) -> list[dict]:
    """Calls of a simulated harness, in the order they were made (each a dict: messages, reply,
    tools, prompt ids, sampled ids, start, end, line)."""
    convs: list[list[dict]] = []  # each conversation's messages so far
    made: list[dict] = []
    clock = 0.0

    def call(messages, reply_text, tools=True, tool_call=None, line=None, split_last=False, same=None):
        nonlocal clock
        prompt = tokens(messages, split_last) if same is None else same["prompt"]
        reply = {"role": "assistant", "content": reply_text}
        if tool_call is not None:
            reply["tool_calls"] = [{"id": "t", "type": "function", "function": tool_call}]
        sampled = tokens([reply])[1:-1]  # the reply's words and end id (the prompt ends with its role)
        start = clock + draw(st.floats(0, 100))
        clock = start + draw(st.floats(0.1, 5))
        made.append({"messages": [dict(m) for m in messages], "reply": reply, "tools": tools, "prompt": prompt,
                     "sampled": sampled, "start": start, "end": clock, "line": line})  # fmt: skip
        return reply

    for _ in range(draw(st.integers(1, max_calls))):
        move = draw(st.sampled_from(["new", "go on", "go on", "retry", "replay", "compact", "resume", "side",
                                     "spawn", "n2"]))  # fmt: skip
        text = " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4)))
        if not convs or move == "new":
            convs.append([{"role": "system", "content": SYSTEMS[0]}, {"role": "user", "content": text}])
            call(convs[-1], text)
            continue
        k = draw(st.integers(0, len(convs) - 1))
        conv = convs[k]
        last = made[-1]
        if move == "go on":
            conv += [last["reply"], {"role": "user", "content": text}]
            call(conv, text)
        elif move == "retry":
            call(last["messages"], text, same=last)
        elif move == "replay":
            conv += [last["reply"], {"role": "user", "content": text}]
            call(conv, text, split_last=True)
        elif move == "compact":
            summary = call(conv + [{"role": "user", "content": "summarize"}], "summary " + text, tools=False)
            convs[k] = [conv[0], {"role": "user", "content": "Summary: " + str(summary["content"])}]
            call(convs[k], text)
        elif move == "resume":
            convs[k] = [{"role": "system", "content": SYSTEMS[1]}, *conv[1:], {"role": "user", "content": text}]
            call(convs[k], text)
        elif move == "side":
            call([{"role": "system", "content": SYSTEMS[2]}, {"role": "user", "content": text}], text, tools=False)
        elif move == "spawn":
            prompt = f"look at the {text} please"
            call(conv, "", tool_call={"name": "spawn_agent", "arguments": f'{{"message": "{prompt}"}}'})
            sub = [{"role": "system", "content": SYSTEMS[0]}, {"role": "user", "content": prompt}]
            call(sub, "", tool_call={"name": "spawn_agent", "arguments": f'{{"message": "{prompt}"}}'})
            call(sub, text)  # the subagent's own subagent: the identical prompt
        elif move == "n2":
            line = len(made) + 1000
            first = call(conv, text, line=line)
            call(conv, first["content"] + " again", line=line, same=made[-1])
    return made


def as_calls(made: list[dict], order: list[int], timed: bool, no_ids: frozenset[int] = frozenset()) -> list[Call]:
    """The calls in arrival ``order``; those in ``no_ids`` recorded without token ids (message-only)."""
    calls = []
    for position, k in enumerate(order):
        c = made[k]
        calls.append(
            Call(
                node_id=f"c{k}",
                session_id="s",
                source="sim.jsonl",
                line=c["line"] if c["line"] is not None else 1 + position,
                shape="test",
                prompt_ids=None if k in no_ids else np.array(c["prompt"], dtype=np.int32),
                sampled_ids=np.array(c["sampled"], dtype=np.int32),
                sampled_logprobs=np.full(len(c["sampled"]), -0.5),
                request_messages=c["messages"],
                response_message=c["reply"],
                tools=[{"type": "function", "function": {"name": n}} for n in ("bash", "spawn_agent")]
                if c["tools"]
                else None,
                timing={"started_at": c["start"], "ended_at": c["end"]} if timed else {},
            )
        )
    return calls


def assert_causal(calls: list[Call]) -> None:
    r = analyse(SessionInput("s", calls))
    starts = [c.timing.get("started_at") for c in calls]
    for i, m in r.near_misses.items():
        assert (m.node, m.other) == (i, m.earlier) and m.later == i, m
        assert m.earlier < m.later, f"{calls[i].node_id}'s near miss names {calls[m.earlier].node_id}, which came later"
        if starts[m.earlier] is not None and starts[i] is not None:
            assert starts[m.earlier] <= starts[i], "a near miss names a call that started after it"
        assert m.kind in KINDS and m.evidence and m.facts and m.rule
        assert describe(calls, m).split(": ", 1)[1].startswith(calls[i].node_id)  # worded from the later call
    for d, m in r.replaced_by.items():
        assert m.node == d == m.earlier < m.later, m
    nodes = session_json(r, False)["nodes"]
    index = {n["node_id"]: n["index"] for n in nodes}
    for n in nodes:
        if "near_miss" in n:
            assert index[n["near_miss"]["node_id"]] < n["index"] and n["near_miss"]["later_id"] == n["node_id"]
            assert n["near_miss"]["facts"] and all(f["says"] for f in n["near_miss"]["facts"])
        if "replaced_by" in n:
            assert index[n["replaced_by"]["node_id"]] > n["index"] and n["replaced_by"]["dropped"]


@CHECKED
@given(made=simulated(), data=st.data(), timed=st.booleans())
def test_a_near_miss_never_names_a_later_call_in_any_arrival_order(made, data, timed):
    order = data.draw(st.permutations(range(len(made))))
    assert_causal(as_calls(made, order, timed))


@CHECKED
@given(made=simulated(), data=st.data())
def test_calls_without_ids_among_them_change_nothing_of_it(made, data):
    """Message-only calls mixed in (a framework that records ids for some calls only): no crash, and
    still no near miss names a later call (a crash the main branch had on such a trace)."""
    order = data.draw(st.permutations(range(len(made))))
    no_ids = frozenset(data.draw(st.sets(st.sampled_from(range(len(made))), max_size=len(made))))
    assert_causal(as_calls(made, order, data.draw(st.booleans()), no_ids))


@CHECKED
@given(made=simulated())
def test_in_the_order_the_calls_ended_every_break_is_named_from_the_later_side(made):
    """The order a capture proxy writes (each call when it ends), with the clocks recorded."""
    order = sorted(range(len(made)), key=lambda k: made[k]["end"])
    assert_causal(as_calls(made, order, True))
