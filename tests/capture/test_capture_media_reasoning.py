"""Images and reasoning through the capture proxy, in every dialect.

Images: the engine gets each one as the chat ``image_url`` it expects; the record keeps a
placeholder (type, size, SHA-256) and never the bytes. Reasoning: the engine's reasoning (vLLM
0.32 names it ``reasoning``, streamed or not) goes to the harness as its dialect spells it
(Anthropic ``thinking`` with a signature, Responses ``reasoning`` with ``encrypted_content``,
Gemini ``thought`` parts with a ``thoughtSignature``), and comes back to the engine as the
assistant message's reasoning when the harness sends it back, so a harness that replays earlier
reasoning is not broken by the proxy. The official SDKs accumulate the streams where installed.
"""

from __future__ import annotations

import base64
import hashlib
import json

import pytest

from rollout_graph.capture.media import PREFIX
from rollout_graph.core.dialects import decode_reasoning, encode_reasoning, reasoning_signature
from rollout_graph.ingest.load.files import load_paths
from rollout_graph.pipeline import analyse
from tests.support.capture_helpers import http, read_records, running_proxy, sse_events
from tests.support.fake_upstream import running_upstream, thinking

PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
B64 = base64.b64encode(PIXEL).decode()
DATA_URL = f"data:image/png;base64,{B64}"
SHA = hashlib.sha256(PIXEL).hexdigest()


@pytest.fixture(scope="module")
def upstream():
    with running_upstream() as (url, fake):
        yield url, fake


IMAGE_CALLS = {
    "chat": (
        "/v1/chat/completions",
        {
            "model": "m",
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "what"},
                        {"type": "image_url", "image_url": {"url": DATA_URL}},
                    ],
                }
            ],
        },
    ),
    "anthropic": (
        "/v1/messages",
        {
            "model": "m",
            "max_tokens": 16,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "what"},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": B64}},
                    ],
                }
            ],
        },
    ),
    "responses": (
        "/v1/responses",
        {
            "model": "m",
            "input": [
                {
                    "type": "message",
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "what"},
                        {"type": "input_image", "image_url": DATA_URL, "detail": "original"},
                    ],
                }
            ],
        },
    ),
    "google": (
        "/v1beta/models/m:generateContent",
        {
            "contents": [
                {"role": "user", "parts": [{"text": "what"}, {"inlineData": {"mimeType": "image/png", "data": B64}}]}
            ]
        },
    ),
}


@pytest.mark.parametrize("dialect", sorted(IMAGE_CALLS))
@pytest.mark.parametrize("stream", [False, True])
def test_an_image_reaches_the_engine_and_the_record_keeps_a_placeholder(upstream, tmp_path, dialect, stream):
    url, fake = upstream
    path, body = IMAGE_CALLS[dialect]
    if stream and dialect == "google":
        path = path.replace(":generateContent", ":streamGenerateContent?alt=sse")
    elif stream:
        body = {**body, "stream": True}
    with running_proxy(url, tmp_path) as proxy:
        answer = http.post(f"{proxy}{path}", json=body)
    assert answer.status_code == 200, answer.text
    user = fake.requests[-1]["messages"][-1]
    assert user["content"][0] == {"type": "text", "text": "what"}
    assert user["content"][1]["type"] == "image_url" and user["content"][1]["image_url"]["url"] == DATA_URL
    assert "detail" not in user["content"][1]["image_url"]  # codex's "original" is no detail an engine takes
    [record] = read_records(tmp_path)
    text = (tmp_path / next(p.name for p in tmp_path.glob("*.jsonl"))).read_text()
    assert B64 not in text and B64[:40] not in text  # never the bytes in the capture file
    assert all(m["sha256"] == SHA and m["bytes"] == len(PIXEL) and m["mime"] == "image/png" for m in record["media"])
    assert len(record["media"]) == 1 and record["media"][0]["where"].startswith("request.")
    placeholder = f"{PREFIX} image/png, {len(PIXEL)} bytes, sha256 {SHA}]"
    assert placeholder in json.dumps(record["request"]) and placeholder in json.dumps(record["submitted_request"])
    rollout = analyse(load_paths([tmp_path]).sessions[record["session_id"]])
    assert rollout.calls[0].prompt_ids is not None  # the record loads as an ordinary token call


