"""``capture`` options that change what the engine is asked, each recorded so the trace says so:
a per-session call budget, the output clamp (``--max-tokens``), ``--pin-sampling`` and
``--model`` (with the fallback to the engine's only model for a Gemini or Claude model name)."""

from __future__ import annotations

import json

import pytest

from rollout_graph.capture.server import BUDGET_STOP_MESSAGE
from rollout_graph.capture.tokens import parse_pins
from rollout_graph.ingest.load.files import load_paths
from rollout_graph.pipeline import analyse
from tests.support.capture_helpers import http, read_records, running_proxy, sse_events
from tests.support.fake_upstream import running_upstream


@pytest.fixture(scope="module")
def upstream():
    with running_upstream() as (url, fake):
        yield url, fake


CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
CALLS = {
    "chat": ("/v1/chat/completions", CHAT),
    "completions": ("/v1/completions", {"model": "m", "prompt": "hi"}),
    "anthropic": ("/v1/messages", {**CHAT, "max_tokens": 8}),
    "responses": ("/v1/responses", {"model": "m", "input": "hi"}),
    "google": ("/v1beta/models/m:generateContent", {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}),
}


def _answer_text(dialect: str, response, stream: bool) -> str:
    stream = stream and response.headers["content-type"].startswith("text/event-stream")  # the fake's
    # completions endpoint answers in one piece even when asked to stream
    if stream and dialect == "google":
        events = [json.loads(line[6:]) for line in response.text.split("\r\n\r\n") if line.startswith("data: ")]
        return "".join(p.get("text", "") for e in events for p in e["candidates"][0]["content"]["parts"])
    if stream:
        events = [d for _, d in sse_events(response.text) if isinstance(d, dict)]
        if dialect in ("chat", "completions"):
            return "".join(
                (c["choices"][0].get("delta") or {}).get("content") or c["choices"][0].get("text") or ""
                for c in events
                if c.get("choices")
            )
        if dialect == "anthropic":
            return "".join(e["delta"].get("text", "") for e in events if e["type"] == "content_block_delta")
        return "".join(e.get("delta", "") for e in events if e["type"] == "response.output_text.delta")
    body = response.json()
    return {
        "chat": lambda: body["choices"][0]["message"]["content"],
        "completions": lambda: body["choices"][0]["text"],
        "anthropic": lambda: body["content"][0]["text"],
        "responses": lambda: body["output"][0]["content"][0]["text"],
        "google": lambda: body["candidates"][0]["content"]["parts"][0]["text"],
    }[dialect]()


@pytest.mark.parametrize("dialect", sorted(CALLS))
@pytest.mark.parametrize("stream", [False, True])
def test_a_call_over_the_budget_gets_a_stop_in_its_dialect_and_never_reaches_the_engine(
    upstream, tmp_path, dialect, stream
):
    url, fake = upstream
    path, body = CALLS[dialect]
    if stream and dialect == "google":
        path = path.replace(":generateContent", ":streamGenerateContent?alt=sse")
    elif stream:
        body = {**body, "stream": True}
    sent = len(fake.requests)
    with running_proxy(url, tmp_path, call_budget=2) as proxy:
        answers = [http.post(f"{proxy}/session/b/{path.lstrip('/')}", json=body) for _ in range(3)]
        other = http.post(f"{proxy}/session/other/{path.lstrip('/')}", json=body)
    assert [a.status_code for a in answers] == [200, 200, 200] and other.status_code == 200
    assert len(fake.requests) - sent == 3  # two of session b, one of the other session
    assert _answer_text(dialect, answers[2], stream) == BUDGET_STOP_MESSAGE
    assert _answer_text(dialect, answers[0], stream).startswith("ok t")
    records = read_records(tmp_path)
    stops = [r for r in records if r.get("budget_stop")]
    assert len(stops) == 1 and stops[0]["session_id"] == "b" and "capture --call-budget 2" in stops[0]["error"]
    assert all(r["capture_options"] == {"call_budget": 2} for r in records)
    loaded = load_paths([tmp_path])
    assert loaded.loaded == 3 and any("call budget exhausted" in s.reason for s in loaded.skipped)


def test_the_output_clamp_lowers_and_fills_max_tokens_and_is_recorded(upstream, tmp_path):
    url, fake = upstream
    with running_proxy(url, tmp_path, max_tokens=3) as proxy:
        http.post(f"{proxy}/session/c/v1/chat/completions", json={**CHAT, "max_tokens": 100})
        http.post(f"{proxy}/session/c/v1/chat/completions", json=CHAT)
        http.post(f"{proxy}/session/c/v1/messages", json={**CHAT, "max_tokens": 32000})
    assert [r["max_tokens"] for r in fake.requests[-3:]] == [3, 3, 3]
    records = read_records(tmp_path)
    assert all(r["capture_options"] == {"max_tokens": 3} for r in records)
    assert "max_tokens" not in records[1]["request"] and records[1]["submitted_request"]["max_tokens"] == 3
    codes = [f.code for f in analyse(load_paths([tmp_path]).sessions["c"]).findings]
    assert codes.count("sampling_neutralised") == 2  # the two calls that asked for more


