"""Each break issue 40 found named wrong on real traffic, rebuilt in the harnesses' shapes (messages
as the harness sent them, prompt ids a tokenization of them): chained summary calls, a summary
request with the tools removed, a re-compaction beside a long system prompt (the 2% rule), a resume
whose first message was re-rendered, a reply merged with its recovery continuation, a subagent
spawning a subagent with the same prompt, messages inserted (not dropped), a tool-call-only reply
quoted by its tool, and the n = 2 choices of one request."""

from __future__ import annotations

import numpy as np

from rollout_graph.analysis.near_miss import (
    COMPACTION,
    PARALLEL_SAMPLE,
    RESUMED,
    RETRY,
    REWRITTEN,
    SIDE_CALL,
    SPAWNED,
    SUBAGENT,
    describe,
)
from rollout_graph.core.records import Call, SessionInput
from rollout_graph.pipeline import analyse
from tests.analysis.test_near_miss_causal import tokens

AGENT = "You are a coding agent. Use the shell tool to inspect and fix the repository. Be brief."
SUMMARIZER = "You are a context summarization assistant. Summarize the conversation below for the next agent."
TASK = "The test in tests/test_loader.py fails. Find out why and fix configlib/loader.py."
TOOLS = [{"type": "function", "function": {"name": n}} for n in ("shell", "read_file", "apply_patch")]
LS = {"role": "assistant", "content": "", "tool_calls": [
    {"id": "c1", "type": "function", "function": {"name": "shell", "arguments": '{"command": "ls"}'}}]}  # fmt: skip
LISTING = {"role": "tool", "tool_call_id": "c1", "content": "README.md configlib tests"}


def _rendered(messages: list[dict], tools) -> list[int]:
    """The prompt ids: the messages' tokens with the offered tools listed after the system text (as
    a chat template renders them: a tool set changed breaks the prefix there)."""
    ids = tokens(messages)
    if tools and messages and messages[0]["role"] == "system":
        at = ids.index(5) + 1  # after the system message's end id
        ids = (
            ids[:at]
            + [9]
            + [t for tool in tools for t in tokens([{"role": "tool", "content": tool["function"]["name"]}])[:-1]]
            + ids[at:]
        )
    return ids


