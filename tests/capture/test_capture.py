"""The capture proxy (chat completions and completions) against the fake vLLM-shaped upstream."""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import socket
import subprocess
import threading
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rollout_graph.capture.sessions import recordable_headers, session_from_headers, split_session_path
from rollout_graph.capture.tokens import Added, add_capture_fields, strip_body, stripped_copy
from rollout_graph.capture.writer import RecordWriter, new_capture_path
from rollout_graph.ingest.load.files import load_paths
from rollout_graph.pipeline import analyse
from tests.support.capture_helpers import http, play_chat_harness, read_records, running_proxy, sse_events, stream_text
from tests.support.fake_upstream import capture_command, free_socket, render, running_upstream, tokenize
from tests.support.waiting import wait_until

INJECTED = ("prompt_token_ids", "token_ids")


@pytest.fixture(scope="module")
def upstream():
    with running_upstream() as (url, fake):
        yield url, fake


@pytest.fixture(scope="module")
def shared_proxy(upstream, tmp_path_factory):
    """One proxy for tests that do not read its records."""
    with running_proxy(upstream[0], tmp_path_factory.mktemp("shared")) as url:
        yield url


def _no_injected(body: dict) -> None:
    assert "prompt_token_ids" not in body
    for choice in body.get("choices") or ():
        for key in INJECTED:
            assert key not in choice, key
        assert choice.get("logprobs") is None


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
    except OSError:
        return False
    return True


def _serving(http: httpx.Client, port: int, process: subprocess.Popen) -> bool:
    """The capture proxy answers (an exited process fails the wait at once)."""
    assert process.poll() is None, "capture exited before it served"
    try:
        http.get(f"http://127.0.0.1:{port}/v1/models", timeout=1)
    except httpx.HTTPError:
        return False
    return True


def test_chat_call_is_recorded_with_tokens_and_returned_without_them(upstream, tmp_path):
    url, fake = upstream
    body = {"model": "m", "messages": [{"role": "user", "content": "hello there"}], "max_tokens": 8}
    with running_proxy(url, tmp_path) as proxy:
        r = http.post(f"{proxy}/v1/chat/completions", json=body, headers={"Authorization": "Bearer SECRET-1"})
    assert r.status_code == 200
    answer = r.json()
    _no_injected(answer)
    assert answer["choices"][0]["message"]["content"] == f"ok t{len(render(body['messages']))} done here"
    (record,) = read_records(tmp_path)
    assert record["request"] == body
    submitted = record["submitted_request"]
    assert submitted["return_token_ids"] is True and submitted["logprobs"] is True and submitted["top_logprobs"] == 5
    assert record["response"]["prompt_token_ids"] == render(body["messages"])
    assert len(record["response"]["choices"][0]["logprobs"]["content"][0]["top_logprobs"]) == 5
    assert record["session_id"] == next(tmp_path.glob("*.jsonl")).stem  # the run's default session
    assert record["ended_at"] >= record["started_at"] and record["status"] == 200
    assert fake.headers[-1]["authorization"] == "Bearer SECRET-1"  # forwarded ...
    assert "SECRET" not in next(tmp_path.glob("*.jsonl")).read_text()  # ... never recorded


def test_what_the_harness_asked_for_is_kept(upstream, tmp_path):
    url, _ = upstream
    messages = [{"role": "user", "content": "hi"}]
    with running_proxy(url, tmp_path) as proxy:
        own_top = http.post(
            f"{proxy}/v1/chat/completions",
            json={"model": "m", "messages": messages, "logprobs": True, "top_logprobs": 2, "return_token_ids": True},
        ).json()
        no_top = http.post(
            f"{proxy}/v1/chat/completions", json={"model": "m", "messages": messages, "logprobs": True}
        ).json()
    choice = own_top["choices"][0]
    assert choice["token_ids"] and own_top["prompt_token_ids"] == render(messages)
    assert all(len(e["top_logprobs"]) == 2 for e in choice["logprobs"]["content"])
    entries = no_top["choices"][0]["logprobs"]["content"]
    assert entries and all(e["top_logprobs"] == [] for e in entries)  # the added alternatives are emptied
    records = read_records(tmp_path)
    assert records[0]["submitted_request"]["top_logprobs"] == 2  # the harness's own value wins
    assert len(records[1]["response"]["choices"][0]["logprobs"]["content"][0]["top_logprobs"]) == 5


