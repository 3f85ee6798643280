"""The capture proxy speaking Anthropic Messages (Claude Code) and OpenAI Responses (codex).

The request shapes are written by hand from the two APIs' documentation: Claude Code sends
``system`` as text blocks (with ``cache_control``), ``tool_use`` / ``tool_result`` blocks, a
``system``-role entry inside ``messages``, ``x-api-key`` and ``x-claude-code-session-id``
headers, always streamed; codex sends ``instructions``, a ``developer`` message and
``input_text`` parts, ``reasoning`` / ``function_call`` / ``function_call_output`` items, flat
function tools, ``session-id`` headers, always streamed.
"""

from __future__ import annotations

import json

import pytest

from rollout_graph.ingest.load.files import load_paths
from rollout_graph.pipeline import analyse
from tests.support.builders import rollout_of
from tests.support.capture_helpers import http, read_records, running_proxy, sse_events
from tests.support.fake_upstream import END, TOOL_CALL, render, running_upstream

BASH_SCHEMA = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}


@pytest.fixture(scope="module")
def upstream():
    with running_upstream() as (url, fake):
        yield url, fake


def claude_code_body(messages: list[dict], stream: bool = True) -> dict:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 32000,
        "temperature": 1,
        "system": [
            {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude."},
            {"type": "text", "text": "Use the tools to help the user.", "cache_control": {"type": "ephemeral"}},
        ],
        "messages": messages,
        "tools": [
            {"name": "Bash", "description": "Run a shell command", "input_schema": BASH_SCHEMA},
            {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},  # a server tool: not forwarded
        ],
        "tool_choice": {"type": "auto"},
        "metadata": {"user_id": "user_abc_account__session_123"},
        "stream": stream,
    }


CLAUDE_HEADERS = {
    "x-api-key": "sk-ant-SECRET",
    "anthropic-version": "2023-06-01",
    "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14",
    "x-claude-code-session-id": "cc-session-1",
    "user-agent": "claude-cli/2.1.0 (external, cli)",
    "x-app": "cli",
}


def anthropic_message_from_events(events: list) -> dict:
    """What the Anthropic SDK builds from the SSE events."""
    names = [name for name, _ in events]
    assert names[0] == "message_start" and names[-1] == "message_stop"
    assert all(name == data["type"] for name, data in events)
    message = events[0][1]["message"]
    blocks: dict[int, dict] = {}
    partial: dict[int, str] = {}
    for name, data in events:
        if name == "content_block_start":
            blocks[data["index"]] = dict(data["content_block"])
        elif name == "content_block_delta":
            delta = data["delta"]
            if delta["type"] == "text_delta":
                blocks[data["index"]]["text"] += delta["text"]
            elif delta["type"] == "input_json_delta":
                partial[data["index"]] = partial.get(data["index"], "") + delta["partial_json"]
        elif name == "content_block_stop":
            if data["index"] in partial:
                blocks[data["index"]]["input"] = json.loads(partial[data["index"]])
        elif name == "message_delta":
            message.update(data["delta"])
            message["usage"] = data["usage"]
    message["content"] = [blocks[i] for i in sorted(blocks)]
    return message


