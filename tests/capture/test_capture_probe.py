"""The engine probes at start-up and what is read from them: the probe report beside the capture
file, the ``engine`` summary on every record, ``inspect`` / ``tail`` showing it, and the findings
it decides (``raw_logprobs``, ``no_tool_calling``, ``no_tool_call_emitted``,
``context_budget_exhausted``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from rollout_graph.capture.probe import PROBE_SUFFIX, probe_engine, summary
from rollout_graph.core.engine import describe, engines
from rollout_graph.ingest.load.files import load_paths
from rollout_graph.ingest.load.trace_files import trace_files
from rollout_graph.pipeline import analyse
from tests.support.capture_helpers import http, read_records, running_proxy
from tests.support.fake_upstream import FakeUpstream, capture_command, serve_in_thread
from tests.support.waiting import wait_until


def _fake(**settings) -> FakeUpstream:
    return FakeUpstream(**settings)


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({}, {"logprobs_mode": "processed", "tool_calling": "ok", "token_ids": True, "token_names": "token_id"}),
        ({"logprobs_mode": "raw"}, {"logprobs_mode": "raw"}),
        ({"tool_calling": "prose"}, {"tool_calling": "no-tool-call"}),
        ({"tool_calling": "rejected"}, {"tool_calling": "rejected"}),
        ({"token_ids": False}, {"token_ids": False, "prompt_ids": False}),
        ({"max_model_len": 4096}, {"max_model_len": 4096, "model": "fake-model", "model_served": True}),
    ],
)
def test_the_probes_tell_each_engine_setting_apart(settings, expected):
    fake = _fake(**settings)
    with serve_in_thread(fake.app()) as url:
        report = probe_engine(url, timeout=10)
    assert report["reachable"] and report["served_models"] == ["fake-model"]
    for key, value in expected.items():
        assert report[key] == value, key
    if report["logprobs_mode"] == "processed":
        assert report["temperature_gap"]["gaps"] == [1.0, 0.5] and report["temperature_gap"]["ratio"] == 0.5
    codes = {f.split("]")[1].split(":")[0].strip() for f in report["findings"]}
    assert ("raw_logprobs" in codes) == (report["logprobs_mode"] == "raw")
    assert ("no_tool_calling" in codes) == (report["tool_calling"] == "rejected")
    assert ("no_tool_call_emitted" in codes) == (report["tool_calling"] == "no-tool-call")
    assert len(fake.requests) <= 4  # one token probe, two temperature probes, one tool probe


def test_an_unreachable_engine_and_a_model_not_served_are_reported_not_raised():
    down = probe_engine("http://127.0.0.1:9", timeout=2)
    assert (
        down["reachable"] is False
        and down["errors"]
        and summary(down)
        == {
            "probed_at": down["probed_at"],
            "reachable": False,
        }
    )
    assert describe(summary(down)) == "engine not reachable at start-up: nothing probed"
    with serve_in_thread(_fake().app()) as url:
        report = probe_engine(url, model="other-model", timeout=10)
    assert report["model_served"] is False and any("model_not_served" in f for f in report["findings"])


@pytest.mark.slow
def test_capture_writes_the_probe_beside_its_file_and_stamps_every_record(tmp_path):
    fake = _fake(logprobs_mode="raw", max_model_len=64)
    out = tmp_path / "captures"
    with serve_in_thread(fake.app()) as url:
        port, command = capture_command(url, out)
        process = subprocess.Popen(
            command, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}
        )
        try:
            wait_until(lambda: _serving(port, process), timeout=60, what="the capture proxy to start")
            proxy = f"http://127.0.0.1:{port}"
            body = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}], "temperature": 1.5}
            assert http.post(f"{proxy}/session/hot/v1/chat/completions", json=body).status_code == 200
            cool = {**body, "temperature": 1}
            assert http.post(f"{proxy}/session/cool/v1/chat/completions", json=cool).status_code == 200
            long_prompt = {**body, "messages": [{"role": "user", "content": " ".join(["w"] * 50)}], "max_tokens": 30}
            assert http.post(f"{proxy}/session/long/v1/chat/completions", json=long_prompt).status_code == 400
            process.send_signal(signal.SIGINT)
            assert process.wait(30) == 0
            assert process.stderr is not None
            err = process.stderr.read()
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert "engine probe" in err and "logprobs raw" in err and "[WARN] raw_logprobs" in err, err
    (capture,) = out.glob("*.jsonl")
    probe_file = capture.with_name(capture.name.removesuffix(".jsonl") + PROBE_SUFFIX)
    report = json.loads(probe_file.read_text())
    assert report["logprobs_mode"] == "raw" and report["max_model_len"] == 64
    records = read_records(out)
    assert all(r["engine"]["logprobs_mode"] == "raw" and r["engine"]["probe"] == probe_file.name for r in records)
    assert "context_budget_exhausted" in records[-1]["error"]
    assert trace_files(out) == [capture]  # the probe report is never read as a trace
    loaded = load_paths([out])
    assert any("context_budget_exhausted" in s.reason for s in loaded.skipped)
    hot = analyse(loaded.sessions["hot"])
    cool = analyse(loaded.sessions["cool"])
    assert [(f.level, f.code) for f in hot.findings if f.code == "raw_logprobs"] == [("FATAL", "raw_logprobs")]
    assert "raw_logprobs" not in {f.code for f in cool.findings}
    assert "logprobs raw (top-2 gap 1 at T=1, 1 at T=2)" in describe(engines(hot.calls)[0])
    # what a reader sees: inspect's text and JSON, tail's first line for the session
    text = _cli("inspect", str(out))
    assert "engine: fake-model · context 64 · token ids yes · logprobs raw" in text
    payload = json.loads(_cli("inspect", "--json", str(out)))
    assert {s["session_id"]: s["engine"][0]["logprobs_mode"] for s in payload["sessions"]} == {
        "hot": "raw",
        "cool": "raw",
    }
    followed = _cli("tail", "--until-idle", "0", str(out))
    assert "engine: fake-model" in followed


def _cli(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "rollout_graph", *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _serving(port: int, process: subprocess.Popen) -> bool:
    assert process.poll() is None, "capture exited before it served"
    try:
        http.get(f"http://127.0.0.1:{port}/v1/models", timeout=1)
    except Exception:  # noqa: BLE001 - not listening yet
        return False
    return True


def test_no_probe_skips_the_probes_and_records_carry_no_engine(tmp_path):
    fake = _fake()
    with serve_in_thread(fake.app()) as url, running_proxy(url, tmp_path) as proxy:
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        assert http.post(f"{proxy}/v1/chat/completions", json=body).status_code == 200
    assert len(fake.requests) == 1 and "engine" not in read_records(tmp_path)[0]


@pytest.mark.parametrize(
    ("calling", "code", "level"), [("rejected", "no_tool_calling", "FATAL"), ("prose", "no_tool_call_emitted", "WARN")]
)
def test_tool_findings_come_from_the_probe_when_the_rollout_offers_tools(tmp_path, calling, code, level):
    fake = _fake(tool_calling=calling)
    with serve_in_thread(fake.app()) as url:
        engine = summary(probe_engine(url, timeout=10))
        fake.tool_calling = "prose"  # the harness's own calls go through either way
        with running_proxy(url, tmp_path, engine=engine) as proxy:
            tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
            body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": tools}
            assert http.post(f"{proxy}/session/t/v1/chat/completions", json=body).status_code == 200
            plain = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
            assert http.post(f"{proxy}/session/no-tools/v1/chat/completions", json=plain).status_code == 200
    loaded = load_paths([tmp_path])
    offered = analyse(loaded.sessions["t"])
    assert [(f.level, f.code) for f in offered.findings if f.code == code] == [(level, code)]
    assert code not in {f.code for f in analyse(loaded.sessions["no-tools"]).findings}


def test_the_apps_load_report_shows_the_engine(monkeypatch, tmp_path):
    from tests.support.apptest import app, no_errors
    from tests.support.builders import Turn, vllm_chat

    engine = {"model": "SmolLM2-135M-Instruct", "max_model_len": 8192, "token_ids": True, "logprobs_mode": "raw"}
    record = {**vllm_chat(Turn("a", [1, 2], [3])), "engine": engine}
    (tmp_path / "capture-x.jsonl").write_text(json.dumps(record) + "\n")
    at = app(monkeypatch, tmp_path)
    no_errors(at)
    from rollout_graph.escape import md

    shown = "SmolLM2-135M-Instruct · context 8,192 · token ids yes · logprobs raw"
    assert describe(engine) == shown
    assert f"Engine (capture probe): {md(shown, 300)}" in [c.value for c in at.caption]  # escaped for Markdown