def test_stream_passes_through_chunk_by_chunk(tmp_path):
    with running_upstream(delay=0.05) as (url, _):
        with running_proxy(url, tmp_path) as proxy:
            body = {"model": "m", "messages": [{"role": "user", "content": "go"}], "stream": True, "max_tokens": 8}
            pieces = []
            with http.stream("POST", f"{proxy}/v1/chat/completions", json=body) as r:
                for line in r.iter_lines():
                    if '"content":"ok"' in line:
                        # The first token reached the harness while the upstream was still sampling:
                        # the call has not ended, so its record is not written yet.
                        assert read_records(tmp_path) == []
                    pieces.append(line)
    text, chunks = stream_text("\n".join(pieces))
    assert text == f"ok t{len(render(body['messages']))} done here"
    for chunk in chunks:
        _no_injected(chunk)
    assert [p for p in pieces if p][-1] == "data: [DONE]"
    (record,) = read_records(tmp_path)
    assert record["stream"] is True and record["ttft_s"] <= record["latency_s"]
    assert record["response"][-1] == "data: [DONE]"
    assert record["response"][0]["prompt_token_ids"] == render(body["messages"])


def test_completions_are_recorded_and_stripped(upstream, tmp_path):
    url, _ = upstream
    with running_proxy(url, tmp_path) as proxy:
        r = http.post(f"{proxy}/v1/completions", json={"model": "m", "prompt": "a b c", "max_tokens": 3})
    choice = r.json()["choices"][0]
    assert "token_ids" not in choice and "prompt_token_ids" not in choice and choice["logprobs"] is None
    (record,) = read_records(tmp_path)
    assert record["submitted_request"]["logprobs"] == 5
    loaded = load_paths([tmp_path])
    (call,) = next(iter(loaded.sessions.values())).calls
    assert call.shape == "completions" and call.prompt_ids.tolist() == tokenize("a b c")
    assert call.sampled_logprobs is not None and len(call.sampled_logprobs) == call.n_sampled == 3


def test_sessions_from_prefix_header_and_default(upstream, tmp_path):
    url, _ = upstream
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    with running_proxy(url, tmp_path, session_headers=("x-run",)) as proxy:
        http.post(f"{proxy}/session/alpha/v1/chat/completions", json=body, headers={"X-Session-Id": "ignored"})
        http.post(f"{proxy}/v1/chat/completions", json=body, headers={"X-Session-Id": "beta"})
        http.post(f"{proxy}/v1/chat/completions", json=body, headers={"x-claude-code-session-id": "gamma"})
        http.post(f"{proxy}/v1/chat/completions", json=body, headers={"thread-id": "delta", "x-run": "custom"})
        http.post(f"{proxy}/v1/chat/completions", json=body)
        models = http.get(f"{proxy}/session/alpha/v1/models")
    assert models.status_code == 200 and models.json()["data"][0]["id"] == "fake-model"
    records = read_records(tmp_path)
    default = next(tmp_path.glob("*.jsonl")).stem
    assert [r["session_id"] for r in records] == ["alpha", "beta", "gamma", "custom", default]
    assert len({r["call_id"] for r in records}) == 5  # GET /v1/models is not recorded


def test_concurrent_sessions_link_as_chains(upstream, tmp_path):
    url, _ = upstream
    n_sessions, turns = 12, 4
    with running_proxy(url, tmp_path) as proxy, httpx.Client(base_url=proxy, timeout=30) as client:
        with concurrent.futures.ThreadPoolExecutor(n_sessions) as pool:
            jobs = [
                pool.submit(play_chat_harness, client, f"/session/s{i}/v1/chat/completions", turns, i % 2 == 0)
                for i in range(n_sessions)
            ]
            for job in jobs:
                job.result()
    records = read_records(tmp_path)
    assert len(records) == n_sessions * turns and len({r["call_id"] for r in records}) == len(records)
    loaded = load_paths([tmp_path])
    assert loaded.loaded == len(records) and not loaded.skipped
    assert sorted(loaded.sessions) == sorted(f"s{i}" for i in range(n_sessions))
    for session in loaded.sessions.values():
        rollout = analyse(session)
        assert rollout.stats["n_roots"] == 1 and rollout.stats["n_leaves"] == 1, session.session_id
        assert rollout.linked_by.count("tokens") == turns - 1
        assert not [f for f in rollout.findings if f.level == "FATAL"]