def test_claude_code_conversation_streams_translates_and_links(upstream, tmp_path):
    url, fake = upstream
    first_turn = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "list files CALL", "cache_control": {"type": "ephemeral"}}],
        }
    ]
    with running_proxy(url, tmp_path) as proxy:
        r1 = http.post(f"{proxy}/v1/messages", json=claude_code_body(first_turn), headers=CLAUDE_HEADERS)
        assert r1.status_code == 200 and r1.headers["content-type"].startswith("text/event-stream")
        reply = anthropic_message_from_events(sse_events(r1.text))
        assert reply["stop_reason"] == "tool_use"
        (tool_use,) = reply["content"]
        assert tool_use["type"] == "tool_use" and tool_use["name"] == "Bash" and set(tool_use["input"]) == {"n"}
        second_turn = [
            *first_turn,
            {"role": "assistant", "content": [tool_use]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": tool_use["id"], "content": "a.txt b.txt"},
                    {"type": "text", "text": "thanks"},
                ],
            },
            {"role": "system", "content": "reminder: be brief"},
        ]
        r2 = http.post(f"{proxy}/v1/messages", json=claude_code_body(second_turn), headers=CLAUDE_HEADERS)
        answer = anthropic_message_from_events(sse_events(r2.text))
    assert answer["stop_reason"] == "end_turn" and answer["content"][0]["type"] == "text"
    assert answer["content"][0]["text"].startswith("ok t")
    assert answer["usage"]["output_tokens"] > 0
    start = sse_events(r2.text)[0][1]["message"]
    assert start["usage"]["input_tokens"] == len(render(fake.requests[-1]["messages"]))
    assert "prompt_token_ids" not in r2.text and "token_id:" not in r2.text  # no capture field leaks

    upstream_body = fake.requests[-1]
    assert upstream_body["messages"][0] == {
        "role": "system",
        "content": "You are Claude Code, Anthropic's official CLI for Claude.\nUse the tools to help the user.",
    }
    assert [m["role"] for m in upstream_body["messages"]] == ["system", "user", "assistant", "tool", "user", "system"]
    assert [t["function"]["name"] for t in upstream_body["tools"]] == ["Bash"]
    assert fake.headers[-1]["authorization"] == "Bearer sk-ant-SECRET"  # the key still reaches the engine

    records = read_records(tmp_path)
    assert [r["session_id"] for r in records] == ["cc-session-1"] * 2
    assert records[1]["request"] == claude_code_body(second_turn)  # the harness's body, as sent
    assert records[1]["submitted_request"]["messages"] == upstream_body["messages"]
    assert "SECRET" not in next(tmp_path.glob("*.jsonl")).read_text()

    loaded = load_paths([tmp_path])
    rollout = analyse(loaded.sessions["cc-session-1"])
    first, second = rollout.calls
    assert first.sampled_ids[0] == TOOL_CALL and first.sampled_ids[-1] == END
    assert first.shape == "vllm-chat-stream via anthropic"
    assert rollout.linked_by == [None, "tokens"] and rollout.stats["n_roots"] == 1
    assert first.request_messages[0]["role"] == "system" and first.tools[0]["function"]["name"] == "Bash"
    assert second.request_messages[2]["tool_calls"][0]["function"]["name"] == "Bash"
    assert second.request_messages[3] == {"role": "tool", "tool_call_id": tool_use["id"], "content": "a.txt b.txt"}


def test_anthropic_non_streamed_and_errors(upstream, tmp_path):
    url, _ = upstream
    body = claude_code_body([{"role": "user", "content": "hello"}], stream=False)
    body["system"] = "plain string system"
    body["stop_sequences"] = ["\n\nHuman:"]
    with running_proxy(url, tmp_path) as proxy:
        r = http.post(f"{proxy}/v1/messages", json=body)
        failed = http.post(f"{proxy}/v1/messages", json={**body, "model": "fake-error-400"})
        cut = http.post(f"{proxy}/v1/messages", json={**body, "model": "fake-cut", "stream": True})
    message = r.json()
    assert message["type"] == "message" and message["role"] == "assistant"
    assert message["content"] == [
        {
            "type": "text",
            "text": f"ok t{len(render([{'role': 'system', 'content': 'plain string system'}, {'role': 'user', 'content': 'hello'}]))} done here",
        }
    ]
    assert message["stop_reason"] == "end_turn" and message["usage"]["input_tokens"] > 0
    assert failed.status_code == 400
    assert failed.json() == {"type": "error", "error": {"type": "invalid_request_error", "message": "fake failure 400"}}
    events = sse_events(cut.text)
    assert events[-1][0] == "error" and "stream cut" in events[-1][1]["error"]["message"]
    records = read_records(tmp_path)
    assert records[0]["submitted_request"]["stop"] == ["\n\nHuman:"]
    assert [r.get("error", "") for r in records][1:] == ["upstream HTTP 400", records[2]["error"]]
    assert records[2]["error"].startswith("upstream stream cut")


def codex_body(items: list[dict], stream: bool = True) -> dict:
    return {
        "model": "gpt-5-codex",
        "instructions": "You are Codex, a coding agent.",
        "input": items,
        "tools": [
            {
                "type": "function",
                "name": "shell",
                "description": "Runs a command",
                "strict": False,
                "parameters": BASH_SCHEMA,
            },
            {"type": "web_search"},
        ],
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "reasoning": {"effort": "medium", "summary": "auto"},
        "store": False,
        "stream": stream,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "0199-session",
    }


CODEX_START = [
    {
        "type": "message",
        "role": "developer",
        "content": [{"type": "input_text", "text": "<permissions>read-only</permissions>"}],
    },
    {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "<environment_context>cwd=/repo</environment_context>"}],
    },
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix the bug CALL"}]},
]
CODEX_HEADERS = {"authorization": "Bearer sk-SECRET", "session-id": "codex-1", "originator": "codex_cli_rs"}


def responses_final(events: list) -> dict:
    names = [name for name, _ in events]
    assert names[:2] == ["response.created", "response.in_progress"]
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    assert "[DONE]" not in [d for _, d in events]
    return events[-1][1]["response"]


