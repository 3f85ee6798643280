"""The Gemini API through the capture proxy (gemini-cli's dialect): generateContent,
streamGenerateContent with ``alt=sse`` and without, countTokens, sessions, the model from the
path, the key kept out of every file, and the loader reading what was recorded.

The official ``google-genai`` SDK plays the harness where it is installed; raw HTTP pins the wire
shapes (bare ``data:`` events, no ``[DONE]``) everywhere else.
"""

from __future__ import annotations

import json

import pytest

from rollout_graph.core.dialects import chat_messages, chat_sampling, chat_tools, google_chat_response
from rollout_graph.ingest.formats.dialect_bodies import as_chat_response
from rollout_graph.ingest.load.files import load_paths
from rollout_graph.pipeline import analyse
from tests.support.capture_helpers import http, read_records, running_proxy
from tests.support.fake_upstream import render, running_upstream

SECRET = "AIzaSy-dummy-SECRET-key"
LIST_DIR = {
    "name": "list_directory",
    "description": "List the files in a folder",
    "parametersJsonSchema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
}


@pytest.fixture(scope="module")
def upstream():
    with running_upstream() as (url, fake):
        yield url, fake


def gemini_body(contents: list, **extra) -> dict:
    return {
        "contents": contents,
        "systemInstruction": {"role": "user", "parts": [{"text": "You are a coding agent."}]},
        "tools": [{"functionDeclarations": [LIST_DIR]}],
        "generationConfig": {"temperature": 0, "topP": 1, "thinkingConfig": {"includeThoughts": True}},
        **extra,
    }