def test_upstream_http_error_is_returned_and_recorded(upstream, tmp_path):
    url, _ = upstream
    body = {"model": "fake-error-500", "messages": [{"role": "user", "content": "x"}]}
    with running_proxy(url, tmp_path) as proxy:
        r = http.post(f"{proxy}/v1/chat/completions", json=body)
        streamed = http.post(f"{proxy}/v1/chat/completions", json={**body, "stream": True})
    assert r.status_code == 500 and r.json()["error"]["message"] == "fake failure 500"
    assert streamed.status_code == 500
    records = read_records(tmp_path)
    assert [rec["error"] for rec in records] == ["upstream HTTP 500"] * 2
    loaded = load_paths([tmp_path])
    assert loaded.records == 2 and loaded.loaded == 0
    assert all("call failed: upstream HTTP 500" in s.reason for s in loaded.skipped)


def test_unreachable_upstream_is_a_502(tmp_path):
    sock = free_socket()  # bound, never listening: connection refused
    dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    try:
        with running_proxy(dead, tmp_path) as proxy:
            r = http.post(f"{proxy}/v1/chat/completions", json={"model": "m", "messages": []})
    finally:
        sock.close()
    assert r.status_code == 502 and "upstream unreachable" in r.json()["error"]["message"]
    (record,) = read_records(tmp_path)
    assert record["status"] == 502 and record["error"].startswith("upstream unreachable")


def test_stream_cut_mid_way_is_cut_for_the_harness_and_recorded(upstream, tmp_path):
    url, _ = upstream
    body = {"model": "fake-cut", "messages": [{"role": "user", "content": "x"}], "stream": True, "max_tokens": 8}
    received = []
    with running_proxy(url, tmp_path) as proxy:
        with pytest.raises(httpx.HTTPError):
            with http.stream("POST", f"{proxy}/v1/chat/completions", json=body) as r:
                for line in r.iter_lines():
                    received.append(line)
    assert any('"content":"ok"' in line for line in received) and "data: [DONE]" not in received
    (record,) = read_records(tmp_path)
    assert record["error"].startswith("upstream stream cut")
    assert len([c for c in record["response"] if isinstance(c, dict)]) == 3  # role chunk + 2 tokens
    (skipped,) = load_paths([tmp_path]).skipped
    assert "stream cut" in skipped.reason


def test_bad_request_body_is_a_400_and_recorded(upstream, tmp_path):
    url, _ = upstream
    with running_proxy(url, tmp_path) as proxy:
        r = http.post(f"{proxy}/v1/chat/completions", content=b"{not json")
    assert r.status_code == 400
    (record,) = read_records(tmp_path)
    assert record["error"] == "request body is not a JSON object"


def test_many_concurrent_calls_write_whole_lines(upstream, tmp_path):
    url, _ = upstream
    long_text = "word " * 2000  # lines of ~100 kB, well past a pipe buffer
    body = {"model": "m", "messages": [{"role": "user", "content": long_text}], "max_tokens": 4}

    def call(i: int) -> int:
        return http.post(f"{proxy}/session/s{i % 3}/v1/chat/completions", json=body, timeout=30).status_code

    with running_proxy(url, tmp_path) as proxy, concurrent.futures.ThreadPoolExecutor(16) as pool:
        assert set(pool.map(call, range(48))) == {200}
    records = read_records(tmp_path)  # every line parses
    assert len(records) == 48 and len({r["call_id"] for r in records}) == 48


def test_capture_files_are_never_overwritten(tmp_path):
    first = new_capture_path(tmp_path, started=0)
    first.write_text("keep\n")
    second = new_capture_path(tmp_path, started=0)
    assert second != first and second.name == "capture-19700101T000000Z-2.jsonl"
    writer = RecordWriter.in_folder(tmp_path)
    writer.write({"a": 1})
    writer.close()
    assert first.read_text() == "keep\n" and writer.path is not None and writer.path.read_text() == '{"a":1}\n'


def test_session_and_header_rules():
    assert split_session_path("/session/abc/v1/messages") == ("abc", "/v1/messages")
    assert split_session_path("/v1/models") == (None, "/v1/models")
    assert session_from_headers({"session-id": "c1", "thread-id": "t1"}) == "c1"
    assert session_from_headers({"x-session-id": " "}) is None
    kept = recordable_headers(
        {"Authorization": "x", "x-api-key": "y", "Cookie": "z", "user-agent": "codex", "x-session-id": "s"}
    )
    assert kept == {"user-agent": "codex", "x-session-id": "s"}