def test_codex_conversation_streams_translates_and_links(upstream, tmp_path):
    url, fake = upstream
    with running_proxy(url, tmp_path) as proxy:
        r1 = http.post(f"{proxy}/v1/responses", json=codex_body(CODEX_START), headers=CODEX_HEADERS)
        events = sse_events(r1.text)
        final = responses_final(events)
        assert events[-1][0] == "response.completed" and final["status"] == "completed"
        (call,) = final["output"]
        assert call["type"] == "function_call" and call["name"] == "shell" and json.loads(call["arguments"])
        deltas = "".join(d["delta"] for n, d in events if n == "response.function_call_arguments.delta")
        assert deltas == call["arguments"]
        items = [
            *CODEX_START,
            {"type": "reasoning", "id": "rs_1", "summary": [], "content": None, "encrypted_content": None},
            {"type": "function_call", "name": "shell", "arguments": call["arguments"], "call_id": call["call_id"]},
            {"type": "function_call_output", "call_id": call["call_id"], "output": "ran fine"},
        ]
        r2 = http.post(f"{proxy}/v1/responses", json=codex_body(items), headers=CODEX_HEADERS)
        events2 = sse_events(r2.text)
    final2 = responses_final(events2)
    (message,) = final2["output"]
    text = "".join(d["delta"] for n, d in events2 if n == "response.output_text.delta")
    assert message["type"] == "message" and message["content"][0]["text"] == text and text.startswith("ok t")
    assert final2["usage"]["output_tokens"] > 0
    names = [n for n, _ in events2]
    assert (
        names.index("response.output_item.added")
        < names.index("response.output_text.delta")
        < names.index("response.output_item.done")
    )

    upstream_body = fake.requests[-1]
    assert [m["role"] for m in upstream_body["messages"]] == ["system", "system", "user", "user", "assistant", "tool"]
    assert upstream_body["tools"] == [
        {
            "type": "function",
            "function": {"name": "shell", "parameters": BASH_SCHEMA, "description": "Runs a command", "strict": False},
        }
    ]
    records = read_records(tmp_path)
    assert [r["session_id"] for r in records] == ["codex-1", "codex-1"]
    assert [r["dialect"] for r in records] == ["responses", "responses"]
    rollout = analyse(load_paths([tmp_path]).sessions["codex-1"])
    assert rollout.linked_by == [None, "tokens"]
    assert [m["role"] for m in rollout.calls[1].request_messages] == [
        "developer",
        "developer",
        "user",
        "user",
        "assistant",
        "tool",
    ]


def test_responses_non_streamed_string_input_and_length_cap(upstream, tmp_path):
    url, _ = upstream
    with running_proxy(url, tmp_path) as proxy:
        r = http.post(f"{proxy}/v1/responses", json={"model": "m", "input": "hi", "max_output_tokens": 2})
        failed = http.post(f"{proxy}/v1/responses", json={"model": "fake-error-500", "input": "hi"})
        cut = http.post(f"{proxy}/v1/responses", json={"model": "fake-cut", "input": "hi", "stream": True})
    body = r.json()
    assert body["object"] == "response" and body["status"] == "incomplete"
    assert body["incomplete_details"] == {"reason": "max_output_tokens"}
    assert body["output"][0]["content"][0]["text"] == "ok t4"
    assert failed.status_code == 500 and failed.json()["error"]["message"] == "fake failure 500"
    assert sse_events(cut.text)[-1][0] == "response.failed"
    (record, *_) = read_records(tmp_path)
    assert record["submitted_request"]["max_tokens"] == 2 and record["request"]["input"] == "hi"
    (call,) = load_paths([tmp_path]).sessions[record["session_id"]].calls
    assert call.requested_params == {"max_tokens": 2} and call.finish_reason == "length"


