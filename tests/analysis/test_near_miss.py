"""Near-miss links on hand-built cases whose answers are known, and on the bundled samples."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rollout_graph.analysis.near_miss import COMPACTION, NEW_CONVERSATION, RETRY, REWRITTEN, SIDE_CALL, SUBAGENT
from rollout_graph.core.records import SessionInput
from rollout_graph.pipeline import analyse
from tests.support.builders import calls_from_tokens, write

SYSTEM = list(range(100, 140))  # 40 tokens of system prompt
USER = [7, 8, 9]
GEN = [1, 5]  # "<|im_start|>assistant\n"
END, NL, TOOL = 2, 3, [1, 6]  # "<|im_end|>", "\n", "<|im_start|>tool\n"


def rollout(spec, messages=None):
    calls = calls_from_tokens(spec)
    for call, msgs in zip(calls, messages or [], strict=False):  # messages may cover only the first calls
        call.request_messages = msgs
    return analyse(SessionInput("s", calls))


def miss_of(r, node_id):
    index = r.index_of(node_id)
    miss = r.near_misses[index]
    return r.calls[miss.other].node_id, miss.kind, miss.where, round(miss.kept, 2), miss.common_prefix


def test_stop_string_tail_makes_each_step_a_root_and_is_a_rewritten_continuation():
    first = SYSTEM + USER + GEN
    sampled = [50, 51, 52, 53, 99]  # 99: the token holding the stop string
    replayed = [50, 51, 52, 53, 98]  # the harness replays the text without it (and its own tag)
    second = first + replayed + [END, NL] + TOOL + [60, 61] + [END, NL] + GEN
    r = rollout([(first, sampled), (second, [70, END])])
    assert r.topology.roots == [0, 1]  # exact linking: a new root
    assert miss_of(r, "n1") == ("n0", REWRITTEN, "sampled", 0.8, len(first) + 4)
    finding = next(f for f in r.findings if f.code == "history_rewritten")
    assert (
        finding.level == "WARN"
        and "1 broken replays: calls replayed a rewritten reply of the model (1 became new roots" in finding.detail
    )


def test_appended_closing_tag_merging_with_the_last_token():
    first = SYSTEM + USER + GEN
    sampled = [50, 51, 52, 40]  # 40: "c"
    second = first + [50, 51, 52, 41, 42] + [END, NL] + GEN  # "c</tool>" tokenized as 41 ("c<") 42
    r = rollout([(first, sampled), (second, [70])])
    assert miss_of(r, "n1")[:2] == ("n0", REWRITTEN)


def test_rewrite_that_makes_the_original_look_like_a_discarded_retry():
    parent = SYSTEM + USER + GEN
    sampled = [50, 51, 52, 53, 99]
    child = parent + [50, 51, 52, 53, 98, END, NL] + TOOL + [60, END, NL] + GEN
    grandchild = child + [70, END, NL] + GEN
    # n0 ends at `parent`, so both n1 (original) and n2 (replay) are its children; n2 continued.
    r = rollout([(SYSTEM + USER, GEN), (parent, sampled), (child, [70, END]), (grandchild, [80])])
    assert r.topology.discarded == {1: 2}
    assert miss_of(r, "n2") == ("n1", REWRITTEN, "sampled", 0.8, len(parent) + 4)  # the later call names the earlier
    assert "n1" not in [r.calls[i].node_id for i in r.near_misses]  # nothing came before it
    replaced = r.replaced_by[1]  # which later call replayed it, kept apart
    assert (replaced.node, replaced.later, replaced.kind) == (1, 2, REWRITTEN)
    detail = next(f.detail for f in r.findings if f.code == "history_rewritten")
    assert "1 made the original call look discarded); 5 sampled tokens are left only in discarded rows" in detail


def test_reasoning_dropped_from_history():
    first = SYSTEM + USER + GEN
    sampled = [30, 31, 32, 33, 31, 50, 51, 52, 53, 54, 55, 56, 57]  # <think> ... </think> answer
    second = first + [50, 51, 52, 53, 54, 55, 56, 57, END, NL] + TOOL + [60, END, NL] + GEN
    r = rollout([(first, sampled), (second, [70])])
    other, kind, where, kept, shared = miss_of(r, "n1")
    assert (other, kind, where, kept, shared) == ("n0", REWRITTEN, "sampled", 0.0, len(first))


def test_reserialised_tool_call_json():
    first = SYSTEM + USER + GEN
    sampled = [50, 51, 80, 81, 82, 83, 84, 85, END]  # {"cmd": "ls"} as the model wrote it
    second = first + [50, 51, 80, 86, 83, 84, 85, END, NL] + TOOL + [60, END, NL] + GEN  # {"cmd":"ls"}
    r = rollout([(first, sampled), (second, [70])])
    assert miss_of(r, "n1")[:3] == ("n0", REWRITTEN, "sampled")


def test_a_genuine_retry_is_a_retry():
    parent = SYSTEM + USER + GEN
    r = rollout([(SYSTEM + USER, GEN), (parent, [50, 51]), (parent, [52, 53]), (parent + [52, 53, END, NL] + GEN, [9])])
    assert r.topology.discarded == {1: 2}
    assert miss_of(r, "n2")[:2] == ("n1", RETRY) and 1 not in r.near_misses
    assert (r.replaced_by[1].later, r.replaced_by[1].kind) == (2, RETRY)
    assert not [f for f in r.findings if f.code == "history_rewritten"]


def test_compaction_keeps_the_system_prompt_and_replaces_history():
    long_chain = SYSTEM + USER + GEN
    compacted = SYSTEM + [11, 12, 13, 14] + GEN  # system prompt, then a summary instead of the history
    r = rollout([(long_chain, [50, 51, END]), (compacted, [52])])
    assert miss_of(r, "n1")[:3] == ("n0", COMPACTION, "prompt")


def test_subagent_with_its_own_system_prompt_is_a_subagent():
    messages = [[{"role": "system", "content": "agent"}]] * 2 + [[{"role": "system", "content": "reviewer"}]] * 2
    sub = [1] + list(range(200, 240)) + GEN
    main = SYSTEM + USER + GEN
    spec = [(main, [50, END]), (main + [50, END, NL] + GEN, [52]), (sub, [51, END]), (sub + [51, END, NL] + GEN, [53])]
    r = rollout(spec, messages)
    assert miss_of(r, "n2")[1] == SUBAGENT  # it continues: a conversation of its own


def test_a_single_call_with_its_own_system_prompt_is_a_side_call():
    messages = [[{"role": "system", "content": "agent"}], [{"role": "system", "content": "title"}]]
    r = rollout([(SYSTEM + USER + GEN, [50, END]), ([1] + list(range(200, 240)) + GEN, [51])], messages)
    assert miss_of(r, "n1")[:2] == ("n0", SIDE_CALL)


def test_same_system_message_after_a_single_call_without_tools_is_no_compaction():
    """A single call without tools (a root nothing continued) is no conversation to compact: two
    calls sharing only a system prompt are calls of their own (docs/semantics.md, row 12)."""
    messages = [[{"role": "system", "content": "agent"}], [{"role": "system", "content": "agent"}]]
    r = rollout([([1, 2, 3, 4], [50]), ([1, 2, 9, 9, 9], [51])], messages)
    assert miss_of(r, "n1")[1] == SIDE_CALL


def test_near_misses_never_change_the_exact_graph():
    first = SYSTEM + USER + GEN
    second = first + [50, 51, 98, END, NL] + GEN
    spec = [(first, [50, 51, 99]), (second, [70])]
    r = rollout(spec)
    assert r.topology.parents == [None, None]
    assert [s.n_trainable for s in r.sequences] == [3, 1]


@pytest.fixture(scope="module")
def samples():
    from rollout_graph.ingest.load.files import load_paths

    return analyse(
        load_paths([Path(__file__).resolve().parents[2] / "sample_traces" / "vllm"]).sessions["fix-config-bug"]
    )


def test_sample_trace_near_misses(samples):
    kinds = {samples.calls[i].node_id: m.kind for i, m in samples.near_misses.items()}
    assert "c02" not in kinds  # the title call arrived first: nothing before it to name
    assert kinds["c01"] == NEW_CONVERSATION  # the main conversation's first attempt, begun after the title call
    assert kinds["c03"] == RETRY and kinds["c19"] == RETRY  # resampled first calls, each naming the earlier one
    assert kinds["c08"] == SUBAGENT  # the reviewer subagent
    assert kinds["c18"] == COMPACTION  # the history rewritten by a summary
    replaced = {samples.calls[d].node_id: m.kind for d, m in samples.replaced_by.items()}
    assert all(replaced[samples.calls[d].node_id] == RETRY for d in samples.topology.discarded)
    assert REWRITTEN not in kinds.values() and SIDE_CALL not in kinds.values()
    # causality: every near miss names a call that arrived before it
    assert all(m.earlier < m.later == i for i, m in samples.near_misses.items())


def test_contract_carries_near_miss_keys(tmp_path):
    from tests.support.builders import Turn, vllm_chat

    first = SYSTEM + USER + GEN
    records = [
        vllm_chat(Turn("a", first, [50, 51, 52, 99])),
        vllm_chat(Turn("b", first + [50, 51, 52, 98, END, NL] + GEN, [70])),
    ]
    path = write(tmp_path / "t.jsonl", records)
    doc = json.loads(
        subprocess.run(
            [sys.executable, "-m", "rollout_graph", "inspect", str(path), "--json"], capture_output=True, text=True
        ).stdout
    )
    nodes = {n["node_id"]: n for n in doc["sessions"][0]["nodes"]}
    assert "near_miss" not in nodes["a"]
    miss = nodes["b"]["near_miss"]
    assert {k: miss[k] for k in ("node_id", "common_prefix", "kept", "kind", "where", "text_checked")} == {
        "node_id": "a",
        "common_prefix": len(first) + 3,
        "kept": 0.75,
        "kind": REWRITTEN,
        "where": "sampled",
        "text_checked": False,
    }
    # added keys (issue 23): both ends, the evidence and the one sentence tail and explain print
    assert (miss["earlier_id"], miss["later_id"], miss["evidence"]) == ("a", "b", "the token ids alone")
    assert miss["why"].startswith("broken replay (rewritten): b replays a's reply cut at token")
    assert nodes["b"]["unfinished"] is False
    assert "history_rewritten" in {f["code"] for f in doc["sessions"][0]["findings"]}


def per_turn_roots_rollout():
    """Four turns of a harness that cuts the stop-string token from every reply it replays."""
    spec, prompt = [], SYSTEM + USER + GEN
    for turn in range(4):
        sampled = [50 + turn, 60 + turn, 99]
        spec.append((list(prompt), sampled))
        prompt = prompt + [50 + turn, 60 + turn, 98, END, NL] + TOOL + [70 + turn, END, NL] + GEN
    return rollout(spec)


def test_views_banner_break_and_dashed_edges():
    from rollout_graph.analysis.decode import TraceTextDecoder
    from rollout_graph.ui.builders.dag import CALLS, dag_figure, line_segments
    from rollout_graph.ui.panels.near_miss import banner, break_html, summary

    r = per_turn_roots_rollout()
    assert r.topology.roots == [0, 1, 2, 3]
    assert banner(r).startswith(
        "**This harness breaks its replays:** 3 of the 4 roots begin with a broken replay of the model's own reply: "
        "3 rewrite an earlier reply"
    )
    miss = r.near_misses[1]
    assert (
        "shares 47 tokens with the end of n0; the break falls inside its sampled span, after 67% of its 3"
        in summary(r, miss)
    )
    page = break_html(r, miss, TraceTextDecoder({99: "<stop>", 98: "</tool>"}))
    assert "&lt;stop&gt;" in page and "&lt;/tool&gt;" in page and "<stop>" not in page
    # both sides as boxes with their ids, the first differing one marked; the diff strikes only what differs
    assert 'class="rg-box first"' in page and '<span class="t">&lt;stop&gt;</span><span class="i">99</span>' in page
    assert '<span class="t">&lt;/tool&gt;</span><span class="i">98</span>' in page
    assert '<span class="del">&lt;stop&gt;</span><span class="ins">&lt;/tool&gt;' in page
    figure = dag_figure(r, near_misses=True)
    dashed = next(shape for shape in figure.layout.shapes if shape.name == "near misses")
    assert dashed.line.dash == "dash"
    assert line_segments(figure, "near misses") == [((0, 0), (1, 0)), ((1, 0), (2, 0)), ((2, 0), (3, 0))]
    # laid out as one line of continuations, not a column of unrelated roots
    assert len(set(figure.data[CALLS].y)) == 1 and list(figure.data[CALLS].x) == [0, 1, 2, 3]
    plain = dag_figure(r)
    assert not line_segments(plain, "near misses") and list(plain.data[CALLS].x) == [0, 0, 0, 0]


def test_app_shows_the_banner_and_the_break(monkeypatch, tmp_path):
    from tests.support.apptest import app, html_of, no_errors
    from tests.support.builders import Turn, vllm_chat

    r = per_turn_roots_rollout()
    records = [vllm_chat(Turn(c.node_id, c.prompt_ids.tolist(), c.sampled_ids.tolist())) for c in r.calls]
    write(tmp_path / "rewrites.jsonl", records)
    at = app(monkeypatch, tmp_path, session="s1", node="n2")
    no_errors(at)
    assert at.warning and "This harness breaks its replays" in at.warning[0].value
    assert any(e.label.startswith("Near miss: n2 rewrites n1") for e in at.expander)
    assert 'class="rg-box first"' in html_of(at) and '<span class="ins">' in html_of(at)


def test_a_child_that_arrived_before_its_root_is_not_what_the_root_nearly_continued():
    """Concurrent calls reach the trace out of order: the child (extending the root exactly) was
    written first. The root shares its whole prompt with that child's, yet it is the child's parent,
    not a continuation of it; the DAG, laying near misses out as continuations, must not loop."""
    from rollout_graph.ui.builders.dag import dag_figure

    first = SYSTEM + USER + GEN
    second = SYSTEM + [11, 12] + GEN  # another conversation, the same system prompt
    spec = [
        (first, [20, 21, END]),
        (second + [30, 31, END, NL] + TOOL + [40] + GEN, [50, END]),  # the child, first in the file
        (second, [30, 31, END]),  # its parent, written after it
    ]
    r = rollout(spec)
    assert r.topology.parents[1] == 2
    assert 2 not in r.near_misses or r.near_misses[2].earlier != 1
    for near_misses in (True, False):
        figure = dag_figure(r, near_misses=near_misses, collapse=True)
        assert sorted(figure.data[1].customdata) == [0, 1, 2]


def test_layout_parents_lose_only_the_edge_that_closes_a_cycle():
    from rollout_graph.ui.builders.dag import _acyclic

    assert _acyclic({1: 2, 2: 3, 3: 1, 4: 1, 5: None}) == {1: 2, 2: 3, 3: None, 4: 1, 5: None}
    assert _acyclic({1: None, 2: 1, 3: 2}) == {1: None, 2: 1, 3: 2}
    assert _acyclic({7: 7}) == {7: None}
