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

import httpx
import pytest

from graph.core.rollout import analyse
from graph.ingest.loading import load_paths
from tests.builders import rollout_of
from tests.capture_helpers import read_records, running_proxy, sse_events
from tests.fake_upstream import END, TOOL_CALL, render, running_upstream

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
        r1 = httpx.post(f"{proxy}/v1/messages", json=claude_code_body(first_turn), headers=CLAUDE_HEADERS)
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
        r2 = httpx.post(f"{proxy}/v1/messages", json=claude_code_body(second_turn), headers=CLAUDE_HEADERS)
        answer = anthropic_message_from_events(sse_events(r2.text))
    assert answer["stop_reason"] == "end_turn" and answer["content"][0]["type"] == "text"
    assert answer["content"][0]["text"].startswith("ok t")
    assert answer["usage"]["output_tokens"] > 0

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
    assert rollout.link_via == [None, "tokens"] and rollout.stats["n_roots"] == 1
    assert first.request_messages[0]["role"] == "system" and first.tools[0]["function"]["name"] == "Bash"
    assert second.request_messages[2]["tool_calls"][0]["function"]["name"] == "Bash"
    assert second.request_messages[3] == {"role": "tool", "tool_call_id": tool_use["id"], "content": "a.txt b.txt"}


def test_anthropic_non_streamed_and_errors(upstream, tmp_path):
    url, _ = upstream
    body = claude_code_body([{"role": "user", "content": "hello"}], stream=False)
    body["system"] = "plain string system"
    body["stop_sequences"] = ["\n\nHuman:"]
    with running_proxy(url, tmp_path) as proxy:
        r = httpx.post(f"{proxy}/v1/messages", json=body)
        failed = httpx.post(f"{proxy}/v1/messages", json={**body, "model": "fake-error-400"})
        cut = httpx.post(f"{proxy}/v1/messages", json={**body, "model": "fake-cut", "stream": True})
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
        r1 = httpx.post(f"{proxy}/v1/responses", json=codex_body(CODEX_START), headers=CODEX_HEADERS)
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
        r2 = httpx.post(f"{proxy}/v1/responses", json=codex_body(items), headers=CODEX_HEADERS)
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
    assert rollout.link_via == [None, "tokens"]
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
        r = httpx.post(f"{proxy}/v1/responses", json={"model": "m", "input": "hi", "max_output_tokens": 2})
        failed = httpx.post(f"{proxy}/v1/responses", json={"model": "fake-error-500", "input": "hi"})
        cut = httpx.post(f"{proxy}/v1/responses", json={"model": "fake-cut", "input": "hi", "stream": True})
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
    assert rollout.link_via == [None, "messages"]
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
    assert rollout.link_via == [None, "messages"]  # re-serialised arguments still match
    assert rollout.calls[0].request_messages[0] == {"role": "developer", "content": "You are Codex, a coding agent."}
    assert rollout.calls[1].response_message["content"] == "ok"


def test_message_fallback_and_chat_view_read_raw_blocks():
    from graph.core.dialects import anthropic_messages
    from graph.core.messages import canonical
    from views.chat import message_html

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
