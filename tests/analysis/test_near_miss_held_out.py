"""The breaks the first held-out captures showed named wrong (tests/fixtures/harnesses/README.md,
"The agreement"), rebuilt in the harnesses' shapes: a harness that offers no tools restoring its
chat history with its own messages moved (aider), a resume that carried nothing of the history
(cline), and the moved-turn alignment they rest on."""

from __future__ import annotations

from rollout_graph.analysis.near_miss import COMPACTION, RESUMED, describe
from rollout_graph.analysis.near_miss.texts import match_history
from rollout_graph.core.types import NEW_CONVERSATION, SIDE_CALL, SUBAGENT
from tests.analysis.test_near_miss_issue40 import AGENT, LS, TASK, Trace, kind

EDITOR = "Act as an expert software developer. Take requests for changes to the supplied code."
EXAMPLE = [{"role": "user", "content": "Change the greeting to be more casual"},
           {"role": "assistant", "content": "Ok, I will switch the greeting text from Hello to Hey."}]  # fmt: skip
NO_FILES = [{"role": "user", "content": "I am not sharing any files that you can edit yet."},
            {"role": "assistant", "content": "Ok."}]  # fmt: skip
FORMAT = "\n\nTo suggest changes to a file you MUST return the entire content of the updated file."
REPLY = "I'm sorry for the confusion. I can help you with your project."


def test_a_turn_moved_unchanged_is_carried_not_dropped():
    before = [("user", "the task, long enough to count", ()), ("user", "a note the harness keeps last", ())]
    reply = ("assistant", "the model's reply to the task, carried", ())
    after = [before[0], reply, before[1], ("user", "Go on", ())]
    h = match_history(before, reply, after)
    assert h.carried == 3 and not h.dropped and h.inserted == (3,)
    assert h.reply == "re-rendered"  # carried as a reply, in another place
    short = match_history([("user", "ok", ())], ("assistant", "ok", ()), [("assistant", "ok", ()), ("user", "ok", ())])
    assert short.reply == "left out"  # a short turn is never taken as moved


def _aider(trace: Trace, task_message: str, history: list[dict], prompt: str) -> list[dict]:
    return [{"role": "system", "content": EDITOR}, *EXAMPLE, *history, *NO_FILES,
            {"role": "user", "content": prompt + FORMAT}]  # fmt: skip


def test_a_harness_without_tools_restoring_its_history_is_resumed_not_a_side_call():
    t = Trace()
    first = [{"role": "system", "content": EDITOR}, *EXAMPLE, *NO_FILES, {"role": "user", "content": TASK + FORMAT}]
    t.call(first, REPLY, tools=None)
    restored = [{"role": "user", "content": TASK}, {"role": "assistant", "content": REPLY}]
    t.call(_aider(t, TASK, restored, "Go on, briefly."), REPLY, tools=None, gap=12.0)
    r = t.analysed()
    assert r.topology.parents[1] is None  # a new root: the history was written again
    assert kind(r, "c01") == (RESUMED, "c00")
    sentence = describe(r.calls, r.near_misses[1])
    assert "resumes c00's conversation" in sentence and "written again" in sentence


def test_a_single_summary_call_without_tools_is_still_no_conversation_resumed():
    t = Trace()
    system, task = {"role": "system", "content": AGENT}, {"role": "user", "content": TASK}
    answer = "The loader reads the config file and fails on an empty one."
    t.call([system, task], answer)
    summary = "The user asked to fix the loader; the agent found it fails on an empty config."
    ask = [system, task, {"role": "assistant", "content": answer},
           {"role": "user", "content": "Summarize the conversation so far for the next agent."}]  # fmt: skip
    t.call(ask, summary, tools=None)
    again = [system, {"role": "user", "content": f"Earlier: {summary}"}, ask[-1]]
    t.call(again, summary, tools=None, gap=70.0)
    r = t.analysed()
    assert kind(r, "c01") == (SIDE_CALL, "c00")
    assert kind(r, "c02")[0] != RESUMED  # c01's reply is carried pasted in a user message, not as a reply