def test_pinned_sampling_is_sent_recorded_and_flagged_when_it_changed(upstream, tmp_path):
    url, fake = upstream
    pins = parse_pins("temperature=1,top_p=1, top_k=0")
    assert pins == {"temperature": 1.0, "top_p": 1.0, "top_k": 0}
    with running_proxy(url, tmp_path / "a", pin_sampling=pins) as proxy:
        http.post(f"{proxy}/session/p/v1/chat/completions", json={**CHAT, "temperature": 0.2, "top_p": 0.9})
        http.post(
            f"{proxy}/session/p/v1beta/models/m:generateContent",
            json={**CALLS["google"][1], "generationConfig": {"temperature": 0.7}},
        )
    assert [(r["temperature"], r["top_p"], r["top_k"]) for r in fake.requests[-2:]] == [(1.0, 1.0, 0)] * 2
    records = read_records(tmp_path / "a")
    assert all(r["capture_options"]["pin_sampling"] == pins for r in records)
    assert records[0]["request"]["temperature"] == 0.2 and records[0]["submitted_request"]["temperature"] == 1.0
    findings = analyse(load_paths([tmp_path / "a"]).sessions["p"]).findings
    assert {f.code for f in findings} >= {"sampling_neutralised"}
    assert "sampling_policy_changed" not in {f.code for f in findings}
    # a second proxy run pinned differently, into the same rollout: the policy changed
    with running_proxy(url, tmp_path / "a", pin_sampling={"temperature": 0.6}) as proxy:
        http.post(f"{proxy}/session/p/v1/chat/completions", json=CHAT)
    findings = analyse(load_paths([tmp_path / "a"]).sessions["p"]).findings
    changed = [f for f in findings if f.code == "sampling_policy_changed"]
    assert len(changed) == 1 and changed[0].level == "FATAL" and "temperature=0.6" in changed[0].detail


@pytest.mark.parametrize("text", ["temperature", "temp=1", "temperature=hot", "top_p=nan", ""])
def test_bad_pins_are_refused_with_the_reason(text):
    with pytest.raises(ValueError):
        parse_pins(text)


def test_a_model_name_the_engine_does_not_serve_becomes_its_only_model_and_is_flagged(upstream, tmp_path):
    url, fake = upstream
    with running_proxy(url, tmp_path, served_models=("fake-model",)) as proxy:
        http.post(f"{proxy}/session/g/v1beta/models/gemini-2.5-flash:generateContent", json=CALLS["google"][1])
        http.post(f"{proxy}/session/g/v1/chat/completions", json={**CHAT, "model": "gpt-x"})  # chat: as asked
    assert [r["model"] for r in fake.requests[-2:]] == ["fake-model", "gpt-x"]
    records = read_records(tmp_path)
    assert records[0]["behaviour_changed"] == ["model 'gemini-2.5-flash' -> 'fake-model' (the engine serves only it)"]
    assert "behaviour_changed" not in records[1]
    with running_proxy(url, tmp_path / "forced", model="forced-model") as proxy:
        http.post(f"{proxy}/session/f/v1/chat/completions", json=CHAT)
    assert fake.requests[-1]["model"] == "forced-model"
    (record,) = read_records(tmp_path / "forced")
    assert record["capture_options"] == {"model": "forced-model"}
    rollout = analyse(load_paths([tmp_path / "forced"]).sessions["f"])
    (finding,) = [f for f in rollout.findings if f.code == "behaviour_changed"]
    assert finding.level == "WARN" and "capture --model" in finding.detail


def test_the_cli_refuses_bad_option_values(capsys):
    from rollout_graph.cli import main

    for args, message in [
        (["--call-budget", "0"], "--call-budget must be 1 or more"),
        (["--pin-sampling", "temperature=x"], "--pin-sampling 'temperature=x': 'x' is not a number"),
    ]:
        code = main(["capture", "--upstream", "http://127.0.0.1:9", "--out", "x", *args])
        assert code == 2
        assert message in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["capture", "--upstream", "http://127.0.0.1:9", "--out", "x", "--max-response-bytes", "lots"])
    assert "not a size: 'lots'" in capsys.readouterr().err