def sse_data(text: str) -> list[dict]:
    """Gemini SSE: ``data:`` lines and blank lines, nothing else (no event names, no [DONE])."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        if not block.strip():
            continue
        lines = block.split("\n")
        assert all(line.startswith("data: ") for line in lines), block[:200]
        events.append(json.loads("".join(line[6:] for line in lines)))
    return events


def test_a_gemini_cli_conversation_streams_translates_records_and_links(upstream, tmp_path):
    url, fake = upstream
    path = "/session/gem-1/v1beta/models/gemini-2.5-pro"
    first = [{"role": "user", "parts": [{"text": "list files CALL"}]}]
    with running_proxy(url, tmp_path) as proxy:
        r1 = http.post(
            f"{proxy}{path}:streamGenerateContent?alt=sse&key={SECRET}",
            json=gemini_body(first),
            headers={"x-goog-api-key": SECRET},
        )
        assert r1.status_code == 200 and r1.headers["content-type"].startswith("text/event-stream")
        assert "[DONE]" not in r1.text and "event:" not in r1.text
        events = sse_data(r1.text)
        parts = [p for e in events for c in e["candidates"] for p in c["content"]["parts"]]
        (call,) = [p["functionCall"] for p in parts if "functionCall" in p]
        assert call["name"] == "list_directory" and set(call["args"]) == {"n"} and call["id"]
        assert events[-1]["candidates"][0]["finishReason"] == "STOP"
        assert events[-1]["usageMetadata"]["promptTokenCount"] > 0
        assert {e["modelVersion"] for e in events} == {"gemini-2.5-pro"}  # the model from the path
        # turn 2: the call replayed as the model's content, its result as a functionResponse
        second = [
            *first,
            {"role": "model", "parts": [{"functionCall": call}]},
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"id": call["id"], "name": "list_directory", "response": {"output": "a.txt"}}}
                ],
            },
        ]
        r2 = http.post(f"{proxy}{path}:generateContent", json=gemini_body(second), headers={"x-goog-api-key": SECRET})
        assert r2.status_code == 200, r2.text
        answer = r2.json()
        (candidate,) = answer["candidates"]
        assert candidate["finishReason"] == "STOP" and candidate["content"]["role"] == "model"
        assert candidate["content"]["parts"][0]["text"].startswith("ok t")
        assert answer["usageMetadata"]["candidatesTokenCount"] > 0
    sent = fake.requests[-2:]
    assert sent[0]["stream"] is True and sent[0]["tools"][0]["function"]["name"] == "list_directory"
    assert sent[0]["messages"][0] == {"role": "system", "content": "You are a coding agent."}
    assert sent[0]["temperature"] == 0 and sent[0]["top_p"] == 1
    assert sent[0]["chat_template_kwargs"] == {"enable_thinking": True}
    tool_message = sent[1]["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == call["id"]
    assert json.loads(tool_message["content"]) == {"output": "a.txt"}
    assert fake.headers[-1]["authorization"] == f"Bearer {SECRET}"  # the key reaches the engine
    records = read_records(tmp_path)
    assert [r["dialect"] for r in records] == ["google", "google"]
    assert [r["stream"] for r in records] == [True, False]
    assert records[0]["endpoint"] == "/v1beta/models/gemini-2.5-pro:streamGenerateContent"
    assert records[0]["submitted_request"]["model"] == "gemini-2.5-pro"
    for file in tmp_path.iterdir():
        assert SECRET not in file.read_text(), file.name  # the key never reaches a file
    assert "key=[masked" in records[0]["query"] and "alt=sse" in records[0]["query"]
    rollout = analyse(load_paths([tmp_path]).sessions["gem-1"])
    assert rollout.linked_by == [None, "tokens"]
    assert all(c.shape.endswith("via google") for c in rollout.calls)
    messages = rollout.calls[1].request_messages
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool"]
    assert rollout.calls[0].requested_params["temperature"] == 0


def test_without_alt_sse_the_stream_is_a_json_array_and_errors_are_google_errors(upstream, tmp_path):
    url, _ = upstream
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    with running_proxy(url, tmp_path) as proxy:
        array = http.post(f"{proxy}/v1beta/models/m:streamGenerateContent", json=body)
        failed = http.post(f"{proxy}/v1beta/models/fake-error-400:generateContent", json=body)
        failed_stream = http.post(f"{proxy}/v1/models/fake-error-400:streamGenerateContent?alt=sse", json=body)
    assert array.status_code == 200 and array.headers["content-type"].startswith("application/json")
    events = array.json()
    assert isinstance(events, list) and events[-1]["candidates"][0]["finishReason"] == "STOP"
    assert "".join(p.get("text", "") for e in events for p in e["candidates"][0]["content"]["parts"]).startswith("ok t")
    assert failed.status_code == 400
    assert failed.json()["error"] == {"code": 400, "message": "fake failure 400", "status": "INVALID_ARGUMENT"}
    assert failed_stream.status_code == 400 and failed_stream.json()["error"]["status"] == "INVALID_ARGUMENT"
    records = read_records(tmp_path)
    assert [r.get("error") for r in records] == [None, "upstream HTTP 400", "upstream HTTP 400"]


def test_count_tokens_is_answered_by_the_engine_tokenizer_and_not_recorded(upstream, tmp_path):
    url, _ = upstream
    contents = [{"role": "user", "parts": [{"text": "count these four words"}]}]
    expected = len(render([{"role": "user", "content": "count these four words"}]))
    with running_proxy(url, tmp_path) as proxy:
        plain = http.post(f"{proxy}/v1beta/models/gemini-2.5-pro:countTokens", json={"contents": contents})
        wrapped = http.post(
            f"{proxy}/session/gem-2/v1beta/models/gemini-2.5-pro:countTokens",
            json={"generateContentRequest": {"model": "models/gemini-2.5-pro", "contents": contents}},
        )
    assert plain.status_code == 200 and plain.json()["totalTokens"] == expected
    assert wrapped.status_code == 200 and wrapped.json()["totalTokens"] == expected
    assert read_records(tmp_path) == []


def test_count_tokens_falls_back_to_an_estimate_without_tokenize(tmp_path):
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from tests.support.fake_upstream import serve_in_thread

    async def not_found(request):
        return JSONResponse({"detail": "Not Found"}, status_code=404)

    app = Starlette(routes=[Route("/{path:path}", not_found, methods=["GET", "POST"])])
    contents = [{"role": "user", "parts": [{"text": "x" * 400}]}]
    with serve_in_thread(app) as url, running_proxy(url, tmp_path) as proxy:
        answer = http.post(f"{proxy}/v1beta/models/m:countTokens", json={"contents": contents})
        claude = http.post(
            f"{proxy}/v1/messages/count_tokens",
            json={"model": "m", "messages": [{"role": "user", "content": "x" * 400}]},
        )
    assert answer.status_code == 200 and 100 <= answer.json()["totalTokens"] < 200
    assert claude.status_code == 200 and 100 <= claude.json()["input_tokens"] < 200


def test_thoughts_images_and_built_in_tools_are_read_and_noted(upstream, tmp_path):
    url, fake = upstream
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    contents = [
        {"role": "user", "parts": [{"text": "what is this"}, {"inlineData": {"mimeType": "image/png", "data": png}}]},
        {
            "role": "model",
            "parts": [
                {"text": "I looked.", "thought": True, "thoughtSignature": "c2ln"},
                {"text": "A pixel."},
            ],
        },
        {"role": "user", "parts": [{"text": "and now?"}]},
    ]
    body = {**gemini_body(contents), "tools": [{"functionDeclarations": [LIST_DIR]}, {"googleSearch": {}}]}
    with running_proxy(url, tmp_path) as proxy:
        answer = http.post(f"{proxy}/v1beta/models/fake-think:generateContent", json=body)
    assert answer.status_code == 200
    parts = answer.json()["candidates"][0]["content"]["parts"]
    assert (
        parts[0]["thought"] is True and parts[0]["text"].startswith("thinking about") and parts[0]["thoughtSignature"]
    )
    assert parts[1]["text"].startswith("ok t")
    sent = fake.requests[-1]["messages"]
    assert sent[1]["content"][1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}"}}
    assert sent[2]["reasoning_content"] == "I looked." and sent[2]["content"] == "A pixel."
    [record] = read_records(tmp_path)
    assert png not in json.dumps(record)  # never the bytes in the record
    assert record["media"][0]["mime"] == "image/png" and record["media"][0]["bytes"] == 70
    assert record["translation"] == [
        "built-in tool 'googleSearch' has no function declaration the engine could follow: not offered"
    ]


def test_the_loader_reads_gemini_bodies_recorded_by_another_proxy():
    request = gemini_body(
        [
            {"role": "user", "parts": [{"text": "list files"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "list_directory", "args": {"path": "."}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "list_directory", "response": {"output": "a"}}}]},
        ]
    )
    messages = chat_messages(request)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool"]
    assert messages[2]["tool_calls"][0]["function"] == {"name": "list_directory", "arguments": '{"path":"."}'}
    assert messages[3]["tool_call_id"] == messages[2]["tool_calls"][0]["id"]  # matched by name
    assert chat_tools(request)[0]["function"]["name"] == "list_directory"
    assert chat_sampling(request)["top_p"] == 1 and "generationConfig" not in chat_sampling(request)
    stream = [
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "Let me ", "thought": True}]}}]},
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hel"}]}}]},
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "lo"}]}, "finishReason": "MAX_TOKENS"}]},
        {"candidates": [], "usageMetadata": {"promptTokenCount": 7, "candidatesTokenCount": 3}},
    ]
    body = as_chat_response([f"data: {json.dumps(e)}" for e in stream])
    assert body == google_chat_response(stream)
    (choice,) = body["choices"]
    assert choice["message"]["content"] == "Hello" and choice["message"]["reasoning_content"] == "Let me "
    assert choice["finish_reason"] == "length" and body["usage"] == {"prompt_tokens": 7, "completion_tokens": 3}


def test_a_gemini_call_record_without_token_ids_links_by_messages(tmp_path):
    first = gemini_body([{"role": "user", "parts": [{"text": "hi"}]}])
    reply = {"candidates": [{"content": {"role": "model", "parts": [{"text": "hello"}]}, "finishReason": "STOP"}]}
    second = gemini_body(
        [
            {"role": "user", "parts": [{"text": "hi"}]},
            {"role": "model", "parts": [{"text": "hello"}]},
            {"role": "user", "parts": [{"text": "more"}]},
        ]
    )
    records = [
        {"session_id": "g", "call_id": "a", "dialect": "google", "request": first, "response": reply},
        {"session_id": "g", "call_id": "b", "dialect": "google", "request": second, "response": reply},
    ]
    (tmp_path / "gemini.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    rollout = analyse(load_paths([tmp_path]).sessions["g"])
    assert rollout.linked_by == [None, "messages"]
    assert rollout.calls[0].response_message["content"] == "hello"


def test_the_google_genai_sdk_calls_streams_and_counts_through_the_proxy(upstream, tmp_path):
    genai = pytest.importorskip("google.genai")
    from google.genai import types

    url, _ = upstream
    with running_proxy(url, tmp_path) as proxy:
        client = genai.Client(
            api_key=SECRET, http_options=types.HttpOptions(base_url=f"{proxy}/session/sdk-gemini", api_version="v1beta")
        )
        declaration = types.FunctionDeclaration(
            name="list_directory", description="list", parameters_json_schema=LIST_DIR["parametersJsonSchema"]
        )
        config = types.GenerateContentConfig(
            tools=[types.Tool(function_declarations=[declaration])], system_instruction="be brief", temperature=0.5
        )
        first = client.models.generate_content(model="gemini-2.5-flash", contents="list files CALL", config=config)
        (call,) = first.function_calls
        assert call.name == "list_directory" and call.args == {"n": 10} and call.id
        history = [
            types.Content(role="user", parts=[types.Part(text="list files CALL")]),
            first.candidates[0].content,
            types.Content(
                role="user",
                parts=[types.Part.from_function_response(name=call.name, response={"output": "a.txt"})],
            ),
        ]
        chunks = list(client.models.generate_content_stream(model="gemini-2.5-flash", contents=history, config=config))
        text = "".join(c.text or "" for c in chunks)
        assert text.startswith("ok t") and chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP
        assert chunks[-1].usage_metadata.candidates_token_count > 0
        counted = client.models.count_tokens(model="gemini-2.5-flash", contents="hello there")
        assert counted.total_tokens == len(render([{"role": "user", "content": "hello there"}]))
    records = read_records(tmp_path)
    assert [(r["dialect"], r["stream"]) for r in records] == [("google", False), ("google", True)]
    rollout = analyse(load_paths([tmp_path]).sessions["sdk-gemini"])
    assert rollout.linked_by == [None, "tokens"]
    for file in tmp_path.iterdir():
        assert SECRET not in file.read_text()
