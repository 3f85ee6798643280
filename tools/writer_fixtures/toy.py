"""A toy vLLM-shaped engine and a scripted 10-call coding-agent harness, for the OpenEnv writers.

Run inside the writers' venv (fastapi, uvicorn, httpx: OpenEnv's own dependencies); nothing here
imports rollout_graph. ``engine`` answers ``/v1/chat/completions`` as ``vllm serve
--return-tokens-as-token-ids --logprobs-mode processed_logprobs`` does: ``prompt_token_ids`` at the
top, ``choices[0].token_ids``, ``logprobs.content`` entries ``{"token": "token_id:N", "logprob",
"bytes", "top_logprobs"}`` -- ids only when the request sets ``return_token_ids``, logprobs only
when it sets ``logprobs`` (so a ``text``-level caller gets neither). Its tokenizer is a toy one:
BOS, [TOOLS + tool names], per message ROLE + UTF-8 bytes (+256) + END, then ROLE assistant; a
completion is bytes + END, so every follow-up prompt extends the previous prompt + completion
exactly. ``serve(app)`` runs an app on 127.0.0.1 (an ephemeral port) in a daemon thread.
``run_harness(base_url, key)`` drives the rollout (see its docstring).
"""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import uvicorn
from fastapi import FastAPI, Request

BOS, END, TOOLS = 1, 2, 7
ROLE = {"system": 3, "user": 4, "assistant": 5, "tool": 6}
MODEL = "toy/tiny-coder"


def enc(text: str) -> list[int]:
    return [256 + b for b in text.encode()]


def render_calls(calls) -> str:
    return "".join(f"<call {c['function']['name']}>{c['function']['arguments']}</call>" for c in calls or [])


def render_msg(m: dict) -> list[int]:
    content = m.get("content") or ""
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return [ROLE[m["role"]]] + enc(content) + enc(render_calls(m.get("tool_calls"))) + [END]


def render_prompt(messages, tools) -> list[int]:
    ids = [BOS]
    if tools:
        ids += [TOOLS] + enc(json.dumps([t["function"]["name"] for t in tools]))
    for m in messages:
        ids += render_msg(m)
    return ids + [ROLE["assistant"]]


def logprob_of(i: int, token: int) -> float:
    """Deterministic, negative; the END token is certain (0.0, OpenEnv's INFO certain_tokens)."""
    return -round(0.01 + ((token * 7919 + i * 104729) % 997) / 400.0, 4)


NEXT_REPLY: list[dict] = []  # the scripted harness queues the engine's next sample here
engine = FastAPI()


@engine.get("/v1/models")
async def models():
    return {"object": "list", "data": [{"id": MODEL, "object": "model"}]}


def _entry(token: int, lp: float, k: int) -> dict:
    spelled = f"token_id:{token}"
    top = [{"token": spelled, "logprob": lp, "bytes": list(spelled.encode())}]
    for j in range(1, k):
        alt = f"token_id:{(token + j) % 50000}"
        top.append({"token": alt, "logprob": round(lp - j, 4), "bytes": list(alt.encode())})
    text = bytes([token - 256]) if token >= 256 else b""
    return {"token": spelled, "logprob": lp, "bytes": list(text), "top_logprobs": top}