class Trace:
    """Calls made one after the other (each 1 s, 0.3 s apart unless told), ids from their messages."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.clock = 1000.0

    def call(self, messages, reply, tools=TOOLS, gap=0.3, line=None, prompt=None, tool_call=None) -> Call:
        start = self.clock + gap
        self.clock = start + 1.0
        response = {"role": "assistant", "content": reply}
        if tool_call is not None:
            response["tool_calls"] = [{"id": "t9", "type": "function", "function": tool_call}]
        ids = _rendered(messages, tools) if prompt is None else prompt
        sampled = tokens([response])[1:-1]  # the reply's words and end id (the prompt ends with its role)
        call = Call(f"c{len(self.calls):02d}", "s", "trace.jsonl", line or len(self.calls) + 1, "test",
                    prompt_ids=np.array(ids, dtype=np.int32), sampled_ids=np.array(sampled, dtype=np.int32),
                    sampled_logprobs=np.full(len(sampled), -0.3), request_messages=messages,
                    response_message=response, tools=tools, finish_reason="stop",
                    timing={"started_at": start, "ended_at": self.clock})  # fmt: skip
        self.calls.append(call)
        return call

    def analysed(self):
        return analyse(SessionInput("s", self.calls))


def kind(r, node_id):
    miss = r.near_misses[r.index_of(node_id)]
    return miss.kind, r.calls[miss.earlier].node_id


def conversation(t: Trace, turns: int) -> list[dict]:
    """The agent conversation: the task, a steered ls, then ``turns`` replies each followed by a user note."""
    messages = [{"role": "system", "content": AGENT}, {"role": "user", "content": TASK}]
    t.call(messages, "", tool_call=LS["tool_calls"][0]["function"])
    messages = [*messages, LS, LISTING]
    for k in range(turns):
        reply = f"The loader reads settings without a default, step {k}."
        t.call(messages, reply)
        messages = [*messages, {"role": "assistant", "content": reply}, {"role": "user", "content": f"Go on {k}."}]
    return messages


def test_a_summary_request_with_the_tools_removed_is_a_side_call_not_resumed():
    """codex: the same conversation re-sent without tools, a compaction prompt appended, 0.3 s after
    the last call in the same process: the summary request, a side call of that conversation."""
    t = Trace()
    messages = conversation(t, 2)
    last = t.calls[-1]
    summary = [*messages, {"role": "user", "content": "CONTEXT CHECKPOINT COMPACTION: summarize the work so far."}]
    t.call(summary, "We fixed nothing yet; the loader lacks a default.", tools=None)
    r = t.analysed()
    assert kind(r, "c03") == (SIDE_CALL, last.node_id)
    evidence = r.near_misses[3].evidence
    assert (
        "all tools removed (apply_patch, read_file, shell)" in evidence
        and "user 'CONTEXT CHECKPOINT COMPACTION" in evidence
    )
    assert "0.3 s after c02 ended" in evidence and "the tool set changed" not in evidence


def test_chained_summary_calls_are_side_calls_of_the_conversation_they_summarise():
    """pi: a summarizer system prompt and the conversation pasted into one user message, twice (after
    the compacted conversation went on): the second summary is a side call of the conversation it
    pastes, never a compaction of the first summary call."""
    t = Trace()
    messages = conversation(t, 1)
    pasted = "\n".join(str(m["content"]) for m in messages[1:])
    t.call(
        [{"role": "system", "content": SUMMARIZER}, {"role": "user", "content": pasted}],
        "Summary one: the loader.",
        tools=None,
    )
    compacted = [{"role": "system", "content": AGENT}, {"role": "user", "content": "Summary one: the loader."},
                 {"role": "user", "content": TASK}]  # fmt: skip
    t.call(compacted, "Looking at the loader again now.")
    compacted = [*compacted, {"role": "assistant", "content": "Looking at the loader again now."},
                 {"role": "user", "content": "Go on once more."}]  # fmt: skip
    t.call(compacted, "The default is missing in load_config.")
    pasted2 = "\n".join(str(m["content"]) for m in compacted[1:]) + "\nThe default is missing in load_config."
    t.call(
        [{"role": "system", "content": SUMMARIZER}, {"role": "user", "content": pasted2}], "Summary two.", tools=None
    )
    r = t.analysed()
    assert kind(r, "c02") == (SIDE_CALL, "c01")  # the first summary
    assert kind(r, "c03") == (COMPACTION, "c01")  # the conversation it compacted, as it stood
    assert "c02's reply (a summary) put in the history's place" in r.near_misses[3].evidence
    assert kind(r, "c05") == (SIDE_CALL, "c04")  # the second summary: of the compacted conversation, not of c02
    assert "pasted into a user message" in r.near_misses[5].evidence


def test_a_re_compaction_beside_a_long_system_prompt_is_no_retry():
    """A long system prompt and a short summary: nearly every id shared, yet the history was
    replaced: a compaction, never a retry (no 2% rule), and nothing is said to be discarded."""
    t = Trace()
    system = {"role": "system", "content": AGENT + " " + " ".join(["Follow the repository's conventions."] * 80)}
    first = [system, {"role": "user", "content": "Summary: the loader lacks a default."}]
    t.call(first, "Reading the loader.")
    t.call(
        [*first, {"role": "assistant", "content": "Reading the loader."}, {"role": "user", "content": "ok"}], "Done."
    )
    again = [system, {"role": "user", "content": "Summary: the loader now has a default."}]
    t.call(again, "Checking the tests.")
    r = t.analysed()
    miss = r.near_misses[2]
    assert miss.kind == COMPACTION and miss.kind != RETRY
    assert miss.common_prefix > 0.9 * r.calls[2].n_prompt  # (the 2% rule would have said retry)
    assert "discarded" not in describe(r.calls, miss)


def test_a_resume_that_re_renders_the_first_message_is_resumed():
    """qwen-code --continue: the date reminder moved out of the first user message into one of its
    own, every reply kept: resumed, not compaction, and nothing said to be dropped."""
    t = Trace()
    reminder = "<system-reminder>Today's date is 2026-12-07.</system-reminder>"
    first = [{"role": "system", "content": AGENT}, {"role": "user", "content": f"{reminder}\n{TASK}"}]
    t.call(first, "I will look at the loader first.")
    history = [*first, {"role": "assistant", "content": "I will look at the loader first."}]
    t.call([*history, {"role": "user", "content": "Go on."}], "The settings key is read directly.")
    resumed = [first[0], {"role": "user", "content": reminder}, {"role": "user", "content": TASK},
               {"role": "assistant", "content": "I will look at the loader first."}, {"role": "user", "content": "Go on."},
               {"role": "assistant", "content": "The settings key is read directly."},
               {"role": "user", "content": "Go on, briefly."}]  # fmt: skip
    t.call(resumed, "Adding a default.", gap=4.0)
    r = t.analysed()
    assert kind(r, "c02") == (RESUMED, "c01")
    evidence = r.near_misses[2].evidence
    assert "its first message re-rendered" in evidence and "dropped" not in evidence
    assert "inserted 2 messages" in evidence  # the reminder on its own, and the new user message


def test_a_reply_merged_with_its_recovery_continuation_lives_on():
    """qwen-code: a reply cut at the cap, a recovery call continuing it, then the two merged into one
    assistant message: a rewritten replay of the cut reply (its text lives on), not a compaction,
    and the cut call is neither a discarded retry nor an unfinished attempt."""
    t = Trace()
    first = [{"role": "system", "content": AGENT}, {"role": "user", "content": TASK}]
    cut = t.call(first, "The test fails because the loader")
    cut.finish_reason = "length"
    recovery = [*first, {"role": "assistant", "content": "The test fails because the loader"},
                {"role": "user", "content": "Output token limit hit. Resume directly from where you stopped."}]  # fmt: skip
    t.call(recovery, " reads settings without a default.")
    merged = [*first, {"role": "assistant", "content": "The test fails because the loader reads settings without a default."},
              {"role": "user", "content": "Fix it."}]  # fmt: skip
    t.call(merged, "Adding the default.")
    r = t.analysed()
    miss = r.near_misses[2]
    assert (miss.kind, miss.earlier) == (REWRITTEN, 0)
    assert "reply replayed merged with the text that went on from it" in miss.evidence
    assert r.stats["n_discarded_retries"] == 0 and r.stats["n_unfinished"] == 0
    assert 0 in r.replayed_calls if hasattr(r, "replayed_calls") else True


def test_a_subagent_spawning_a_subagent_with_the_same_prompt_is_no_retry():
    """codex: the subagent's reply is a spawn_agent call whose arguments are its own task, so the
    next call has the identical prompt: a subagent it started, not a retry the harness gave up on."""
    t = Trace()
    conversation(t, 0)
    task = "List the files and say which one holds the loader."
    spawn = {"name": "spawn_agent", "arguments": f'{{"message": "{task}"}}'}
    t.call(t.calls[-1].request_messages + [LS, LISTING], "", tool_call=spawn)
    sub = [{"role": "system", "content": AGENT}, {"role": "user", "content": task}]
    t.call(sub, "", tool_call=spawn)
    t.call(sub, "", tool_call=spawn)
    r = t.analysed()
    assert kind(r, "c02") == (SUBAGENT, "c01")
    assert (r.near_misses[3].kind, r.near_misses[3].rule) == (SUBAGENT, SPAWNED)  # not a retry of c02
    assert "c02's reply calls 'spawn_agent' with this call's prompt as its arguments" in r.near_misses[3].evidence
    assert "unfinished_attempts" not in {f.code for f in r.findings} and r.stats["n_unfinished"] == 0
    assert describe(r.calls, r.near_misses[3]).startswith("subagent: c03 is the subagent c02's tool call started")


def test_inserted_messages_are_named_as_inserted():
    """A resume that adds messages drops none: the evidence names what it inserted."""
    t = Trace()
    first = [{"role": "system", "content": AGENT}, {"role": "user", "content": TASK}]
    t.call(first, "", tool_call=LS["tool_calls"][0]["function"])
    t.call([*first, LS, LISTING], "The loader is in configlib.")
    resumed = [{"role": "system", "content": AGENT + " Today is Tuesday."}, first[1], LS, LISTING,
               {"role": "assistant", "content": "The loader is in configlib."},
               {"role": "user", "content": "Continue from where you left off."}]  # fmt: skip
    t.call(resumed, "Where was I.", gap=90)
    r = t.analysed()
    miss = r.near_misses[2]
    assert (miss.kind, miss.earlier) == (RESUMED, 1)
    assert "inserted 1 message (user 'Continue from where you left off.')" in miss.evidence
    assert "dropped" not in miss.evidence and "the system prompt re-rendered" in miss.evidence


def test_a_dropped_tool_call_is_quoted_by_its_tool():
    """A compaction that drops a reply holding only a tool call quotes it by its tool, never as ''."""
    t = Trace()
    first = [{"role": "system", "content": AGENT}, {"role": "user", "content": TASK}]
    t.call(first, "", tool_call=LS["tool_calls"][0]["function"])
    t.call([*first, LS, LISTING], "The loader is in configlib.")
    t.call([*first, {"role": "user", "content": "Summary: the files were listed; the loader is in configlib."}], "Ok.")
    r = t.analysed()
    miss = r.near_misses[2]
    assert (miss.kind, miss.earlier) == (COMPACTION, 1)
    assert "assistant ''" not in miss.evidence and "assistant 'shell(…)'" in miss.evidence
    assert "inserted 1 message (user 'Summary: the files were listed; the loa…')" in miss.evidence


def test_the_choices_of_one_request_are_parallel_samples_not_retries():
    """vLLM n = 2: two choices of one request (one record, the loader's ids id and id#1)."""
    t = Trace()
    first = [{"role": "system", "content": AGENT}, {"role": "user", "content": TASK}]
    a = t.call(first, "Looking.", line=1)
    b = t.call(first, "Reading.", line=1, prompt=a.prompt_ids.tolist())
    b.node_id, b.timing = "c00#1", dict(a.timing)
    b.requested_params = {"n": 2}
    t.call([*first, {"role": "assistant", "content": "Reading."}, {"role": "user", "content": "ok"}], "Done.", line=2)
    r = t.analysed()
    miss = r.near_misses[1]
    assert (miss.kind, miss.earlier) == (PARALLEL_SAMPLE, 0) and miss.kind != RETRY
    assert describe(r.calls, miss) == (
        "parallel sample: c00#1 is another sample of c00's request [another choice of c00's request (one record, n > 1)]"
    )
    assert r.stats["n_discarded_retries"] in (0, 1)  # (the exact rules still mark c00 discarded)
