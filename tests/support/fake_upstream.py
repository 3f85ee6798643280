"""A small vLLM-shaped engine for tests and benchmarks (loopback only, no model).

Tokenizer: every space-separated word is one token, id ``10 + crc32(word) % 30000``; a chat
prompt is rendered as ``[ROLE] words... [END]`` per message (tool calls as ``<tool_call> name
arguments``) and ends with the assistant header, so a harness that replays the model's answer
extends the previous prompt exactly (the calls link as a chain).

Answers are deterministic: ``ok t<prompt length> ...`` up to ``max_tokens`` words (default 4),
then the end token. With tools offered and ``CALL`` in the last message (a user message), the answer is one
tool call to the first tool. Token ids come back only with ``return_token_ids``, logprobs only
with ``logprobs`` (tokens as ``token_id:N``, ``top_logprobs`` alternatives when asked), as vLLM
does. Streams send one chunk per token, ``delay`` seconds apart.

Engine settings (fields of :class:`FakeUpstream`, for the start-up probes): ``logprobs_mode``
(``processed``: the gap between the top alternatives shrinks as ``1/T`` when the request sets a
temperature; ``raw``: it does not), ``tool_calling`` (``ok``: the probe's "Use the bash tool"
request gets a tool call too; ``prose``; ``rejected``: ``tool_choice: auto`` is a 400, as vLLM
without ``--enable-auto-tool-choice``), ``max_model_len`` (when set: a prompt plus ``max_tokens`` over it is
vLLM's 400) and ``token_ids`` (False: ``return_token_ids`` is ignored). Image parts render as the
word ``<image:N>`` (N: the URL's length). ``fake-think`` answers with reasoning first, in vLLM
0.32's ``reasoning`` field (streamed as ``reasoning`` deltas).

Misbehaviour by model name: ``fake-error-500`` (an HTTP 500 JSON error), ``fake-error-400``,
``fake-cut`` (the stream stops after two tokens, the connection cut), ``fake-stream-error``
(an error event after two tokens, as vLLM sends one), ``fake-no-stream`` (answers in one piece
even when asked to stream), ``fake-slow`` (0.2 s per
chunk, 1 s before a non-streamed answer). Run it with :func:`running_upstream` (a thread) or ``python -m tests.support.fake_upstream PORT``.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
import threading
import time
import zlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

ROLE_IDS = {"system": 1, "developer": 1, "user": 2, "assistant": 3, "tool": 4}
END = 5
TOOL_CALL = 6
MODEL = "fake-model"


def word_id(word: str) -> int:
    """The id of one word (deterministic across processes)."""
    return 10 + zlib.crc32(word.encode()) % 30000


def tokenize(text: str) -> list[int]:
    """Space-separated words -> ids."""
    return [word_id(w) for w in text.split(" ") if w]


def _part_text(part: dict) -> str:
    if part.get("type") == "image_url":
        url = (part.get("image_url") or {}).get("url", "")
        return f"<image:{len(url)}>"
    return str(part.get("text", ""))


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(_part_text(p) for p in content if isinstance(p, dict))
    return ""


def _call_words(name: str, arguments: str) -> str:
    return f"<tool_call> {name} {arguments}"


def render(messages: list[dict]) -> list[int]:
    """The chat template: role id, content words, tool calls, end id; then the assistant header."""
    ids: list[int] = []
    for message in messages:
        ids.append(ROLE_IDS.get(str(message.get("role")), 2))
        ids += tokenize(_content_text(message.get("content")))
        for call in message.get("tool_calls") or ():
            fn = call.get("function") or {}
            ids.append(TOOL_CALL)
            ids += tokenize(_call_words(fn.get("name", ""), fn.get("arguments", "")).removeprefix("<tool_call> "))
        ids.append(END)
    ids.append(ROLE_IDS["assistant"])
    return ids


def thinking(prompt: list[int]) -> str:
    """The fake model's reasoning for a prompt (``fake-think``)."""
    return f"thinking about t{len(prompt)} first"


def logprob_of(token: int) -> float:
    """A deterministic logprob for a token."""
    return -round((token % 97) / 100 + 0.01, 4)


@dataclass
class Answer:
    """What the fake model samples for one prompt."""

    pieces: list[str]  # text per token ("" for the end token)
    ids: list[int]
    finish: str
    tool_call: dict | None = None