def test_a_resume_that_carries_nothing_is_a_new_conversation_not_a_compaction():
    t = Trace()
    system = {"role": "system", "content": AGENT}
    t.call([system, {"role": "user", "content": TASK}], "Looking at the loader now, it reads the config.")
    t.call([system, {"role": "user", "content": "Go on, briefly."}], "Fine.", gap=6.5)
    r = t.analysed()
    assert r.topology.parents[1] is None
    named = kind(r, "c01")
    assert named[0] != COMPACTION
    assert named == (NEW_CONVERSATION, "c00")
    assert "begins" in describe(r.calls, r.near_misses[1])


def test_a_conversation_started_while_a_tool_call_waits_stays_a_subagent():
    t = Trace()
    system, task = {"role": "system", "content": AGENT}, {"role": "user", "content": TASK}
    t.call([system, task], "", tool_call=LS["tool_calls"][0]["function"])
    waiting = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "t9", "type": "function", "function": LS["tool_calls"][0]["function"]}],
    }
    t.call([system, task, waiting, {"role": "tool", "tool_call_id": "t9", "content": "README.md configlib tests"}],
           "", tool_call={"name": "shell", "arguments": '{"command": "cat configlib/loader.py"}'})  # fmt: skip
    t.call([system, {"role": "user", "content": "List the files and say which one holds the loader."}], "ok")
    r = t.analysed()
    assert r.topology.parents[1] == 0 and r.topology.parents[2] is None
    # c01's reply asks for a tool: its conversation waits, so c02 is no next conversation of the agent
    assert kind(r, "c02") == (SUBAGENT, "c01")
    assert not any(key == "conversation_over" for key, _ in r.near_misses[2].facts)


def test_a_resume_restoring_a_tool_result_twice_is_resumed_and_no_attempt_given_up_on():
    """gemini-cli's ``--resume latest``: the whole conversation re-sent with a tool result restored
    twice (a message inserted inside the history); each invocation a sibling of the one before,
    none continued exactly."""
    t = Trace()
    system, task = {"role": "system", "content": AGENT}, {"role": "user", "content": TASK}
    listing = {"role": "tool", "tool_call_id": "t9", "content": "README.md configlib tests (the listing)"}
    call = {"role": "assistant", "content": "", "tool_calls": [{"id": "t9", "type": "function", "function": LS["tool_calls"][0]["function"]}]}  # fmt: skip
    t.call([system, task], "", tool_call=LS["tool_calls"][0]["function"])
    answer = "The loader fails on an empty config file, it seems."
    t.call([system, task, call, listing], answer)
    go_on = {"role": "user", "content": "Go on, briefly."}
    t.call([system, task, call, listing, listing, {"role": "assistant", "content": answer}, go_on], "More.", gap=3.0)
    r = t.analysed()
    assert r.topology.parents[2] == r.topology.parents[1] == 0  # siblings: the restored history breaks the prefix
    assert kind(r, "c02") == (RESUMED, "c01")
    assert "inserted inside it" in describe(r.calls, r.near_misses[2])
    assert r.stats["n_unfinished"] == 0  # c02 went on from c01's reply: neither is an attempt given up on
    assert not any(f.code == "unfinished_attempts" for f in r.findings)


def test_a_history_carried_whole_is_never_a_compaction():
    t = Trace()
    system, task = {"role": "system", "content": AGENT}, {"role": "user", "content": TASK}
    t.call([system, task], "Looking at the loader now, it reads the config.")
    note = {"role": "user", "content": "A reminder the harness inserted into the history."}
    t.call([system, note, task, {"role": "assistant", "content": "Looking at the loader now, it reads the config."},
            {"role": "user", "content": "Go on, briefly."}], "Fine.")  # fmt: skip
    r = t.analysed()
    assert kind(r, "c01")[0] != COMPACTION