def test_stripping_a_copy_leaves_the_recorded_body_whole():
    entry = {"token": "token_id:4", "logprob": -0.1, "top_logprobs": [{"token": "token_id:4", "logprob": -0.1}]}
    body = {"prompt_token_ids": [1], "choices": [{"token_ids": [4], "logprobs": {"content": [entry]}}]}
    before = json.dumps(body)
    for added in (Added(True, True, False), Added(True, False, True)):
        copy = stripped_copy(body, added)
        assert json.dumps(body) == before and copy == strip_body(json.loads(before), added)


def test_capture_fields_are_added_only_when_absent():
    submitted, added = add_capture_fields({"logprobs": False}, "/v1/chat/completions", 3)
    assert submitted == {"logprobs": True, "top_logprobs": 3, "return_token_ids": True}
    assert added == Added(token_ids=True, logprobs=True, top_logprobs=False)
    body = {"prompt_token_ids": [1], "choices": [{"token_ids": [2], "logprobs": {"content": []}}]}
    assert strip_body(body, added) == {"choices": [{"logprobs": None}]}
    _, nothing = add_capture_fields(
        {"logprobs": True, "top_logprobs": 1, "return_token_ids": True}, "/v1/chat/completions", 3
    )
    assert not nothing.anything


@pytest.mark.slow
@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
def test_sigint_drains_in_flight_calls_flushes_and_exits_zero(tmp_path, stop_signal):
    out = tmp_path / "captures"
    with running_upstream() as (url, _):
        port, command = capture_command(url, out)
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
        try:
            wait_until(lambda: _serving(http, port, process), timeout=20, what="the capture proxy to start")
            body = {"model": "fake-slow", "messages": [{"role": "user", "content": "x"}], "stream": True}
            result: dict = {}
            first_chunk = threading.Event()

            def harness() -> None:
                lines = []
                with http.stream("POST", f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=30) as r:
                    for line in r.iter_lines():
                        lines.append(line)
                        first_chunk.set()
                result["lines"] = lines

            thread = threading.Thread(target=harness)
            thread.start()
            assert first_chunk.wait(10)
            process.send_signal(stop_signal)  # mid-stream: ~0.8 s of tokens still to come
            thread.join(30)
            assert process.wait(30) == 0
            assert process.stderr is not None
            err = process.stderr.read()
            assert "chat stream · 200" in err and "stopped; 1 call(s) recorded in" in err, err
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert "data: [DONE]" in result["lines"]  # the in-flight call finished
    (record,) = read_records(out)
    assert "error" not in record and record["response"][-1] == "data: [DONE]"
    assert sse_events("\n".join(result["lines"]))


def test_capture_cli_rejects_bad_options(capsys):
    from rollout_graph.cli import main

    assert main(["capture", "--upstream", "localhost:8000", "--out", "x"]) == 2
    assert "not an http(s) URL" in capsys.readouterr().err


def test_capture_file_name_in_cli_help():
    from rollout_graph.cli import parser

    assert "capture" in parser().format_help()


def test_out_must_be_a_folder(tmp_path: Path, capsys):
    from rollout_graph.cli import main

    file = tmp_path / "f"
    file.write_text("")
    assert main(["capture", "--upstream", "http://127.0.0.1:1", "--out", str(file)]) == 2
    assert "is a file" in capsys.readouterr().err


def test_a_port_in_use_is_one_line_and_no_file(tmp_path: Path, capsys):
    from rollout_graph.cli import main

    sock = free_socket()
    sock.listen()
    try:
        port = sock.getsockname()[1]
        assert (
            main(["capture", "--upstream", "http://127.0.0.1:1", "--out", str(tmp_path / "c"), "--port", str(port)])
            == 2
        )
    finally:
        sock.close()
    assert "cannot listen on 127.0.0.1" in capsys.readouterr().err and not (tmp_path / "c").exists()


def test_upstream_timeouts_fail_the_call_instead_of_hanging(upstream, tmp_path):
    url, _ = upstream
    body = {"model": "fake-slow", "messages": [{"role": "user", "content": "x"}]}
    with running_proxy(url, tmp_path, timeout=0.1) as proxy:
        r = http.post(f"{proxy}/v1/chat/completions", json=body)
        with pytest.raises(httpx.HTTPError):  # a stream that stalls is cut, as a dead engine would cut it
            http.post(f"{proxy}/v1/chat/completions", json={**body, "stream": True}).raise_for_status()
    assert r.status_code == 504 and "timed out" in r.json()["error"]["message"]
    errors = [rec["error"] for rec in read_records(tmp_path)]
    assert errors[0].startswith("upstream timed out") and errors[1].startswith("upstream stream cut: ReadTimeout")