PROBE_TOOL_PROMPT = "Use the bash tool"  # what the capture proxy's tool probe asks


def answer(prompt: list[int], body: dict, last_user: str, tool_calling: str = "ok") -> Answer:
    """The deterministic answer to a prompt."""
    limit = body.get("max_tokens") or body.get("max_completion_tokens") or 16
    tools = body.get("tools") or []
    if tools and ("CALL" in last_user or (tool_calling == "ok" and last_user.startswith(PROBE_TOOL_PROMPT))):
        fn = tools[0].get("function") or {}
        name = fn.get("name", "tool")
        arguments = '{"n":' + str(len(prompt)) + "}"
        words = [name, arguments]
        ids = [TOOL_CALL, *tokenize(" ".join(words)), END]
        call = {"id": f"call_{len(prompt)}", "type": "function", "function": {"name": name, "arguments": arguments}}
        return Answer(["", name, arguments, ""], ids, "tool_calls", call)
    words = ["ok", f"t{len(prompt)}", "done", "here"]
    n = min(int(limit), len(words))
    pieces = [("" if i == 0 else " ") + w for i, w in enumerate(words[:n])]
    ids = [word_id(w) for w in words[:n]]
    if n < int(limit):
        return Answer([*pieces, ""], [*ids, END], "stop")
    return Answer(pieces, ids, "length")


def _top(token: int, k: int, gap: float = 0.5) -> list[dict]:
    if k <= 0:
        return []
    alts = [token] + [token + j for j in range(1, k)]
    return [
        {"token": f"token_id:{t}", "logprob": logprob_of(token) - gap * j, "bytes": None} for j, t in enumerate(alts)
    ]


def alternatives_gap(body: dict, mode: str) -> float:
    """The gap between neighbouring alternatives: 0.5 when the request sets no temperature, else
    1 nat at T=1, divided by T for processed logprobs (raw ones do not move)."""
    temperature = body.get("temperature")
    if not isinstance(temperature, int | float) or isinstance(temperature, bool):
        return 0.5
    return 1.0 if mode == "raw" or temperature <= 0 else 1.0 / float(temperature)


