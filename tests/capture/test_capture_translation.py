"""The proxy never drops silently (issue 23): codex's ``namespace`` tools reach the engine and the
engine's calls to them come back carrying their namespace; a tool a translation cannot offer is
named in the record; a length stop is ``incomplete`` only when the request set
``max_output_tokens`` (the Responses API's only length reason), else ``completed``."""

from __future__ import annotations

import pytest

from rollout_graph.capture import responses
from tests.support.capture_helpers import http, read_records, running_proxy, sse_events
from tests.support.fake_upstream import running_upstream

SCHEMA = {"type": "object", "properties": {"message": {"type": "string"}}}
AGENTS = ["spawn_agent", "wait_agent", "send_input", "resume_agent", "close_agent"]
CODEX_TOOLS = [
    {"type": "function", "name": "exec_command", "parameters": SCHEMA},
    {"type": "custom", "name": "apply_patch", "description": "patch files"},
    {
        "type": "namespace",
        "name": "multi_agent",
        "description": "Agents that work beside you.",
        "tools": [{"type": "function", "name": n, "description": n, "parameters": SCHEMA} for n in AGENTS],
    },
    {"type": "web_search"},
]


@pytest.fixture(scope="module")
def upstream():
    with running_upstream() as (url, fake):
        yield url, fake


def test_namespace_tools_are_flattened_and_every_change_is_noted():
    chat = responses.to_chat({"model": "m", "input": "hi", "tools": CODEX_TOOLS})
    names = [t["function"]["name"] for t in chat["tools"]]
    assert names == ["exec_command", "apply_patch", *AGENTS]  # 7 of codex's tools, none lost
    notes = chat[responses.TRANSLATION]
    assert any("namespace tool 'multi_agent' flattened into 5 chat tools: spawn_agent" in n for n in notes)
    assert any("'web_search'" in n and "not offered" in n for n in notes)


def test_a_colliding_inner_name_is_prefixed_and_mapped_back():
    tools = [
        {"type": "function", "name": "close_agent", "parameters": SCHEMA},
        {"type": "namespace", "name": "multi_agent", "tools": [{"type": "function", "name": "close_agent"}]},
    ]
    chat = responses.to_chat({"model": "m", "input": "hi", "tools": tools})
    assert [t["function"]["name"] for t in chat["tools"]] == ["close_agent", "multi_agent__close_agent"]
    call = {"id": "c1", "type": "function", "function": {"name": "multi_agent__close_agent", "arguments": "{}"}}
    answer = {
        "id": "x",
        "choices": [
            {"message": {"role": "assistant", "content": None, "tool_calls": [call]}, "finish_reason": "tool_calls"}
        ],
    }
    (item,) = responses.from_chat(answer, {"tools": tools})["output"]
    assert (item["name"], item["namespace"]) == ("close_agent", "multi_agent")


def test_the_engine_sees_the_namespace_tools_and_its_call_carries_the_namespace(upstream, tmp_path):
    url, _ = upstream
    tools = [CODEX_TOOLS[2]]  # the fake engine calls the first tool offered when asked to CALL
    body = {"model": "m", "input": "CALL a tool", "tools": tools}
    with running_proxy(url, tmp_path) as proxy:
        answer = http.post(f"{proxy}/v1/responses", json=body).json()
        streamed = http.post(f"{proxy}/v1/responses", json={**body, "stream": True})
    (item,) = [i for i in answer["output"] if i["type"] == "function_call"]
    assert (item["name"], item["namespace"]) == ("spawn_agent", "multi_agent")
    done = [d["item"] for name, d in sse_events(streamed.text) if name == "response.output_item.done"]
    assert any(i.get("namespace") == "multi_agent" and i["name"] == "spawn_agent" for i in done)
    record, *_ = read_records(tmp_path)
    assert [t["function"]["name"] for t in record["submitted_request"]["tools"]] == AGENTS
    assert responses.TRANSLATION not in record["submitted_request"]
    assert record["translation"] == ["namespace tool 'multi_agent' flattened into 5 chat tools: " + ", ".join(AGENTS)]


def test_a_length_stop_is_incomplete_only_with_max_output_tokens(upstream, tmp_path):
    url, _ = upstream
    with running_proxy(url, tmp_path) as proxy:
        capped = http.post(f"{proxy}/v1/responses", json={"model": "m", "input": "hi", "max_output_tokens": 2})
        stream = http.post(
            f"{proxy}/v1/responses", json={"model": "m", "input": "hi", "max_output_tokens": 2, "stream": True}
        )
    assert capped.json()["status"] == "incomplete"
    assert capped.json()["incomplete_details"] == {"reason": "max_output_tokens"}
    assert sse_events(stream.text)[-1][0] == "response.incomplete"
    # the engine's own cap (or the proxy's --max-tokens) cut a request that set no max_output_tokens
    cut = {"id": "x", "choices": [{"message": {"role": "assistant", "content": "ok t4"}, "finish_reason": "length"}]}
    answer = responses.from_chat(cut, {"model": "m", "input": "hi"})
    assert answer["status"] == "completed" and answer["incomplete_details"] is None
    translator = responses.StreamTranslator({"model": "m", "input": "hi"})
    chunk = {"id": "x", "choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "length"}]}
    events = translator.feed(chunk) + translator.close()
    assert b"event: response.completed" in events[-1]


def test_anthropic_server_tools_are_named_in_the_record():
    from rollout_graph.capture import anthropic

    chat = anthropic.to_chat(
        {
            "model": "m",
            "max_tokens": 8,
            "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"name": "Bash", "input_schema": SCHEMA}, {"type": "web_search_20250305", "name": "web_search"}],
        }
    )
    assert [t["function"]["name"] for t in chat["tools"]] == ["Bash"]
    assert chat[responses.TRANSLATION] == [
        "server tool 'web_search' (web_search_20250305) has no schema the engine could follow: not offered"
    ]