def test_loader_reads_dialect_bodies_without_token_ids():
    """Records of other proxies: the harness's Anthropic / Responses bodies only, linked by messages."""
    anthropic_records = [
        {
            "call_id": "a1",
            "session_id": "cc",
            "request": claude_code_body([{"role": "user", "content": "list files"}], stream=False),
            "response": {
                "type": "message",
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Sure."},
                    {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}},
                ],
                "stop_reason": "tool_use",
                "usage": {"input_tokens": 10, "output_tokens": 5},
            },
        },
        {
            "call_id": "a2",
            "session_id": "cc",
            "request": claude_code_body(
                [
                    {"role": "user", "content": "list files"},
                    {
                        "role": "assistant",
                        "content": [
                            {"type": "text", "text": "Sure."},
                            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}},
                        ],
                    },
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "a.txt"}]}
                        ],
                    },
                ]
            ),
            "response": [
                {
                    "type": "message_start",
                    "message": {"id": "m2", "type": "message", "role": "assistant", "content": [], "model": "c"},
                },
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Done"}},
                {"type": "content_block_stop", "index": 0},
                {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}},
                {"type": "message_stop"},
            ],
        },
    ]
    rollout = rollout_of(anthropic_records)
    assert rollout.linked_by == [None, "messages"]
    first, second = rollout.calls
    assert first.response_message["tool_calls"][0]["function"] == {"name": "Bash", "arguments": '{"command":"ls"}'}
    assert first.finish_reason == "tool_calls" and second.response_message["content"] == "Done"
    assert second.request_messages[-1] == {"role": "tool", "tool_call_id": "t1", "content": "a.txt"}

    responses_records = [
        {
            "call_id": "r1",
            "session_id": "cx",
            "request": codex_body(CODEX_START, stream=False),
            "response": {
                "object": "response",
                "status": "completed",
                "output": [
                    {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": '{"command": "ls"}'}
                ],
            },
        },
        {
            "call_id": "r2",
            "session_id": "cx",
            "request": codex_body(
                [
                    *CODEX_START,
                    {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": '{"command":"ls"}'},
                    {"type": "function_call_output", "call_id": "c1", "output": "a.txt"},
                ]
            ),
            "response": [
                {"type": "response.created", "response": {"object": "response", "status": "in_progress", "output": []}},
                {"type": "response.output_text.delta", "delta": "ok"},
                {
                    "type": "response.completed",
                    "response": {
                        "object": "response",
                        "status": "completed",
                        "output": [
                            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}
                        ],
                    },
                },
            ],
        },
    ]
    rollout = rollout_of(responses_records)
    assert rollout.linked_by == [None, "messages"]  # re-serialised arguments still match
    assert rollout.calls[0].request_messages[0] == {"role": "developer", "content": "You are Codex, a coding agent."}
    assert rollout.calls[1].response_message["content"] == "ok"


def test_message_fallback_and_chat_view_read_raw_blocks():
    from rollout_graph.core.dialects import anthropic_messages
    from rollout_graph.core.messages import canonical
    from rollout_graph.ui.builders.chat import message_html

    raw = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Sure."},
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}},
        ],
    }
    (normalized,) = anthropic_messages({"messages": [raw]})
    assert canonical(raw) == canonical(normalized) == ("assistant", "Sure.", (("Bash", 'json:{"command":"ls"}'),))
    html = message_html(
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "<b>x</b>"}]}
    )
    assert "&lt;b&gt;x&lt;/b&gt;" in html and "tool_result t1" in html and "<b>" not in html


def test_claude_code_count_tokens_is_answered_by_the_engine_and_not_recorded(upstream, tmp_path):
    url, _ = upstream
    body = {"model": "m", "system": "sys", "messages": [{"role": "user", "content": "count these words"}]}
    with running_proxy(url, tmp_path) as proxy:
        r = http.post(f"{proxy}/session/cc/v1/messages/count_tokens", json=body, headers=CLAUDE_HEADERS)
    expected = render([{"role": "system", "content": "sys"}, {"role": "user", "content": "count these words"}])
    assert r.status_code == 200 and r.json() == {"input_tokens": len(expected)}
    assert read_records(tmp_path) == []


def test_max_tokens_cap_is_applied_recorded_and_flagged(upstream, tmp_path):
    url, fake = upstream
    body = claude_code_body([{"role": "user", "content": "hi"}], stream=False)
    with running_proxy(url, tmp_path, max_tokens=512) as proxy:
        assert http.post(f"{proxy}/v1/messages", json=body).status_code == 200
    assert fake.requests[-1]["max_tokens"] == 512
    (record,) = read_records(tmp_path)
    assert record["request"]["max_tokens"] == 32000 and record["submitted_request"]["max_tokens"] == 512
    rollout = analyse(load_paths([tmp_path]).sessions[record["session_id"]])
    (finding,) = [f for f in rollout.findings if f.code == "sampling_neutralised"]
    assert "max_tokens 32000 -> 512" in finding.detail