def test_the_same_image_twice_reads_the_same_so_messages_still_link(upstream, tmp_path):
    url, _ = upstream
    _, body = IMAGE_CALLS["chat"]
    with running_proxy(url, tmp_path) as proxy:
        first = http.post(f"{proxy}/session/img/v1/chat/completions", json=body).json()
        reply = first["choices"][0]["message"]["content"]
        messages = [*body["messages"], {"role": "assistant", "content": reply}, {"role": "user", "content": "again"}]
        assert (
            http.post(f"{proxy}/session/img/v1/chat/completions", json={**body, "messages": messages}).status_code
            == 200
        )
    records = read_records(tmp_path)
    assert records[0]["request"]["messages"][0] == records[1]["request"]["messages"][0]
    assert analyse(load_paths([tmp_path]).sessions["img"]).linked_by == [None, "tokens"]


# --- reasoning ---------------------------------------------------------------------------------


def test_anthropic_thinking_is_signed_streamed_and_sent_back_as_reasoning(upstream, tmp_path):
    url, fake = upstream
    body = {
        "model": "fake-think",
        "max_tokens": 32,
        "thinking": {"type": "enabled", "budget_tokens": 16},
        "messages": [{"role": "user", "content": "hi"}],
    }
    with running_proxy(url, tmp_path) as proxy:
        plain = http.post(f"{proxy}/v1/messages", json=body).json()
        streamed = http.post(f"{proxy}/v1/messages", json={**body, "stream": True})
        thought = plain["content"][0]
        assert thought["type"] == "thinking" and thought["thinking"].startswith("thinking about")
        assert thought["signature"] == reasoning_signature(thought["thinking"])
        events = [data for _, data in sse_events(streamed.text)]
        deltas = [e["delta"] for e in events if e["type"] == "content_block_delta"]
        text = "".join(d.get("thinking", "") for d in deltas if d["type"] == "thinking_delta")
        assert text == thinking_text(fake) and text.strip() == thought["thinking"].strip()
        (signature,) = [d["signature"] for d in deltas if d["type"] == "signature_delta"]
        assert signature == reasoning_signature(text)
        back = [
            *body["messages"],
            {"role": "assistant", "content": plain["content"]},
            {"role": "user", "content": "go"},
        ]
        assert http.post(f"{proxy}/v1/messages", json={**body, "messages": back}).status_code == 200
    sent = fake.requests[-1]
    assert sent["chat_template_kwargs"] == {"enable_thinking": True}
    assistant = sent["messages"][1]
    assert assistant["reasoning_content"] == thought["thinking"] and assistant["reasoning"] == thought["thinking"]


def thinking_text(fake) -> str:
    """The reasoning the fake engine streamed for its last request (word by word, spaced)."""
    from tests.support.fake_upstream import render

    words = thinking(render(fake.requests[-1]["messages"])).split(" ")
    return "".join(w + " " for w in words)