@dataclass
class FakeUpstream:
    """The engine's state: settings tests may change, and what it received."""

    delay: float = 0.0
    requests: list[dict] = field(default_factory=list)
    headers: list[dict] = field(default_factory=list)
    logprobs_mode: str = "processed"
    tool_calling: str = "ok"  # "ok", "prose" or "rejected"
    max_model_len: int | None = None  # None: no context window (nothing refused)
    token_ids: bool = True

    def app(self) -> Starlette:
        """The Starlette app."""
        return Starlette(
            routes=[
                Route("/v1/chat/completions", self.chat, methods=["POST"]),
                Route("/v1/completions", self.completions, methods=["POST"]),
                Route("/v1/models", self.models, methods=["GET"]),
                Route("/tokenize", self.tokenize, methods=["POST"]),
            ]
        )

    async def models(self, request: Request) -> Response:
        model: dict[str, Any] = {"id": MODEL, "object": "model", "owned_by": "fake"}
        if self.max_model_len is not None:
            model["max_model_len"] = self.max_model_len
        return JSONResponse({"object": "list", "data": [model]})

    async def tokenize(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        tokens = render(body.get("messages") or []) if "messages" in body else tokenize(str(body.get("prompt", "")))
        return JSONResponse({"count": len(tokens), "max_model_len": 8192, "tokens": tokens})

    def _error(self, body: dict) -> Response | None:
        model = str(body.get("model", ""))
        if model.startswith("fake-error-"):
            status = int(model.rsplit("-", 1)[1])
            error = {"message": f"fake failure {status}", "type": "BadRequestError", "param": None, "code": status}
            return JSONResponse({"error": error}, status_code=status)
        return None

    async def _body(self, request: Request) -> dict:
        body = orjson.loads(await request.body())
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        return body

    async def chat(self, request: Request) -> Response:
        body = await self._body(request)
        error = self._error(body)
        if error is not None:
            return error
        if body.get("model") == "fake-slow" and not body.get("stream"):
            await asyncio.sleep(1.0)
        if body.get("tools") and body.get("tool_choice") == "auto" and self.tool_calling == "rejected":
            message = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
            return JSONResponse({"error": {"message": message, "type": "BadRequestError", "code": 400}}, 400)
        messages = body.get("messages") or []
        prompt = render(messages)
        wanted = int(body.get("max_tokens") or body.get("max_completion_tokens") or 0)
        if self.max_model_len is not None and len(prompt) + wanted > self.max_model_len:
            message = (
                f"This model's maximum context length is {self.max_model_len} tokens. However, you requested "
                f"{wanted} output tokens and your prompt contains at least {len(prompt)} input tokens"
            )
            return JSONResponse({"error": {"message": message, "type": "BadRequestError", "code": 400}}, 400)
        last = messages[-1] if messages else {}
        last_user = _content_text(last.get("content")) if last.get("role") == "user" else ""
        result = answer(prompt, body, last_user, self.tool_calling)
        ids_asked = body.get("return_token_ids") and self.token_ids
        if body.get("stream") and body.get("model") != "fake-no-stream":
            return StreamingResponse(self._chat_stream(body, prompt, result), media_type="text/event-stream")
        k = int(body.get("top_logprobs") or 0)
        gap = alternatives_gap(body, self.logprobs_mode)
        choice: dict[str, Any] = {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None if result.tool_call else "".join(result.pieces),
                "tool_calls": [result.tool_call] if result.tool_call else [],
            },
            "logprobs": None,
            "finish_reason": result.finish,
            "stop_reason": None,
            "token_ids": result.ids if ids_asked else None,
        }
        if body.get("model") == "fake-think":
            choice["message"]["reasoning"] = thinking(prompt)
        if body.get("logprobs"):
            choice["logprobs"] = {
                "content": [
                    {"token": f"token_id:{t}", "logprob": logprob_of(t), "bytes": None, "top_logprobs": _top(t, k, gap)}
                    for t in result.ids
                ]
            }
        return JSONResponse(
            {
                "id": f"chatcmpl-{len(self.requests)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", MODEL),
                "choices": [choice],
                "usage": {
                    "prompt_tokens": len(prompt),
                    "completion_tokens": len(result.ids),
                    "total_tokens": len(prompt) + len(result.ids),
                },
                "prompt_logprobs": None,
                "prompt_token_ids": prompt if ids_asked else None,
            }
        )

    async def _chat_stream(self, body: dict, prompt: list[int], result: Answer) -> AsyncIterator[bytes]:
        model = str(body.get("model", MODEL))
        delay = 0.2 if model == "fake-slow" else self.delay
        base = {"id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion.chunk", "created": int(time.time())}
        base["model"] = model
        first: dict[str, Any] = {
            **base,
            "choices": [
                {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
            ],
        }
        if body.get("return_token_ids") and self.token_ids:
            first["prompt_token_ids"] = prompt
        yield b"data: " + orjson.dumps(first) + b"\n\n"
        if model == "fake-think":  # reasoning first, in vLLM 0.32's field name, word by word
            for word in thinking(prompt).split(" "):
                choice = {"index": 0, "delta": {"reasoning": word + " "}, "logprobs": None, "finish_reason": None}
                yield b"data: " + orjson.dumps({**base, "choices": [choice]}) + b"\n\n"
        k = int(body.get("top_logprobs") or 0)
        gap = alternatives_gap(body, self.logprobs_mode)
        for i, (piece, token) in enumerate(zip(result.pieces, result.ids, strict=True)):
            if delay:
                await asyncio.sleep(delay)
            if model == "fake-cut" and i == 2:
                raise RuntimeError("fake upstream cut the stream")
            if model == "fake-stream-error" and i == 2:  # as vLLM reports an engine failure mid-stream
                error = {"message": "engine failed", "type": "InternalServerError", "code": 500}
                yield b"data: " + orjson.dumps({"error": error}) + b"\n\n"
                yield b"data: [DONE]\n\n"
                return
            delta: dict[str, Any] = {"content": piece} if piece else {}
            if result.tool_call and i == 0:
                call = result.tool_call
                delta = {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": call["function"]["name"], "arguments": ""},
                        }
                    ]
                }
            elif result.tool_call and piece and i == 2:
                delta = {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}
            elif result.tool_call:
                delta = {}
            choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
            if body.get("logprobs"):
                choice["logprobs"] = {
                    "content": [
                        {
                            "token": f"token_id:{token}",
                            "logprob": logprob_of(token),
                            "bytes": None,
                            "top_logprobs": _top(token, k, gap),
                        }
                    ]
                }
            if body.get("return_token_ids") and self.token_ids:
                choice["token_ids"] = [token]
            yield b"data: " + orjson.dumps({**base, "choices": [choice]}) + b"\n\n"
        last = {
            **base,
            "choices": [
                {"index": 0, "delta": {}, "logprobs": None, "finish_reason": result.finish, "stop_reason": None}
            ],
        }
        yield b"data: " + orjson.dumps(last) + b"\n\n"
        if (body.get("stream_options") or {}).get("include_usage"):
            usage = {
                "prompt_tokens": len(prompt),
                "completion_tokens": len(result.ids),
                "total_tokens": len(prompt) + len(result.ids),
            }
            yield b"data: " + orjson.dumps({**base, "choices": [], "usage": usage}) + b"\n\n"
        yield b"data: [DONE]\n\n"

    async def completions(self, request: Request) -> Response:
        body = await self._body(request)
        error = self._error(body)
        if error is not None:
            return error
        prompt_in = body.get("prompt")
        prompt = list(prompt_in) if isinstance(prompt_in, list) else tokenize(str(prompt_in or ""))
        result = answer(prompt, body, "")
        k = body.get("logprobs")
        choice: dict[str, Any] = {
            "index": 0,
            "text": "".join(result.pieces),
            "logprobs": None,
            "finish_reason": result.finish,
            "stop_reason": None,
            "prompt_logprobs": None,
            "prompt_token_ids": prompt if body.get("return_token_ids") else None,
            "token_ids": result.ids if body.get("return_token_ids") else None,
        }
        if k is not None and k is not False:
            choice["logprobs"] = {
                "text_offset": list(range(len(result.ids))),
                "token_logprobs": [logprob_of(t) for t in result.ids],
                "tokens": [f"token_id:{t}" for t in result.ids],
                "top_logprobs": [{a["token"]: a["logprob"] for a in _top(t, max(1, int(k)))} for t in result.ids],
            }
        usage = {
            "prompt_tokens": len(prompt),
            "completion_tokens": len(result.ids),
            "total_tokens": len(prompt) + len(result.ids),
        }
        return JSONResponse(
            {
                "id": f"cmpl-{len(self.requests)}",
                "object": "text_completion",
                "created": int(time.time()),
                "model": body.get("model", MODEL),
                "choices": [choice],
                "usage": usage,
            }
        )


