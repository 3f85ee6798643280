"""Generated agent sessions for the reconciler oracles: a toy chat template and a harness that
retries, rejects, compacts, calls side agents, replays replies re-tokenized or rewritten, changes
tool-call ids, drops reasoning and loses logprobs or prompt ids, written as vLLM chat capture records.

The template renders every message as ``[ROLE] + ids(words) + [EOS]`` (canonical ids: one per
word) and ends a prompt with the generation header ``[AST]``; the model samples a reply's words
canonically or, now and then, a word split into two other ids (the same text), ending with EOS
when it stops. A replay of such a reply is rendered canonically: a re-tokenized replay, as a real
engine re-renders a chat. ``render`` is the template (tools/make_reconcile_fixtures.py uses it for
NeMo-RL's ``template_prefix_token_ids``).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

EOS, SYS, USR, AST, TOOL, TOOLS = 2, 3, 4, 5, 6, 7
WORDS = 400
BASE = 100  # word i has the canonical id BASE + i; split into SPLIT_A + i, SPLIT_B + i
SPLIT_A, SPLIT_B = 600, 1100
ROLE_IDS = {"system": SYS, "user": USR, "assistant": AST, "tool": TOOL}
TOOLS_LIST = [
    {"type": "function", "function": {"name": "bash", "description": "run", "parameters": {"type": "object"}}}
]
SIDE_TOOLS = [{"type": "function", "function": {"name": "grep", "parameters": {"type": "object"}}}]


def word(i: int) -> str:
    return f"w{i}"


def ids_of(text: str) -> list[int]:
    """Canonical ids of a text of words (unknown words are skipped)."""
    out = []
    for w in text.split():
        if w.startswith("w") and w[1:].isdigit():
            out.append(BASE + int(w[1:]))
    return out


def render(messages: list[dict[str, Any]], tools: list | None, generation: bool = True) -> list[int]:
    """The toy template: a tools block, each message closed by EOS, then the generation header."""
    out: list[int] = []
    if tools:
        out += [TOOLS] + [BASE + 300 + len(t["function"]["name"]) for t in tools] + [EOS]
    for m in messages:
        out.append(ROLE_IDS.get(m["role"], USR))
        out += ids_of(m.get("content") or "")
        out.append(EOS)
    if generation:
        out.append(AST)
    return out


def _text(rng: random.Random, lo: int = 1, hi: int = 5) -> str:
    return " ".join(word(rng.randrange(WORDS)) for _ in range(rng.randint(lo, hi)))


class _Harness:
    def __init__(self, rng: random.Random, session: str) -> None:
        self.rng = rng
        self.session = session
        self.records: list[dict[str, Any]] = []
        self.n_tool = 0

    def call(self, messages: list[dict[str, Any]], tools: list | None, **knobs: Any) -> dict[str, Any]:
        """One model call: sample a reply, write its record; returns the assistant message."""
        rng = self.rng
        prompt = render(messages, tools)
        n_words = rng.randint(0 if knobs.get("allow_empty") else 1, 5)
        words = [word(rng.randrange(WORDS)) for _ in range(n_words)]
        sampled: list[int] = []
        for w in words:
            i = int(w[1:])
            if rng.random() < knobs.get("split", 0.12):
                sampled += [SPLIT_A + i, SPLIT_B + i]  # the same text, other ids
            else:
                sampled.append(BASE + i)
        finish = "length" if rng.random() < 0.25 else "stop"
        if finish == "stop":
            sampled.append(EOS)
        logprobs = (
            None if rng.random() < knobs.get("no_logprobs", 0.05) else [-round(rng.random() * 3, 3) for _ in sampled]
        )
        reply: dict[str, Any] = {"role": "assistant", "content": " ".join(words)}
        if tools and rng.random() < 0.6:
            self.n_tool += 1
            reply["tool_calls"] = [
                {
                    "id": f"call_{self.n_tool}",
                    "type": "function",
                    "function": {
                        "name": tools[0]["function"]["name"],
                        "arguments": json.dumps({"cmd": _text(rng, 1, 2)}),
                    },
                }
            ]
        if rng.random() < 0.15:
            reply["reasoning_content"] = _text(rng)
        index = len(self.records)
        choice: dict[str, Any] = {"index": 0, "message": dict(reply), "finish_reason": finish, "token_ids": sampled}
        if logprobs is not None:
            choice["logprobs"] = {
                "content": [
                    {"token": f"token_id:{t}", "logprob": lp, "top_logprobs": []}
                    for t, lp in zip(sampled, logprobs, strict=True)
                ]
            }
        if rng.random() < knobs.get("no_prompt", 0.0):
            prompt = None  # an eval endpoint: no prompt ids (calls link by their messages)
        request: dict[str, Any] = {"model": "m", "messages": messages, "logprobs": True}
        if tools:
            request["tools"] = tools
        self.records.append(
            {
                "call_id": f"c{index:02d}",
                "session_id": self.session,
                "request": request,
                "response": {
                    "id": f"r{index}",
                    "object": "chat.completion",
                    "model": "m",
                    "prompt_token_ids": prompt,
                    "choices": [choice],
                },
                "timing": {"started_at": 1000.0 + index, "ended_at": 1000.5 + index},
            }
        )
        return reply


def _replay(rng: random.Random, reply: dict[str, Any], event: str) -> tuple[dict[str, Any], dict[str, str] | None]:
    """The assistant message the harness puts back, and the id its tool result answers."""
    again: dict[str, Any] = {"role": "assistant", "content": reply.get("content", "")}
    calls = reply.get("tool_calls")
    if calls:
        again["tool_calls"] = [dict(c) for c in calls]
        if event == "toolid":
            again["tool_calls"][0] = {**calls[0], "id": calls[0]["id"] + "x"}
    if "reasoning_content" in reply and event != "drop_reasoning":
        again["reasoning_content"] = reply["reasoning_content"]
    if event == "rewrite" and again["content"]:
        again["content"] = " ".join(again["content"].split()[:-1])
    answered = {"id": again["tool_calls"][0]["id"]} if calls else None
    return again, answered


EVENTS = ["continue"] * 6 + ["toolid", "rewrite", "drop_reasoning", "retry", "reject", "compact", "side", "user"]


def generate(seed: int, n_calls: int = 8, session: str | None = None) -> list[dict[str, Any]]:
    """The capture records of one generated session (``n_calls`` model calls)."""
    rng = random.Random(seed)
    h = _Harness(rng, session or f"gen-{seed}")
    system = {"role": "system", "content": "w1 w2 w3"}
    messages: list[dict[str, Any]] = [system, {"role": "user", "content": _text(rng)}]
    tools = TOOLS_LIST if rng.random() < 0.7 else None
    no_logprobs = 0.08 if rng.random() < 0.3 else 0.0
    split = rng.choice([0.0, 0.1, 0.3])
    knobs = {"no_logprobs": no_logprobs, "split": split, "no_prompt": 1.0 if rng.random() < 0.08 else 0.0}
    reply = h.call(messages, tools, **knobs)
    while len(h.records) < n_calls:
        event = rng.choice(EVENTS)
        if event == "retry":
            reply = h.call(messages, tools, **knobs)
            continue
        if event == "reject":
            messages = messages + [{"role": "user", "content": "w7 w8 " + _text(rng, 1, 2)}]
            reply = h.call(messages, tools, **knobs)
            continue
        if event == "compact":
            messages = [system, {"role": "user", "content": "w9 " + _text(rng, 2, 6)}]
            reply = h.call(messages, tools, **knobs)
            continue
        if event == "side":
            side = [{"role": "system", "content": "w11 w12"}, {"role": "user", "content": _text(rng)}]
            h.call(side, SIDE_TOOLS if rng.random() < 0.5 else None, **knobs, allow_empty=True)
            continue
        again, answered = _replay(rng, reply, event)
        messages = messages + [again]
        if answered is not None:
            messages.append({"role": "tool", "tool_call_id": answered["id"], "content": _text(rng)})
        else:
            messages.append({"role": "user", "content": _text(rng)})
        reply = h.call(messages, tools, **knobs)
    return h.records


def write(records: list[dict[str, Any]], path: Path) -> Path:
    """The records as a JSONL trace file."""
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path