def test_responses_reasoning_carries_encrypted_content_and_comes_back(upstream, tmp_path):
    url, fake = upstream
    body = {"model": "fake-think", "input": "hi", "reasoning": {"effort": "medium"}}
    with running_proxy(url, tmp_path) as proxy:
        first = http.post(f"{proxy}/v1/responses", json=body).json()
        item = first["output"][0]
        assert item["type"] == "reasoning" and decode_reasoning(item["encrypted_content"]).startswith("thinking about")
        streamed = http.post(f"{proxy}/v1/responses", json={**body, "stream": True})
        done = [d for name, d in sse_events(streamed.text) if name == "response.completed"][0]["response"]
        assert done["output"][0]["type"] == "reasoning"
        assert decode_reasoning(done["output"][0]["encrypted_content"]) == thinking_text(fake)
        # codex with store=false sends the item back with only its encrypted content
        returned = {
            "type": "reasoning",
            "id": item["id"],
            "summary": [],
            "encrypted_content": item["encrypted_content"],
        }
        items = [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
            returned,
            *first["output"][1:],
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go on"}]},
        ]
        assert http.post(f"{proxy}/v1/responses", json={**body, "input": items}).status_code == 200
    sent = fake.requests[-1]
    assert sent["chat_template_kwargs"] == {"enable_thinking": True}
    assistant = [m for m in sent["messages"] if m["role"] == "assistant"][0]
    assert assistant["reasoning_content"] == decode_reasoning(item["encrypted_content"])
    assert encode_reasoning("x") != "x" and decode_reasoning("not ours") == ""


def test_gemini_thoughts_come_back_as_reasoning(upstream, tmp_path):
    url, fake = upstream
    contents = [{"role": "user", "parts": [{"text": "hi"}]}]
    config = {"thinkingConfig": {"includeThoughts": True}}
    with running_proxy(url, tmp_path) as proxy:
        stream = http.post(
            f"{proxy}/v1beta/models/fake-think:streamGenerateContent?alt=sse",
            json={"contents": contents, "generationConfig": config},
        )
        events = [json.loads(line[6:]) for line in stream.text.split("\r\n\r\n") if line.startswith("data: ")]
        parts = [p for e in events for p in e["candidates"][0]["content"]["parts"]]
        thoughts = [p for p in parts if p.get("thought")]
        assert thoughts and all(p["thoughtSignature"] for p in thoughts)
        text = "".join(p["text"] for p in parts if not p.get("thought"))
        back = [*contents, {"role": "model", "parts": parts}, {"role": "user", "parts": [{"text": "go"}]}]
        assert (
            http.post(f"{proxy}/v1beta/models/fake-think:generateContent", json={"contents": back}).status_code == 200
        )
    assistant = fake.requests[-1]["messages"][1]
    assert assistant["content"] == text and assistant["reasoning_content"] == "".join(p["text"] for p in thoughts)


def test_a_chat_stream_with_vllm_reasoning_reassembles_with_it(upstream, tmp_path):
    url, _ = upstream
    body = {"model": "fake-think", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    with running_proxy(url, tmp_path) as proxy:
        assert http.post(f"{proxy}/session/think/v1/chat/completions", json=body).status_code == 200
    call = analyse(load_paths([tmp_path]).sessions["think"]).calls[0]
    assert call.response_message["reasoning"].startswith("thinking about")
    assert call.response_message["content"].startswith("ok t")


def test_the_sdks_accumulate_reasoning(upstream, tmp_path):
    anthropic = pytest.importorskip("anthropic")
    openai = pytest.importorskip("openai")
    url, _ = upstream
    with running_proxy(url, tmp_path) as proxy:
        claude = anthropic.Anthropic(base_url=proxy, api_key="sk-ant-test", max_retries=0)
        with claude.messages.stream(
            model="fake-think",
            max_tokens=32,
            thinking={"type": "enabled", "budget_tokens": 16},
            messages=[{"role": "user", "content": "hi"}],
        ) as stream:
            message = stream.get_final_message()
        thought, text = message.content
        assert thought.type == "thinking" and thought.signature == reasoning_signature(thought.thinking)
        assert text.text.startswith("ok t")
        codex = openai.OpenAI(base_url=f"{proxy}/v1", api_key="sk-test", max_retries=0)
        with codex.responses.stream(model="fake-think", input="hi", reasoning={"effort": "low"}) as stream:
            response = stream.get_final_response()
        reasoning, answer = response.output
        assert reasoning.type == "reasoning" and decode_reasoning(reasoning.encrypted_content).startswith("thinking")
        assert response.output_text.startswith("ok t")