def free_socket() -> socket.socket:
    """A listening-ready socket bound to a free loopback port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def capture_command(upstream: str, out: Any) -> tuple[int, list[str]]:
    """A free loopback port and the ``rollout-graph capture`` command that serves on it, recording
    calls to ``upstream`` into ``out`` (for tests that run the proxy as a real process)."""
    sock = free_socket()
    port = sock.getsockname()[1]
    sock.close()
    command = [sys.executable, "-m", "rollout_graph", "capture", "--upstream", upstream, "--out", str(out)]
    return port, [*command, "--port", str(port)]


@contextlib.contextmanager
def serve_in_thread(app: Any) -> Iterator[str]:
    """Serve an ASGI app on a free loopback port in a thread; yields its base URL."""
    sock = free_socket()
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="error", lifespan="on", access_log=False))
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign]  # older uvicorn
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.time() + 10
    while not server.started:
        if time.time() > deadline or not thread.is_alive():
            raise RuntimeError("server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@contextlib.contextmanager
def running_upstream(delay: float = 0.0) -> Iterator[tuple[str, FakeUpstream]]:
    """The fake engine in a thread: ``(base URL, state)``."""
    fake = FakeUpstream(delay=delay)
    with serve_in_thread(fake.app()) as url:
        yield url, fake


if __name__ == "__main__":  # python -m tests.support.fake_upstream PORT [DELAY]
    fake = FakeUpstream(delay=float(sys.argv[2]) if len(sys.argv) > 2 else 0.0)
    uvicorn.run(fake.app(), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