@engine.post("/v1/chat/completions")
async def chat(request: Request):
    body = await request.json()
    reply = NEXT_REPLY.pop(0)
    prompt = render_prompt(body.get("messages") or [], body.get("tools"))
    completion = enc(reply.get("content") or "") + enc(render_calls(reply.get("tool_calls"))) + [END]
    lps = [logprob_of(i, t) for i, t in enumerate(completion)]
    lps[-1] = 0.0
    message = {"role": "assistant", "content": reply.get("content")}
    if reply.get("tool_calls"):
        message["tool_calls"] = reply["tool_calls"]
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls" if reply.get("tool_calls") else "stop"}
    out = {
        "id": f"chatcmpl-{len(prompt)}-{len(completion)}",
        "object": "chat.completion",
        "created": 1765000000,
        "model": body.get("model"),
        "choices": [choice],
        "usage": {
            "prompt_tokens": len(prompt),
            "completion_tokens": len(completion),
            "total_tokens": len(prompt) + len(completion),
        },
    }
    if body.get("logprobs"):
        k = int(body.get("top_logprobs") or 0)
        choice["logprobs"] = {"content": [_entry(t, lp, k) for t, lp in zip(completion, lps, strict=True)]}
    if body.get("return_token_ids"):
        out["prompt_token_ids"] = prompt
        choice["token_ids"] = completion
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(app) -> tuple[uvicorn.Server, str]:
    """Run ``app`` on 127.0.0.1 in a daemon thread; stop it with ``server.should_exit = True``."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:  # noqa: ASYNC110 - a thread, polled until it serves
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("a local server failed to start (see the traceback above)")
        time.sleep(0.02)
    return server, f"http://127.0.0.1:{port}"


TOOLS_MANIFEST = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a shell command",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "write_file",
            "description": "Write a file",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            },
        },
    },
]


def tool_call(name: str, **args) -> dict:
    return {
        "id": f"call_{name}_{len(json.dumps(args))}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def run_harness(base_url: str, key: str) -> None:
    """Ten model calls, the session id as the API key, in this arrival order:

    0 the agent's first call (tools offered), resampled: 1 is the same prompt again and continues,
    so 0 is a discarded root; 2 a title call (a toolless root: OpenEnv's ``auxiliary``); 3 a tool
    call the harness rejects and resamples as 4 (a discarded retry); 5 runs the tests; 6 and 7 two
    branches after the same tool call (a fork), each continued once more by 8 and 9. Every request
    asks for temperature 0.7 and top_p 0.95 (the title 0.3): the proxy submits top_p 1.0 and warns
    ``sampling_neutralised``.
    """
    client = httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {key}"}, timeout=60)

    def complete(messages, reply, tools=TOOLS_MANIFEST, temperature=0.7):
        NEXT_REPLY.append(reply)
        body = {"model": "tiny-coder", "messages": messages, "temperature": temperature, "top_p": 0.95}
        if tools:
            body["tools"] = tools
        r = client.post("/v1/chat/completions", json=body)
        r.raise_for_status()
        return r.json()["choices"][0]["message"]

    def step(messages, reply, tool_result=None):
        msg = complete(messages, reply)
        turn = {"role": "assistant", "content": msg.get("content")}
        if msg.get("tool_calls"):
            turn["tool_calls"] = msg["tool_calls"]
        out = [*messages, turn]
        if tool_result is not None:
            out.append({"role": "tool", "tool_call_id": msg["tool_calls"][0]["id"], "content": tool_result})
        return out

    task = "Fix the failing test in calc.py"
    first = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": task}]
    complete(first, {"content": "", "tool_calls": [tool_call("bash", command="pytest")]})  # 0: resampled
    m = step(first, {"content": "", "tool_calls": [tool_call("bash", command="pytest -q")]}, "1 failed: test_add")
    complete(  # 2: the title
        [{"role": "system", "content": "Generate a short title."}, {"role": "user", "content": task}],
        {"content": "Fix add() sign bug"},
        tools=None,
        temperature=0.3,
    )
    complete(m, {"content": "", "tool_calls": [tool_call("write_file", path="calc.py")]})  # 3: rejected
    fixed = tool_call("write_file", path="calc.py", content="def add(a, b): return a + b")
    m = step(m, {"content": "", "tool_calls": [fixed]}, "ok")  # 4
    m_fork = step(m, {"content": "", "tool_calls": [tool_call("bash", command="pytest -q")]}, None)  # 5
    call_id = m_fork[-1]["tool_calls"][0]["id"]
    a = [*m_fork, {"role": "tool", "tool_call_id": call_id, "content": "1 passed"}]
    b = [*m_fork, {"role": "tool", "tool_call_id": call_id, "content": "1 passed in 0.01s (rerun)"}]
    a = step(a, {"content": "", "tool_calls": [tool_call("bash", command="git diff")]}, "+return a + b")  # 6
    b = step(b, {"content": "", "tool_calls": [tool_call("bash", command="git status")]}, " M calc.py")  # 7
    step(a, {"content": "Fixed add(): it subtracted instead of adding."})  # 8
    step(b, {"content": "Done: calc.add fixed."})  # 9