def test_a_harness_hanging_up_mid_stream_is_recorded(tmp_path):
    with running_upstream(delay=0.2) as (url, _):
        body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": True}
        with running_proxy(url, tmp_path) as proxy:
            with http.stream("POST", f"{proxy}/v1/chat/completions", json=body) as r:
                for line in r.iter_lines():
                    if line.startswith("data:"):
                        break  # the harness gives up after the first chunk
            wait_until(lambda: read_records(tmp_path), timeout=10, what="the record of the cut stream")
    (record,) = read_records(tmp_path)
    assert record["error"].startswith("stream ended early")


def _comparable(value):
    """A body without nulls and per-call ids/times, to compare two answers to the same request."""
    if isinstance(value, dict):
        return {k: _comparable(v) for k, v in value.items() if v is not None and k not in ("id", "created")}
    if isinstance(value, (list, tuple)):
        return [_comparable(v) for v in value]
    return value


FLAG = st.sampled_from([None, False, True])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    logprobs=FLAG,
    top=st.sampled_from([None, 0, 2]),
    token_ids=FLAG,
    stream=st.booleans(),
    completions=st.booleans(),
)
def test_the_harness_gets_what_the_engine_would_have_answered(
    upstream, shared_proxy, logprobs, top, token_ids, stream, completions
):
    assume(not (completions and top is not None))  # top_logprobs is a chat option
    url, _ = upstream
    if completions:
        path, body = "/v1/completions", {"model": "m", "prompt": "a b", "max_tokens": 3, "stream": stream}
        if logprobs:
            body["logprobs"] = 2
    else:
        path = "/v1/chat/completions"
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "stream": stream}
        for key, value in (("logprobs", logprobs), ("top_logprobs", top)):
            if value is not None:
                body[key] = value
    if token_ids is not None:
        body["return_token_ids"] = token_ids
    direct = http.post(url + path, json=body)
    through = http.post(shared_proxy + path, json=body)
    assert through.status_code == direct.status_code == 200
    if stream:
        assert _comparable(sse_events(through.text)) == _comparable(sse_events(direct.text))
    else:
        assert _comparable(through.json()) == _comparable(direct.json())


def test_the_documented_capture_record_loads(tmp_path):
    import re

    text = (Path(__file__).resolve().parents[2] / "docs" / "formats.md").read_text()
    section = text[text.index("## Capture records") :]
    record = json.loads(re.search(r"```json\n(.*?)```", section, re.S).group(1))
    (tmp_path / "c.jsonl").write_text(json.dumps(record) + "\n")
    (call,) = load_paths([tmp_path]).sessions["run-1"].calls
    assert call.node_id == "3f9a1c-00007" and call.prompt_ids.tolist() == [1, 2, 3] and call.sampled_ids.tolist() == [4]
    assert call.submitted_params == {} and call.timing["ttft_s"] == 0.041


@pytest.mark.slow
def test_a_second_ctrl_c_stops_at_once_and_still_writes_the_open_call(tmp_path):
    out = tmp_path / "captures"
    with running_upstream() as (url, _):
        port, command = capture_command(url, out)
        process = subprocess.Popen(command, stderr=subprocess.DEVNULL)
        try:
            wait_until(lambda: _serving(http, port, process), timeout=20, what="the capture proxy to start")
            first_chunk = threading.Event()

            def harness() -> None:
                body = {"model": "fake-slow", "messages": [{"role": "user", "content": "x"}], "stream": True}
                body["max_tokens"] = 64  # five chunks 0.2 s apart
                try:
                    with http.stream("POST", f"http://127.0.0.1:{port}/v1/chat/completions", json=body) as r:
                        for _ in r.iter_lines():
                            first_chunk.set()
                except httpx.HTTPError:
                    pass  # cut by the forced stop

            thread = threading.Thread(target=harness)
            thread.start()
            assert first_chunk.wait(10)
            process.send_signal(signal.SIGINT)
            # the first Ctrl-C is handled once the proxy stops listening (it drains the open call)
            wait_until(lambda: not _listening(port), timeout=10, what="the proxy to stop listening")
            process.send_signal(signal.SIGINT)  # do not wait for the call
            assert process.wait(10) == 0
            thread.join(10)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    (record,) = read_records(out)
    assert record["error"] and record["response"][0]["choices"][0]["delta"]["role"] == "assistant"
