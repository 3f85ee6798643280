"""The story of a rollout (graph/analysis/story.py): conversations in the order they matter, every
call told once or folded into a line that says what it was, the break that began each conversation
in the near-miss analysis' own sentence, and each call's new messages as a readable chat."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import rollout_graph as rg
from rollout_graph.analysis.near_miss import describe
from rollout_graph.analysis.story import AGENT_WORK, PAGE_SIZE, SIDE, SUB, chapter, outline
from rollout_graph.core.records import NearMiss
from tests.browser.test_browser_dag import conversation_records
from tests.support.builders import rollout_of, rollout_of_tokens

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
HARNESSES = sorted((SAMPLES / "harnesses").glob("*.jsonl.gz"))


def rollouts(path: Path) -> list:
    return list(rg.load(path).values())


@pytest.fixture(scope="module")
def fix_config_bug():
    return next(r for r in rollouts(SAMPLES / "vllm" / "agent-rollouts.jsonl") if r.session_id == "fix-config-bug")


def test_the_conversations_come_in_the_order_they_matter(fix_config_bug):
    r = fix_config_bug
    story = outline(r)
    ids = r.node_ids
    kinds = [c.kind for c in story.conversations]
    assert kinds == [AGENT_WORK, AGENT_WORK, SUB, SIDE]  # the agent's, then a subagent, then a side call
    first, second, sub, side = story.conversations
    assert [ids[i] for i in first.calls][:3] == ["c03", "c04", "c05"] and first.opened_by is None
    assert first.title == "The agent · conversation 1 of 2"
    # the retry of the first call is folded before the call that re-sent its prompt
    (line,) = first.asides[r.index_of("c03")]
    assert (
        line.calls == (r.index_of("c01"),)
        and "the same prompt sent again" in line.text
        and "c03 continued" in line.text
    )
    # the second conversation began with a compaction (c18, discarded, then sent again as c19, which
    # the agent went on from): c18's break is the conversation's, in one sentence, with its evidence
    assert [ids[i] for i in second.calls][0] == "c19" and r.near_misses[second.root].kind == "retry"
    assert [a.text for a in second.asides[second.root]] == [
        "1 discarded attempt (c18): the same prompt sent again (a retry); c19 continued"
    ]
    miss = r.near_misses[r.index_of("c18")]
    assert second.opened_by.kind == "compaction" and second.opened_by.words == "the history was compacted"
    assert miss.evidence and second.opened_by.evidence == miss.evidence  # told once, on a line of its own
    assert second.opened_by.sentence + f" [{miss.evidence}]" == describe(r.calls, miss)
    assert [ids[i] for i in sub.calls] == ["c08", "c09"] and sub.opened_by.kind == "subagent"
    assert [ids[i] for i in side.calls] == ["c02"] and side.title == "Side call"


@pytest.mark.parametrize("path", [SAMPLES / "vllm" / "agent-rollouts.jsonl", *HARNESSES], ids=lambda p: p.name)
def test_every_call_is_told_once_or_folded_into_a_line(path):
    for r in rollouts(path):
        story = outline(r)
        told = [i for c in story.conversations for i in c.calls]
        assert len(told) == len(set(told))  # no call told twice
        folded = {i for c in story.conversations for lines in c.asides.values() for a in lines for i in a.calls}
        assert not folded & set(told)
        for i in range(len(r.calls)):
            conv, position = story.where(i)
            page = story.page_of(i)
            assert page == (conv, position // PAGE_SIZE)
            if i in told:
                assert story.conversations[conv].calls[position] == i
        # a discarded call is never told as the story's next step when a sibling continued
        assert not set(told) & set(r.topology.discarded)


def test_the_memory_agent_of_qwen_code_is_a_subagent_not_the_agent():
    (r,) = rollouts(SAMPLES / "harnesses" / "qwen-code-token-limit.jsonl.gz")
    story = outline(r)
    first = story.conversations[0]
    assert first.kind == AGENT_WORK and first.title == "The agent's conversation"
    assert [c.kind for c in story.conversations[1:]] == [SUB, SUB]  # the memory agent, and its retry
    assert story.conversations[2].opened_by.words == "the same prompt was sent again"


def test_a_chapter_folds_the_system_prompt_and_instructions_with_their_sizes():
    (r,) = rollouts(SAMPLES / "harnesses" / "qwen-code.jsonl.gz")
    story = outline(r)
    root, second = story.conversations[0].calls[:2]
    opening = chapter(r, root)
    system = opening.new[0]
    assert system.kind == "system" and system.folded and system.chars == 15_054
    assert system.size.startswith("15,054 characters")
    instructions = next(b for b in opening.new if b.kind == "instructions")
    assert instructions.folded and instructions.peek
    # the next call tells only what was added since: the tool's output, not the whole history again
    later = chapter(r, second)
    assert later.shared == len(r.calls[root].request_messages) + 1
    assert [b.title for b in later.new] == ["Tool output · run_shell_command"]
    # the call's reply names its tool call and what it is about, in one line
    calls = [t for b in opening.reply for t in b.tool_calls]
    assert calls and calls[0].name == "run_shell_command" and calls[0].peek
    assert calls[0].arguments.startswith("{\n")  # pretty-printed


def test_a_long_tool_output_is_folded_and_a_short_one_is_not():
    (r,) = rollouts(SAMPLES / "harnesses" / "codex.jsonl.gz")
    second = outline(r).conversations[0].calls[1]
    (tool,) = chapter(r, second).new
    assert tool.kind == "tool" and not tool.folded and tool.chars < 1_200
    opening = chapter(r, outline(r).conversations[0].calls[0])
    assert opening.new[0].title == "Developer instructions" and opening.new[0].folded


def test_a_child_that_arrived_before_its_parent_is_counted_in_its_conversation():
    # arrival: the grandchild first, then the root, then its child (concurrent calls, a late parent)
    r = rollout_of_tokens([([1, 2, 3, 4, 5, 6, 7], [8]), ([1, 2], [3]), ([1, 2, 3, 4, 5], [6])])
    assert r.topology.parents == [2, None, 1]
    (conv,) = outline(r).conversations
    assert conv.calls == [1, 2, 0] and conv.n_calls == 3  # nothing folded (was told as -1 folded)


def test_a_root_paired_with_a_call_that_arrived_after_it_is_not_said_to_begin_beside_it():
    # the first root said to be a subagent beside the second, which arrived after it (seen on a
    # synthetic 5,000-call trace): the story goes by its role, and names no break for it
    r = rollout_of_tokens([([1, 2], [3]), ([9, 9], [5])])
    r.near_misses[0] = NearMiss(0, 1, 1, 0, 0, 0.0, "prompt", "subagent", evidence="its own system prompt")
    first, second = outline(r).conversations
    assert (first.root, first.kind, first.opened_by) == (0, AGENT_WORK, None)
    assert second.root == 1


def test_a_call_with_token_ids_only_tells_its_context_span():
    r = rollout_of_tokens([([1, 2], [3]), ([1, 2, 3, 4, 5], [6])])
    ch = chapter(r, 1)
    (context,) = ch.new
    assert context.kind == "context" and context.title == "Context from the harness · 2 tokens"
    assert ch.reply[0].title == "Reply · 1 sampled tokens"


def test_the_outline_of_5000_calls_reads_no_message_and_is_quick():
    r = rollout_of(conversation_records(5000, session="big"))
    start = time.perf_counter()
    story = outline(r)
    took = time.perf_counter() - start
    assert sum(len(c.calls) for c in story.conversations) + len(story.folded) == 5000
    assert took < 2.0, took  # about 30 ms on a quiet machine (docs/user-guide.md, "The story")
    longest = max(story.conversations, key=lambda c: len(c.calls))
    assert longest.pages == -(-len(longest.calls) // PAGE_SIZE)
    start = time.perf_counter()
    chapters = [chapter(r, i) for i in longest.page(0)]
    assert len(chapters) == min(PAGE_SIZE, len(longest.calls)) and time.perf_counter() - start < 2.0
