"""The official Anthropic and OpenAI Python SDKs as harnesses through the proxy.

Their stream accumulators parse every event the proxy writes, so a shape they do not accept fails
here. Skipped when the SDKs are not installed (they are not project dependencies).
"""

from __future__ import annotations

import json

import pytest

from rollout_graph.ingest.load.files import load_paths
from rollout_graph.pipeline import analyse
from tests.support.capture_helpers import read_records, running_proxy
from tests.support.fake_upstream import running_upstream

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

BASH = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}


@pytest.fixture(scope="module")
def upstream():
    with running_upstream() as (url, fake):
        yield url, fake


def test_anthropic_sdk_streams_tool_use_and_text(upstream, tmp_path):
    url, _ = upstream
    with running_proxy(url, tmp_path) as proxy:
        client = anthropic.Anthropic(base_url=f"{proxy}/session/sdk-claude", api_key="sk-ant-test", max_retries=0)
        tools = [{"name": "Bash", "description": "run", "input_schema": BASH}]
        messages = [{"role": "user", "content": "list files CALL"}]
        with client.messages.stream(model="m", max_tokens=64, system="be brief", messages=messages, tools=tools) as s:
            first = s.get_final_message()
        (tool_use,) = first.content
        assert first.stop_reason == "tool_use" and tool_use.type == "tool_use" and tool_use.name == "Bash"
        assert set(tool_use.input) == {"n"}
        messages += [
            {"role": "assistant", "content": [tool_use.model_dump()]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_use.id, "content": "a.txt"}]},
        ]
        with client.messages.stream(model="m", max_tokens=64, system="be brief", messages=messages, tools=tools) as s:
            text = "".join(s.text_stream)
            second = s.get_final_message()
        assert text.startswith("ok t") and second.content[0].text == text and second.stop_reason == "end_turn"
        assert second.usage.input_tokens > 0 and second.usage.output_tokens > 0
        plain = client.messages.create(model="m", max_tokens=64, messages=[{"role": "user", "content": "hi"}])
        assert plain.content[0].text.startswith("ok t")
        with pytest.raises(anthropic.BadRequestError, match="fake failure 400"):
            client.messages.create(model="fake-error-400", max_tokens=8, messages=[{"role": "user", "content": "x"}])
    rollout = analyse(load_paths([tmp_path]).sessions["sdk-claude"])
    assert rollout.linked_by[:2] == [None, "tokens"]


def test_openai_sdk_responses_stream_function_call_and_text(upstream, tmp_path):
    url, _ = upstream
    with running_proxy(url, tmp_path) as proxy:
        client = openai.OpenAI(base_url=f"{proxy}/session/sdk-codex/v1", api_key="sk-test", max_retries=0)
        tools = [{"type": "function", "name": "shell", "description": "run", "parameters": BASH, "strict": False}]
        items = [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "rules"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix it CALL"}]},
        ]
        with client.responses.stream(model="m", instructions="You are Codex.", input=items, tools=tools) as s:
            first = s.get_final_response()
        (call,) = first.output
        assert call.type == "function_call" and call.name == "shell" and json.loads(call.arguments)
        items += [
            {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
            {"type": "function_call_output", "call_id": call.call_id, "output": "done"},
        ]
        with client.responses.stream(model="m", instructions="You are Codex.", input=items, tools=tools) as s:
            deltas = [e.delta for e in s if e.type == "response.output_text.delta"]
            second = s.get_final_response()
        assert second.output_text == "".join(deltas) and second.output_text.startswith("ok t")
        assert second.status == "completed" and second.usage.output_tokens > 0
        plain = client.responses.create(model="m", input="hi", max_output_tokens=2)
        assert plain.status == "incomplete" and plain.output_text == "ok t4"
        chat = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        assert chat.choices[0].message.content.startswith("ok t") and chat.choices[0].logprobs is None
    records = read_records(tmp_path)
    assert [r["dialect"] for r in records] == ["responses", "responses", "responses", "chat"]
    rollout = analyse(load_paths([tmp_path]).sessions["sdk-codex"])
    assert rollout.linked_by[:2] == [None, "tokens"]
