"""Search: the library (each place a text can be, positions, snippets, first entry) and the
`rollout-graph search` command (text and JSON output, regex, no hit, bad regex exit 2)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rollout_graph.analysis.decode import TraceTextDecoder, trace_token_texts
from rollout_graph.analysis.search import (
    CONTEXT,
    MESSAGE,
    RESPONSE,
    SAMPLED,
    Query,
    SearchError,
    SearchIndex,
    first_entered,
    search,
    strip_position,
)
from tests.support.builders import TOOLS, Turn, rollout_of, vllm_chat, write

SYSTEM = {"role": "system", "content": "You are a coding agent."}
USER = {"role": "user", "content": "Please run the tests."}
CALL_LS = {
    "role": "assistant",
    "content": None,
    "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "run_pytest", "arguments": '{"k": "x"}'}}],
}
RESULT = {"role": "tool", "tool_call_id": "t1", "content": "Traceback (most recent call last): boom"}

TURNS = [
    # a0 -> a1 -> a2 is the agent's chain; b0 is a separate root that samples token 5
    Turn("a0", [1, 2], [3, 4], messages=[SYSTEM, USER], reply="I will call run_pytest", tools=TOOLS),
    Turn("b0", [9], [5], messages=[{"role": "user", "content": "a title please"}], reply="Title: tests"),
    Turn(
        "a1",
        [1, 2, 3, 4, 5],
        [6],
        messages=[SYSTEM, USER, CALL_LS, RESULT],
        reply="The traceback says boom",
        tools=TOOLS,
    ),
    Turn("a2", [1, 2, 3, 4, 5, 6, 7], [8], messages=[SYSTEM, USER, CALL_LS, RESULT, USER], reply="done", tools=TOOLS),
]


def records():
    return [vllm_chat(t, token_text=True) for t in TURNS]


@pytest.fixture
def rollout():
    return rollout_of(records())


def run_search(rollout, text, **kw):
    decoder = TraceTextDecoder(trace_token_texts(rollout.calls))
    return search(SearchIndex(rollout, decoder), Query.compile(text, **kw))


def test_message_hits_name_the_message_and_role(rollout):
    hits = [h for h in run_search(rollout, "Traceback") if h.where == MESSAGE]
    assert [(h.node_id, h.message_index, h.role) for h in hits] == [("a1", 3, "tool"), ("a2", 3, "tool")]
    assert hits[0].char_offset == 0 and hits[0].snippet.startswith("Traceback (most recent")
    first = first_entered(hits)
    assert first is not None and first.node_id == "a1" and first.message_index == 3


def test_tool_call_names_are_searched(rollout):
    hits = run_search(rollout, "run_pytest")
    assert {(h.node_id, h.where) for h in hits} == {("a0", RESPONSE), ("a1", MESSAGE), ("a2", MESSAGE)}
    assert next(h for h in hits if h.node_id == "a1").message_index == 2


def test_response_hits_and_counts(rollout):
    hits = run_search(rollout, "boom")
    response = [h for h in hits if h.where == RESPONSE]
    assert [h.node_id for h in response] == ["a1"]
    assert response[0].char_offset == len("The traceback says ")
    # a2's request holds the tool result once
    assert next(h for h in hits if h.node_id == "a2").count == 1
    assert run_search(rollout, "Please run")[-1].count == 2  # a2 repeats the user message


def test_sampled_and_context_spans_give_token_positions(rollout):
    hits = run_search(rollout, "tok5")
    got = {(h.node_id, h.where, h.token_index) for h in hits}
    # b0 sampled token 5; a1's context span (after a0's end [1, 2, 3, 4]) is token 5 at prompt position 4
    assert got == {("b0", SAMPLED, 0), ("a1", CONTEXT, 4)}
    a1 = next(h for h in hits if h.node_id == "a1")
    assert strip_position(rollout, a1) == 0  # the first token of a1's context span in the token view
    b0 = next(h for h in hits if h.node_id == "b0")
    assert strip_position(rollout, b0) == 1  # a root's context span is its whole prompt ([9])
    second = run_search(rollout, "tok4")
    a0 = next(h for h in second if h.where == SAMPLED)
    assert (a0.node_id, a0.token_index) == ("a0", 1) and strip_position(rollout, a0) == 2 + 1


def test_regex_and_ignore_case(rollout):
    assert {h.node_id for h in run_search(rollout, r"trace\w+ says", regex=True)} == {"a1"}
    assert {h.node_id for h in run_search(rollout, "TRACEBACK", ignore_case=True)} == {"a1", "a2"}
    assert run_search(rollout, "TRACEBACK") == []


@pytest.mark.parametrize("text", ["", "(unclosed", "a*"])
def test_bad_queries_raise(text):
    with pytest.raises(SearchError):
        Query.compile(text, regex=True)


def test_without_a_decoder_only_messages_and_responses(rollout):
    hits = search(SearchIndex(rollout), Query.compile("tok5"))
    assert hits == []


# --- the command line ---------------------------------------------------------------------------


def cli(*args):
    return subprocess.run([sys.executable, "-m", "rollout_graph", "search", *args], capture_output=True, text=True)


@pytest.fixture
def trace(tmp_path):
    return str(write(tmp_path / "trace.jsonl", records()))


@pytest.mark.parametrize(
    ("text", "where", "position"),
    [
        ("Traceback", MESSAGE, ("message_index", 3)),
        ("says boom", RESPONSE, ("char_offset", len("The traceback "))),
        ("tok6", SAMPLED, ("token_index", 0)),
        ("tok5", CONTEXT, ("token_index", 4)),
    ],
)
def test_cli_json_each_where(trace, text, where, position):
    out = cli(text, trace, "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    hit = next(h for h in doc["hits"] if h["where"] == where)
    assert {"session_id", "node_id", "where", "snippet", "count"} <= set(hit)
    assert hit["session_id"] == "s1" and hit["node_id"] == "a1"
    assert hit[position[0]] == position[1]


def test_cli_text_output_and_first_entry(trace):
    out = cli("Traceback", trace)
    assert out.returncode == 0
    assert "first entered the context: a1 #2, message 3 (tool)" in out.stdout
    assert "a2 #3  message 3 (tool): Traceback (most recent call last): boom" in out.stdout
    doc = json.loads(cli("Traceback", trace, "--json").stdout)
    assert [f["node_id"] for f in doc["first_entered"]] == ["a1"]


def test_cli_regex(trace):
    doc = json.loads(cli(r"run_\w+", trace, "--regex", "--json", "--session", "s1").stdout)
    assert {(h["node_id"], h["where"]) for h in doc["hits"]} == {("a0", RESPONSE), ("a1", MESSAGE), ("a2", MESSAGE)}


def test_cli_no_hit(trace):
    out = cli("nowhere to be found", trace, "--json")
    assert out.returncode == 0
    assert json.loads(out.stdout) == {"hits": [], "first_entered": []}
    assert cli("nowhere to be found", trace).stdout == "no hit for 'nowhere to be found' in 1 rollout(s)\n"


def test_cli_bad_regex_exits_2(trace):
    out = cli("(unclosed", trace, "--regex")
    assert out.returncode == 2
    assert out.stderr.startswith("rollout-graph: bad regular expression '(unclosed'")
    assert "Traceback" not in out.stderr and out.stdout == ""
