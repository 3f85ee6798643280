"""Realistic record bodies for every input shape, built from (prompt, sampled, logprobs)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from hypothesis import strategies as st

from rollout_graph.core.records import Call, SessionInput
from rollout_graph.core.rollout import Rollout
from rollout_graph.ingest.files.sources import Source
from rollout_graph.ingest.load.calls import load_sources
from rollout_graph.pipeline import analyse

TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]


@dataclass
class Turn:
    """One call to encode: what the engine saw and sampled."""

    call_id: str
    prompt: list[int] | None
    sampled: list[int]
    logprobs: list[float] | None = None
    messages: list[dict] = field(default_factory=lambda: [{"role": "user", "content": "hi"}])
    reply: str = "ok"
    tools: list | None = None
    finish: str = "stop"
    session: str = "s1"

    def __post_init__(self):
        if self.logprobs is None:
            self.logprobs = [-0.5] * len(self.sampled)


def chat_request(t: Turn, **params) -> dict:
    request = {"model": "m", "messages": t.messages, **params}
    if t.tools:
        request["tools"] = t.tools
    return request


def vllm_chat(t: Turn, token_text: bool = False) -> dict:
    content = [
        {
            "token": f"tok{tid}" if token_text else f"token_id:{tid}",
            "logprob": lp,
            "bytes": [116],
            "top_logprobs": [
                {"token": f"token_id:{tid}", "logprob": lp},
                {"token": f"token_id:{tid + 1}", "logprob": lp - 1.5},
            ],
        }
        for tid, lp in zip(t.sampled, t.logprobs, strict=True)
    ]
    return {
        "call_id": t.call_id,
        "session_id": t.session,
        "request": chat_request(t, temperature=1.0, logprobs=True, top_logprobs=2),
        "response": {
            "id": "chatcmpl-" + t.call_id,
            "object": "chat.completion",
            "model": "m",
            "prompt_token_ids": t.prompt,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": t.reply, "refusal": None},
                    "logprobs": {"content": content},
                    "finish_reason": t.finish,
                    "token_ids": t.sampled,
                }
            ],
            "usage": {"prompt_tokens": len(t.prompt or []), "completion_tokens": len(t.sampled)},
        },
    }


def completions(t: Turn, echo: bool = False) -> dict:
    tokens = [f"token_id:{x}" for x in t.sampled]
    lps = list(t.logprobs)
    if echo:
        tokens = [f"token_id:{x}" for x in t.prompt] + tokens
        lps = [None] + [-1.0] * (len(t.prompt) - 1) + lps
    return {
        "call_id": t.call_id,
        "session_id": t.session,
        "request": {"model": "m", "prompt": t.prompt, "echo": echo, "logprobs": 1, "max_tokens": 64},
        "response": {
            "object": "text_completion",
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "text": t.reply,
                    "logprobs": {
                        "tokens": tokens,
                        "token_logprobs": lps,
                        "top_logprobs": [{tok: lp} for tok, lp in zip(tokens, lps, strict=True)],
                    },
                    "finish_reason": t.finish,
                    "prompt_token_ids": t.prompt,
                    "token_ids": t.sampled,
                }
            ],
        },
    }


def sglang_chat(t: Turn) -> dict:
    return {
        "call_id": t.call_id,
        "session_id": t.session,
        "request": chat_request(t),
        "response": {
            "object": "chat.completion",
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": t.reply},
                    "finish_reason": t.finish,
                    "prompt_token_ids": t.prompt,
                    "meta_info": {
                        "output_token_logprobs": [
                            [lp, tid, f"t{tid}"] for tid, lp in zip(t.sampled, t.logprobs, strict=True)
                        ],
                        "output_top_logprobs": [
                            [[lp, tid, f"t{tid}"]] for tid, lp in zip(t.sampled, t.logprobs, strict=True)
                        ],
                    },
                }
            ],
        },
    }


def sglang_generate(t: Turn) -> dict:
    return {
        "call_id": t.call_id,
        "session_id": t.session,
        "request": {"input_ids": t.prompt, "sampling_params": {"temperature": 1.0}, "return_logprob": True},
        "response": {
            "text": t.reply,
            "output_ids": t.sampled,
            "meta_info": {
                "finish_reason": {"type": t.finish},
                "output_token_logprobs": [[lp, tid, None] for tid, lp in zip(t.sampled, t.logprobs, strict=True)],
            },
        },
    }


def chat_stream(t: Turn) -> dict:
    chunks = [
        {
            "object": "chat.completion.chunk",
            "model": "m",
            "prompt_token_ids": t.prompt,
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}],
        }
    ]
    for k, (tid, lp) in enumerate(zip(t.sampled, t.logprobs, strict=True)):
        chunks.append(
            {
                "object": "chat.completion.chunk",
                "choices": [
                    {
                        "index": 0,
                        "delta": {"content": t.reply if k == 0 else ""},
                        "token_ids": [tid],
                        "logprobs": {"content": [{"token": f"token_id:{tid}", "logprob": lp}]},
                    }
                ],
            }
        )
    chunks.append(
        {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": t.finish}]}
    )
    chunks.append("data: [DONE]")
    return {
        "call_id": t.call_id,
        "session_id": t.session,
        "request": {"messages": t.messages, "stream": True},
        "response": chunks,
    }


def trace_entry(t: Turn) -> dict:
    return {
        "request": {"messages": t.messages, "tools": t.tools},
        "response": {"choices": [{"message": {"role": "assistant", "content": t.reply}, "finish_reason": t.finish}]},
        "prompt_token_ids": t.prompt,
        "completion_token_ids": t.sampled,
        "per_token_logps": t.logprobs,
        "loss_mask": [0] * len(t.prompt or ()) + [1] * len(t.sampled),  # prompt plus completion, as OpenEnv and TRL
        "metadata": {"session_id": t.session, "call_id": t.call_id},
        "call_id": t.call_id,
    }


def interception_log(t: Turn) -> dict:
    return {
        "call_id": t.call_id,
        "session_id": t.session,
        "turn": 0,
        "messages": t.messages,
        "prompt_token_ids": t.prompt,
        "completion_token_ids": [],
        "completion_tokens": [f"token_id:{x}" for x in t.sampled],
        "per_token_logps": t.logprobs,
        "latency_s": 0.25,
        "timestamp": 1700000000.0,
    }


def message_only(t: Turn) -> dict:
    return {
        "call_id": t.call_id,
        "session_id": t.session,
        "request": chat_request(t),
        "response": {
            "object": "chat.completion",
            "choices": [{"message": {"role": "assistant", "content": t.reply}, "finish_reason": t.finish}],
        },
    }


SHAPES = {
    "vllm-chat": vllm_chat,
    "completions": completions,
    "sglang-chat": sglang_chat,
    "sglang-generate": sglang_generate,
    "vllm-chat-stream": chat_stream,
    "trace-entry": trace_entry,
    "interception-log": interception_log,
}


def jsonl(records: list) -> bytes:
    return b"".join((r if isinstance(r, str) else json.dumps(r)).encode() + b"\n" for r in records)


def load_records(records: list, name: str = "trace.jsonl"):
    return load_sources([Source.from_bytes(name, jsonl(records))])


def rollout_of(records: list, name: str = "trace.jsonl") -> Rollout:
    loaded = load_records(records, name)
    assert len(loaded.sessions) == 1, list(loaded.sessions)
    return analyse(next(iter(loaded.sessions.values())))


def calls_from_tokens(spec: list[tuple[list[int] | None, list[int]]], logprobs: bool = True) -> list[Call]:
    """Bare calls for linking tests: (prompt or None, sampled)."""
    calls = []
    for i, (prompt, sampled) in enumerate(spec):
        calls.append(
            Call(
                node_id=f"n{i}",
                session_id="s",
                source="mem",
                line=i + 1,
                shape="test",
                prompt_ids=None if prompt is None else np.array(prompt, dtype=np.int32),
                sampled_ids=np.array(sampled, dtype=np.int32),
                sampled_logprobs=np.full(len(sampled), -0.5) if logprobs else None,
            )
        )
    return calls


def rollout_of_tokens(spec, logprobs: bool = True) -> Rollout:
    return analyse(SessionInput("s", calls_from_tokens(spec, logprobs)))


def write(path: Path, records: list) -> Path:
    path.write_bytes(jsonl(records))
    return path


# A small rollout every input shape can express: a fork with a retry, a truncated turn, a side call.
ROLLOUT = [
    Turn("c0", [1, 2, 3], [4, 5], logprobs=[-0.25, -1.5], tools=TOOLS),
    Turn("c1", [1, 2, 3, 4, 5, 6], [7], logprobs=[-0.75], tools=TOOLS),
    Turn("c2", [1, 2, 3, 4, 5, 6], [8, 9], logprobs=[-2.0, -0.5], tools=TOOLS),
    Turn("c3", [1, 2, 3, 4, 5, 6, 8, 9, 10], [11], logprobs=[-0.125], tools=TOOLS, finish="length"),
    Turn("t0", [50, 51], [52], logprobs=[-0.5]),
]


def examples(n: int) -> int:
    """Hypothesis example count: ``n`` in the thorough ``ci`` profile (the default), a twentieth
    of it (at least 10) in the quick ``dev`` profile (HYPOTHESIS_PROFILE=dev)."""
    return max(10, n // 20) if os.environ.get("HYPOTHESIS_PROFILE") == "dev" else n


_tokens = st.lists(st.integers(0, 3), min_size=0, max_size=4)


@st.composite
def harness_traces(draw, max_calls=14):
    """Calls that continue earlier ends, retry, resample, start over, or have no ids, with a
    tiny vocabulary so accidental prefixes and identical ends are common."""
    spec: list[tuple[list[int] | None, list[int]]] = []
    for _ in range(draw(st.integers(1, max_calls))):
        move = draw(st.sampled_from(["continue", "continue", "retry", "root", "noids", "empty"]))
        if spec and move == "continue":
            prompt, sampled = spec[draw(st.integers(0, len(spec) - 1))]
            base = (prompt or []) + sampled
            spec.append((base + draw(_tokens), draw(_tokens)))
        elif spec and move == "retry":
            prompt, _ = spec[draw(st.integers(0, len(spec) - 1))]
            spec.append((prompt, draw(_tokens)))
        elif move == "noids":
            spec.append((None, draw(_tokens)))
        elif move == "empty":
            spec.append((draw(_tokens), []))
        else:
            spec.append((draw(st.lists(st.integers(0, 3), min_size=1, max_size=5)), draw(_tokens)))
    return spec


def _same_value(a, b, where: str) -> None:
    """Deep equality that also compares numpy arrays (dtype, shape and values, NaN == NaN)."""
    import numpy as np

    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray), where
        assert a.dtype == b.dtype and a.shape == b.shape, f"{where}: {a.dtype}{a.shape} != {b.dtype}{b.shape}"
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), where
    elif isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), f"{where}: keys {list(a)[:5]} != {list(b)[:5]}"
        for k in a:
            _same_value(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), f"{where}: {type(a)} len {len(a)} vs {type(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same_value(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and a != a:
        assert isinstance(b, float) and b != b, where
    else:
        assert type(a) is type(b) and a == b, f"{where}: {a!r} != {b!r}"


def assert_same_load(a, b) -> None:
    """Two LoadResults hold exactly the same calls, sessions, documents and load report."""
    from dataclasses import fields

    assert a.report() == b.report()
    assert list(a.sessions) == list(b.sessions)
    for sid, sa in a.sessions.items():
        sb = b.sessions[sid]
        _same_value(sa.document, sb.document, f"{sid}.document")
        assert sa.node_ids == sb.node_ids
        assert len(sa.calls) == len(sb.calls), sid
        for ca, cb in zip(sa.calls, sb.calls, strict=True):
            for f in fields(ca):
                va, vb = getattr(ca, f.name), getattr(cb, f.name)
                if f.name == "top_k" and va is not None and vb is not None:
                    for g in ("ids", "logprobs", "texts"):
                        _same_value(getattr(va, g), getattr(vb, g), f"{ca.node_id}.top_k.{g}")
                else:
                    _same_value(va, vb, f"{ca.node_id}.{f.name}")


TEXTS = ["a", "b", "c"]


@st.composite
def message_traces(draw, max_calls=12):
    """Calls linked by messages (no prompt ids) mixed with token calls that carry messages:
    continuations of earlier calls, retries, re-rendered system prompts, fresh conversations."""
    calls: list[Call] = []
    for n in range(draw(st.integers(1, max_calls))):
        move = draw(st.sampled_from(["continue", "continue", "retry", "new", "tokens"]))
        system = [{"role": "system", "content": draw(st.sampled_from(TEXTS))}] if draw(st.booleans()) else []
        if calls and move in ("continue", "retry"):
            base = calls[draw(st.integers(0, len(calls) - 1))]
            earlier = [m for m in base.request_messages if m.get("role") != "system"]
            if move == "continue" and base.response_message is not None:
                request = earlier + [base.response_message, {"role": "user", "content": draw(st.sampled_from(TEXTS))}]
            else:
                request = earlier
        else:
            request = [{"role": "user", "content": draw(st.sampled_from(TEXTS))}]
        call = Call(
            node_id=f"m{n}",
            session_id="s",
            source="mem",
            line=n + 1,
            shape="test",
            prompt_ids=np.array(draw(st.lists(st.integers(0, 2), max_size=3)), dtype=np.int32)
            if move == "tokens"
            else None,
            request_messages=system + request,
            response_message=None
            if draw(st.integers(0, 5)) == 0
            else {"role": "assistant", "content": draw(st.sampled_from(TEXTS))},
        )
        calls.append(call)
    return calls


def agent_records(n_calls: int, session: str = "big", chain: int = 150, retry_every: int = 25) -> list[dict]:
    """A harness-shaped rollout of ``n_calls`` small vLLM chat records: long agent chains with a
    retry every ``retry_every`` steps, each chain compacted into a new root with the same system
    prompt (a near miss), a 6-call subagent with its own system prompt after each chain."""
    fresh = iter(range(10_000, 10**9))
    records: list[dict] = []

    def call(prompt: list[int], sampled: list[int], system: str) -> None:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": "go"}]
        turn = Turn(f"c{len(records):04d}", prompt, sampled, messages=messages, session=session)
        records.append(vllm_chat(turn))

    agent_system, sub_system = list(range(100, 140)), list(range(200, 230))
    prompt = agent_system + [next(fresh) for _ in range(3)]
    while len(records) < n_calls:
        for step in range(chain):
            if len(records) >= n_calls:
                break
            if retry_every and step % retry_every == retry_every - 1:
                call(prompt, [next(fresh)], "agent")  # retried: discarded
            sampled = [next(fresh), next(fresh)]
            call(prompt, sampled, "agent")
            prompt = prompt + sampled + [next(fresh) for _ in range(3)]
        sub = sub_system + [next(fresh)]
        system = f"subagent {len(records)}"
        for _ in range(6):
            if len(records) >= n_calls:
                break
            sampled = [next(fresh)]
            call(sub, sampled, system)
            sub = sub + sampled + [next(fresh)]
        prompt = agent_system + [next(fresh) for _ in range(8)]  # compacted: a summary replaces the history
    return records[:n_calls]


def rewriting_records(n_calls: int, session: str = "rewrites") -> list[dict]:
    """A harness that rewrites its history every turn: the stop token the model sampled is replayed
    as a different one, so every call is a new root that nearly continued the one before."""
    system = list(range(100, 140))
    gen, end, nl, tool = [1, 5], 2, 3, [1, 6]
    prompt = system + [7, 8, 9] + gen
    records = []
    for turn in range(n_calls):
        sampled = [50 + turn, 60 + turn, 99]
        records.append(
            vllm_chat(
                Turn(
                    f"t{turn:02d}",
                    list(prompt),
                    sampled,
                    session=session,
                    messages=[{"role": "system", "content": "agent"}],
                )
            )
        )
        prompt = prompt + [50 + turn, 60 + turn, 98, end, nl] + tool + [70 + turn, end, nl] + gen
    return records
