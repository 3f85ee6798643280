"""The near-miss kinds that real harnesses produce, from hand-built token sequences whose answers are
known: identical-prompt re-sends, re-tokenized replays (with the real SmolLM2 tokenizer), breaks
that are not compactions, resumed conversations, subagents with fewer tools, side calls, the main
conversation after a title call; policy text re-inserted by the harness; unfinished attempts."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest
from tokenizers import Tokenizer

from rollout_graph.analysis.breaks import REASONS, fix_for, prefix_breaks, token_boundaries
from rollout_graph.analysis.decode import BUNDLED, SAMPLES, TokenizerDecoder
from rollout_graph.analysis.near_miss import (
    COMPACTION,
    NEW_CONVERSATION,
    RESUMED,
    RETOKENIZED,
    RETRY,
    REWRITTEN,
    SIDE_CALL,
    SUBAGENT,
)
from rollout_graph.analysis.origin import HARNESS, text_origin
from rollout_graph.core.records import SessionInput
from rollout_graph.pipeline import analyse
from rollout_graph.reports import export
from rollout_graph.reports.explain import explain_text, origin_lines
from tests.support.builders import calls_from_tokens

TOKENIZER = SAMPLES / "SmolLM2-135M-Instruct" / "tokenizer.json"
SYSTEM = list(range(100, 140))
USER = [7, 8, 9]
GEN = [1, 5]
END, NL = 2, 3
TOOLS = [{"type": "function", "function": {"name": n}} for n in ("bash", "read", "edit")]


@pytest.fixture(scope="module")
def hf():
    return Tokenizer.from_file(str(TOKENIZER))


@pytest.fixture(scope="module")
def decoder():
    return TokenizerDecoder(TOKENIZER, BUNDLED)


def build(spec, messages=None, tools=None, decoder=None, finish=None):
    calls = calls_from_tokens(spec)
    for k, call in enumerate(calls):
        if messages is not None:
            call.request_messages = messages[k]
        if tools is not None:
            call.tools = tools[k]
        if finish is not None:
            call.finish_reason = finish[k]
    return analyse(SessionInput("s", calls), decoder=decoder)


def kind_of(r, node_id):
    miss = r.near_misses[r.index_of(node_id)]
    return r.calls[miss.other].node_id, miss.kind


def test_identical_prompt_resend_is_a_retry_even_when_another_sibling_continued():
    """qwen-code: a length-cut turn re-sent with the identical prompt, then the harness went on with
    another prompt. Both re-sends are retries of each other, not compactions of the one that continued."""
    parent = SYSTEM + USER + GEN
    resend = parent + [50, 51, END, NL] + [1, 6, 60, END, NL] + GEN
    other = parent + [50, 51, END, NL] + [1, 6, 61, 62, END, NL] + GEN
    spec = [
        (parent, [50, 51, END]),
        (resend, [70, 71]),
        (resend, [72, 73]),
        (other, [74, END]),
        (other + [74, END], [9]),
    ]
    messages = [[{"role": "system", "content": "agent"}]] * 5
    r = build(spec, messages, finish=[None, "length", "length", "stop", "stop"])
    assert r.topology.discarded == {1: 3, 2: 3}
    assert kind_of(r, "n2") == ("n1", RETRY) and 1 not in r.near_misses  # the later re-send names the earlier
    assert (r.replaced_by[1].later, r.replaced_by[1].kind) == (2, RETRY)  # n1 was replaced by its re-send
    assert r.replaced_by[2].later == 3  # n2 by the sibling that went on
    assert r.stats["n_discarded_retries"] == 2 and r.stats["n_broken_replays"] == 0


def test_an_identical_child_resent_when_none_continued_is_a_retry():
    parent = SYSTEM + USER + GEN
    r = build([(SYSTEM + USER, GEN), (parent, [50, 51]), (parent, [52])], finish=["stop", "length", "stop"])
    assert r.topology.unfinished == [[1, 2]] and r.topology.discarded == {}
    assert kind_of(r, "n2") == ("n1", RETRY) and 1 not in r.near_misses


def test_an_identical_root_resent_when_none_continued_is_a_retry():
    spec = [(SYSTEM + USER + GEN, [50]), (SYSTEM + USER + GEN, [51])]
    r = build(spec)
    assert r.topology.unfinished == [[0, 1]]
    assert kind_of(r, "n1") == ("n0", RETRY)


def retokenized_spec(hf):
    """The model sampled ' py' + 'test' (non-canonical); the harness replayed the text, which the
    engine tokenized canonically as ' pytest'."""
    im_end = hf.token_to_id("<|im_end|>")
    first = hf.encode("<|im_start|>user\nrun the tests<|im_end|>\n<|im_start|>assistant\n").ids
    sampled = hf.encode("run py").ids + hf.encode("test").ids + [im_end]
    replay = hf.encode("run pytest").ids + [im_end]
    tool = hf.encode("\n<|im_start|>tool\n3 passed<|im_end|>\n<|im_start|>assistant\n").ids
    assert sampled != replay  # the premise: the same text, other ids
    return [(first, sampled), (first + replay + tool, hf.encode("done").ids + [im_end])]


def test_a_replay_that_only_re_tokenized_the_text_is_retokenized(hf, decoder):
    r = build(retokenized_spec(hf), decoder=decoder)
    miss = r.near_misses[1]
    assert (miss.kind, miss.where, miss.text_checked) == (RETOKENIZED, "sampled", True)
    sampled, replayed = token_boundaries(r, miss, decoder)
    assert "".join(sampled) == "".join(replayed) and sampled != replayed
    assert "|".join(sampled).endswith("py|test") and replayed[-1].endswith("pytest")
    assert fix_for(r, miss).startswith("replay token ids, not text")
    assert r.stats["n_broken_replays"] == 1
    text = explain_text(r, decoder)
    assert f"n1: {REASONS[RETOKENIZED]}" in text
    assert "|test' vs replayed '" in text and "fix: replay token ids, not text" in text
    finding = next(f for f in r.findings if f.code == "retokenized_replay")
    assert "1 calls replay the model's own reply" in finding.detail and "history_rewritten" not in {
        f.code for f in r.findings
    }


def test_without_a_tokenizer_a_retokenization_stays_a_rewrite_and_says_so(hf):
    r = build(retokenized_spec(hf))
    miss = r.near_misses[1]
    assert (miss.kind, miss.text_checked) == (REWRITTEN, False)
    assert "no tokenizer" in prefix_breaks(r)[0].reason


def test_a_real_edit_with_a_tokenizer_is_not_retokenized(hf, decoder):
    im_end = hf.token_to_id("<|im_end|>")
    first = hf.encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n").ids
    sampled = hf.encode("ls -la STOP").ids + [im_end]
    replay = hf.encode("ls -la").ids + [im_end]  # the stop string cut
    r = build([(first, sampled), (first + replay + hf.encode("\n").ids, [5])], decoder=decoder)
    miss = r.near_misses[1]
    assert (miss.kind, miss.text_checked) == (REWRITTEN, True)


def test_stop_string_cut_names_the_fix():
    first = SYSTEM + USER + GEN
    r = build([(first, [50, 51, 52, 99]), (first + [50, 51, 52, END, NL] + GEN, [70])], finish=["stop", "stop"])
    assert fix_for(r, r.near_misses[1]).startswith("keep the stop string")


def test_a_break_inside_the_sampled_span_is_never_a_compaction():
    """The old classifier said compaction whenever the system messages matched."""
    first = SYSTEM + USER + GEN
    sampled = [50, 51, 52, 53, 54, 55, 56, 57, 58, 59]
    second = first + [50, 80, 81, END, NL] + GEN  # one token kept, the rest replaced
    messages = [[{"role": "system", "content": "agent"}]] * 2
    r = build([(first, sampled), (second, [70])], messages)
    assert kind_of(r, "n1") == ("n0", REWRITTEN)


def test_compaction_needs_the_break_inside_the_earlier_prompt_and_the_same_tools():
    messages = [
        [{"role": "system", "content": "agent"}, {"role": "user", "content": "fix the bug"}],
        [{"role": "system", "content": "agent"}, {"role": "user", "content": "Summary of earlier work: ..."}],
    ]
    r = build([(SYSTEM + USER + GEN, [50, END]), (SYSTEM + [11, 12] + GEN, [51])], messages, tools=[TOOLS, TOOLS])
    assert kind_of(r, "n1") == ("n0", COMPACTION)


def test_opencode_subagent_same_system_text_fewer_tools_is_a_subagent():
    messages = [
        [{"role": "system", "content": "You are opencode."}, {"role": "user", "content": "fix the bug"}],
        [{"role": "system", "content": "You are opencode."}, {"role": "user", "content": "find where config loads"}],
    ]
    r = build([(SYSTEM + USER + GEN, [50, END]), (SYSTEM + [21, 22] + GEN, [51])], messages, tools=[TOOLS, TOOLS[:1]])
    assert kind_of(r, "n1") == ("n0", SUBAGENT)


def test_claude_code_continue_is_a_resumed_conversation():
    """--continue: the system prompt re-rendered (another date), a recovery message dropped, the
    same conversation sent on."""
    history = [
        {"role": "user", "content": "fix the bug"},
        {"role": "assistant", "content": "Looking."},
        {"role": "user", "content": "[Request interrupted by user]"},
    ]
    messages = [
        [{"role": "system", "content": "Today is Monday."}, *history],
        [
            {"role": "system", "content": "Today is Tuesday."},
            history[0],
            history[1],
            {"role": "user", "content": "go on"},
        ],
    ]
    r = build(
        [(SYSTEM + USER + GEN, [50, END]), (SYSTEM[:5] + [99] + USER + [60] + GEN, [51])],
        messages,
        tools=[TOOLS, TOOLS],
    )
    assert kind_of(r, "n1") == ("n0", RESUMED)
    assert fix_for(r, r.near_misses[1]).startswith("resume from the recorded token ids")


def test_title_call_first_then_the_main_conversation():
    title = [[{"role": "system", "content": "Write a title"}]]
    agent = [[{"role": "system", "content": "agent"}]] * 3
    main = SYSTEM + USER + GEN
    spec = [([1, 200, 201] + GEN, [60, END]), (main, [50, END]), (main + [50, END, NL] + GEN, [51, END]),
            (main + [50, END, NL] + GEN + [51, END, NL] + GEN, [52])]  # fmt: skip
    r = build(spec, title + agent, tools=[None, TOOLS, TOOLS, TOOLS])
    assert 0 not in r.near_misses and 0 not in r.replaced_by  # the title call came first: nothing before it
    assert kind_of(r, "n1") == ("n0", NEW_CONVERSATION)
    assert SIDE_CALL not in {m.kind for m in r.near_misses.values()}


def test_policy_text_re_inserted_by_the_harness_is_credited_by_text(hf, decoder):
    """A subagent's answer returned to the main agent as a tool result: the same text, other tokens
    and another place, so exact token origin credits the harness; text origin credits the subagent."""
    im_end = hf.token_to_id("<|im_end|>")
    answer = "The loader reads CONFIG_PATH but never expands the home directory."
    sub_prompt = hf.encode("<|im_start|>system\nYou review code.<|im_end|>\n<|im_start|>assistant\n").ids
    main_prompt = hf.encode("<|im_start|>system\nYou fix bugs.<|im_end|>\n<|im_start|>user\nfix it<|im_end|>\n").ids
    returned = hf.encode(f"<|im_start|>tool\nsubagent says: {answer}<|im_end|>\n<|im_start|>assistant\n").ids
    spec = [(main_prompt, hf.encode("ok").ids + [im_end]), (sub_prompt, hf.encode(answer).ids + [im_end]),
            (main_prompt + returned, [5])]  # fmt: skip
    r = build(spec, decoder=decoder)
    origin = text_origin(r, 2, decoder)
    credited = np.flatnonzero(origin == 1)
    assert credited.size and decoder.text(r.calls[2].prompt_ids[credited]).strip() == answer
    assert (origin[: len(main_prompt)] == HARNESS).all()
    lines = origin_lines(r, 2, decoder)
    assert f"{credited.size} are policy text re-inserted by the harness (n1 {credited.size})" in lines[1]
    assert "not checked (no tokenizer" in origin_lines(r, 2)[1]


def test_unfinished_attempts_are_named_and_can_be_left_out(tmp_path):
    """mini-swe-agent: three answers without a tool call, each dropped and followed by a format
    error, then it gave up: three childless siblings, none continued."""
    parent = SYSTEM + USER + GEN
    spec = [(SYSTEM + USER, GEN), (parent, [50]), (parent + [60], [51]), (parent + [61], [52])]
    r = build(spec)
    assert r.topology.discarded == {} and r.topology.unfinished == [[1, 2, 3]]
    finding = next(f for f in r.findings if f.code == "unfinished_attempts")
    assert finding.level == "WARN" and "(n1, n2, n3)" in finding.detail
    assert r.stats["n_unfinished"] == 3
    assert len(export.training_rows(r)) == 3 and export.training_rows(r, drop_unfinished=True) == []
    assert export.trace_entries(r, drop_unfinished=True) == [] or all(
        e["call_id"] == "n0" for e in export.trace_entries(r, drop_unfinished=True)
    )


def test_n_choices_of_one_request_are_not_unfinished_attempts():
    calls = calls_from_tokens([(SYSTEM, [50]), (SYSTEM, [51])])
    calls[1].line = calls[0].line  # one request, n = 2
    r = analyse(SessionInput("s", calls))
    assert r.topology.unfinished == [] and "unfinished_attempts" not in {f.code for f in r.findings}


def test_export_drop_unfinished_and_contract(tmp_path):
    from tests.support.builders import Turn, vllm_chat, write

    parent = SYSTEM + USER + GEN
    records = [vllm_chat(Turn("p", SYSTEM + USER, GEN))] + [
        vllm_chat(Turn(f"a{k}", parent + extra, [50 + k])) for k, extra in enumerate(([], [60], [61]))
    ]
    path = write(tmp_path / "t.jsonl", records)

    def cli(*args):
        out = subprocess.run([sys.executable, "-m", "rollout_graph", *args], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return out.stdout

    doc = json.loads(cli("inspect", str(path), "--json"))
    nodes = {n["node_id"]: n for n in doc["sessions"][0]["nodes"]}
    assert [k for k, n in nodes.items() if n["unfinished"]] == ["a0", "a1", "a2"]
    assert doc["sessions"][0]["stats"]["n_unfinished"] == 3
    cli("export", str(path), "--out", str(tmp_path / "all.jsonl"))
    cli("export", str(path), "--out", str(tmp_path / "kept.jsonl"), "--drop-unfinished")
    assert len((tmp_path / "all.jsonl").read_text().splitlines()) == 3
    assert (tmp_path / "kept.jsonl").read_text() == ""


def test_explain_calls_only_identical_prompt_siblings_rivals():
    parent = SYSTEM + USER + GEN
    replay = parent + [50, 51, 98, END, NL] + GEN
    # n1 sampled, then n2 is a broken replay of it that continued: same parent, different prompts
    spec = [(SYSTEM + USER, GEN), (parent, [50, 51, 99]), (parent + [50, 51, 98], [END]), (replay, [70])]
    r = build(spec)
    assert r.topology.forks == [0]
    from rollout_graph.analysis.decode import TraceTextDecoder

    text = explain_text(r, TraceTextDecoder({}))
    assert "n1 vs n2" not in text
    assert "n1 is no rival of n2 (different prompts): broken replay (rewritten): n2 replays n1's reply" in text
    assert "broken replays (the model's own reply replayed so that the token prefix broke): 1" in text


def test_near_miss_view_shows_both_token_cuttings_escaped(hf, decoder):
    from rollout_graph.ui.panels.near_miss import boundaries_html, summary
    from rollout_graph.ui.panels.overview import headline_tiles

    r = build(retokenized_spec(hf), decoder=decoder)
    miss = r.near_misses[1]
    page = boundaries_html(r, miss, decoder)
    assert '<span class="t">test</span>' in page and '<span class="t">·pytest</span>' in page  # whitespace shown
    assert re.search(r'<span class="i">\d+</span>', page) and "<script" not in page  # each box with its id
    assert '<span class="t"> pytest</span>' in boundaries_html(r, miss, decoder, whitespace=False)
    assert "Fix: replay token ids, not text" in summary(r, miss)
    tiles = {label: value for label, value, _ in headline_tiles(r)}
    assert (tiles["retries"], tiles["broken replays"]) == (0, 1)