def test_an_error_inside_the_engine_stream_fails_the_call_in_every_dialect(upstream, tmp_path):
    url, _ = upstream
    with running_proxy(url, tmp_path) as proxy:
        chat = http.post(
            f"{proxy}/v1/chat/completions",
            json={"model": "fake-stream-error", "messages": [{"role": "user", "content": "x"}], "stream": True},
        )
        claude = http.post(
            f"{proxy}/v1/messages",
            json={**claude_code_body([{"role": "user", "content": "x"}]), "model": "fake-stream-error"},
        )
        codex = http.post(f"{proxy}/v1/responses", json={"model": "fake-stream-error", "input": "x", "stream": True})
    assert [d for _, d in sse_events(chat.text)][-2]["error"]["message"] == "engine failed"  # passed on as sent
    assert sse_events(claude.text)[-1][0] == "error" and "message_stop" not in claude.text
    assert sse_events(codex.text)[-1][0] == "response.failed"
    records = read_records(tmp_path)
    assert [r["error"] for r in records] == ["upstream error in stream: engine failed"] * 3
    assert len(load_paths([tmp_path]).skipped) == 3


def test_an_engine_that_does_not_stream_still_gives_the_harness_its_events(upstream, tmp_path):
    url, _ = upstream
    turn = [{"role": "user", "content": "go CALL"}]
    with running_proxy(url, tmp_path) as proxy:
        claude = http.post(f"{proxy}/v1/messages", json={**claude_code_body(turn), "model": "fake-no-stream"})
        codex = http.post(f"{proxy}/v1/responses", json={**codex_body(CODEX_START), "model": "fake-no-stream"})
    message = anthropic_message_from_events(sse_events(claude.text))
    assert message["stop_reason"] == "tool_use" and message["content"][0]["name"] == "Bash"
    final = responses_final(sse_events(codex.text))
    assert final["output"][0]["type"] == "function_call" and final["output"][0]["name"] == "shell"
    assert all(isinstance(r["response"], dict) for r in read_records(tmp_path))  # recorded as answered


APPLY_PATCH = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Edit files with a patch",
    "format": {"type": "grammar", "syntax": "lark", "definition": "start: begin_patch hunk+ end_patch"},
}


@pytest.mark.parametrize("stream", [True, False])
def test_codex_freeform_tools_round_trip(upstream, tmp_path, stream):
    url, fake = upstream
    body = {**codex_body(CODEX_START, stream=stream), "tools": [APPLY_PATCH]}
    with running_proxy(url, tmp_path) as proxy:
        r = http.post(f"{proxy}/v1/responses", json=body, headers=CODEX_HEADERS)
        if stream:
            events = sse_events(r.text)
            (item,) = responses_final(events)["output"]
            deltas = [d["delta"] for n, d in events if n == "response.custom_tool_call_input.delta"]
            assert deltas == [item["input"]]
        else:
            (item,) = r.json()["output"]
        assert item["type"] == "custom_tool_call" and item["name"] == "apply_patch"
        offered = fake.requests[-1]["tools"][0]["function"]
        assert offered["name"] == "apply_patch" and offered["parameters"]["required"] == ["input"]
        # The fake model writes {"n": ...} instead of {"input": ...}: the text is handed over whole.
        assert set(json.loads(item["input"])) == {"n"}
        replay = [
            *CODEX_START,
            {"type": "custom_tool_call", "call_id": item["call_id"], "name": "apply_patch", "input": "*** Begin Patch"},
            {"type": "custom_tool_call_output", "call_id": item["call_id"], "output": "Done!"},
        ]
        http.post(f"{proxy}/v1/responses", json={**body, "input": replay}, headers=CODEX_HEADERS)
    messages = fake.requests[-1]["messages"]
    assert messages[-2]["tool_calls"][0]["function"] == {
        "name": "apply_patch",
        "arguments": '{"input":"*** Begin Patch"}',
    }
    assert messages[-1] == {"role": "tool", "tool_call_id": item["call_id"], "content": "Done!"}


def test_a_translation_failure_is_a_502_and_recorded(upstream, tmp_path, monkeypatch):
    from rollout_graph.capture import server

    def broken(response, request):
        raise KeyError("choices")

    monkeypatch.setattr(server.DIALECTS["anthropic"], "from_upstream", broken)
    url, _ = upstream
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "stop_sequences": "odd", "tools": "odd"}
    with running_proxy(url, tmp_path) as proxy:
        r = http.post(f"{proxy}/v1/messages", json=body)
    assert r.status_code == 502 and r.json()["error"]["message"] == "proxy error: KeyError: 'choices'"
    (record,) = read_records(tmp_path)
    assert record["error"].startswith("proxy error") and record["response"]["choices"]  # what the engine said


def test_anthropic_prefill_continues_the_final_message():
    from rollout_graph.capture.anthropic import to_chat

    chat = to_chat(
        {"model": "m", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "{"}]}
    )
    assert chat["messages"][-1] == {"role": "assistant", "content": "{"}
    assert chat["continue_final_message"] is True and chat["add_generation_prompt"] is False
    assert "continue_final_message" not in to_chat({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
