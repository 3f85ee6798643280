"""verifiers 0.4.0's message graph and saved traces, and prime-rl's rollout monitor, by their own code.

Run: ``python verifiers_writer.py PRIME_RL_SRC OUT`` (PRIME_RL_SRC ``-``: verifiers' file only) with a python that has ``verifiers==0.4.0``
(its own venv: verifiers and openenv pin different ``mcp`` majors); ``tools/make_writer_fixtures.py
verifiers`` does. What runs:

- ``verifiers.v1.graph.prepare_turn(trace, prompt, tools)`` resolves each call's prefix and
  ``PendingTurn.commit(Response(..., tokens=TurnTokens(...)))`` adds its nodes (what verifiers'
  interception server does per model call); ``Trace.calls`` gets a ``ModelCall`` per call;
  ``verifiers.v1.utils.trace_store.write_episode`` saves ``OUT/verifiers/traces.jsonl`` (the eval
  CLI's writer). The calls are the toy harness's (tools/writer_fixtures/toy.py: the same tokens as
  the OpenEnv fixture's): a title call, a discarded retry, a fork whose branches both continue.
- prime-rl's ``FileMonitor.log_episodes`` (src/prime_rl/monitors/file.py, PrimeIntellect-ai/prime-rl
  at the commit in PRIME_RL_SRC/COMMIT), executed from its source (its module imports prime-rl's
  config and logging stack), writes ``OUT/prime-rl/rollouts/step_0/train/all/traces.jsonl``.

Trace and episode ids (uuid4) and node timestamps come from a seeded generator and a fixed clock,
so a run reproduces the committed files.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import uuid
from pathlib import Path

SRC, OUT = Path(sys.argv[1]), Path(sys.argv[2])
SEED = random.Random(38)
uuid.uuid4 = lambda: uuid.UUID(int=SEED.getrandbits(128), version=4)  # noqa: E731 (ids: seeded)
import time  # noqa: E402

_clock = iter(range(1_792_238_400, 1_792_238_400 + 10_000))
time.time = lambda: float(next(_clock))  # noqa: E731 (node timestamps: a fixed clock)

import orjson  # noqa: E402
from verifiers.v1 import graph  # noqa: E402
from verifiers.v1.configs.agent import WireAgentConfig  # noqa: E402
from verifiers.v1.episode import EnvInfo, Episode  # noqa: E402
from verifiers.v1.trace import AgentInfo, ModelCall, Reward, Trace, TraceTask  # noqa: E402
from verifiers.v1.types import (  # noqa: E402
    AssistantMessage,
    Response,
    SystemMessage,
    Tool,
    ToolCall,
    ToolMessage,
    TurnTokens,
    Usage,
    UserMessage,
)
from verifiers.v1.utils.trace_store import TRACES_FILE, write_episode  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from from_source import load  # noqa: E402

BOS, END, TOOLS_TOK = 1, 2, 7
ROLE = {"system": 3, "user": 4, "assistant": 5, "tool": 6}
MODEL = "toy/tiny-coder"


def enc(text: str) -> list[int]:
    return [256 + b for b in text.encode()]


def render_calls(calls) -> str:
    return "".join(f"<call {c.name}>{c.arguments}</call>" for c in calls or [])


def render_prompt(messages, tools):
    """The toy chat template: (prompt ids, each message's span)."""
    ids = [BOS] + ([TOOLS_TOK] + enc(json.dumps([t.name for t in tools])) if tools else [])
    spans = []
    for m in messages:
        start = len(ids)
        ids += [ROLE[m.role]] + enc(m.content or "") + enc(render_calls(getattr(m, "tool_calls", None))) + [END]
        spans.append((start, len(ids)))
    return ids + [ROLE["assistant"]], spans


TOOLS = [
    Tool(name="bash", description="Run a shell command", parameters={"type": "object", "properties": {"command": {"type": "string"}}}),
    Tool(name="write_file", description="Write a file", parameters={"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}),
]  # fmt: skip


def rollout(name: str) -> Trace:
    trace = Trace(
        task=TraceTask(type="CalcFix", data={"prompt": "Fix the failing test in calc.py"}),
        agent=AgentInfo(config=WireAgentConfig(model=MODEL), name=name),
    )

    def complete(messages, content, calls=(), tools=TOOLS):
        tool_calls = [
            ToolCall(id=f"call_{i}_{c[0]}", name=c[0], arguments=json.dumps(c[1])) for i, c in enumerate(calls)
        ]
        reply = AssistantMessage(content=content, tool_calls=tool_calls or None)
        prompt_ids, spans = render_prompt(messages, tools)
        completion = enc(content or "") + enc(render_calls(reply.tool_calls)) + [END]
        logprobs = [-round(0.01 + ((t * 7919 + i * 104729) % 997) / 400.0, 4) for i, t in enumerate(completion)]
        logprobs[-1] = 0.0
        pending = graph.prepare_turn(trace, messages, tools)
        response = Response(
            id=f"chatcmpl-{len(trace.calls)}", created=1792238400, model=MODEL, message=reply,
            finish_reason="tool_calls" if calls else "stop",
            usage=Usage(prompt_tokens=len(prompt_ids), completion_tokens=len(completion)),
            tokens=TurnTokens(prompt_ids=prompt_ids, completion_ids=completion, completion_logprobs=logprobs, message_spans=spans),
        )  # fmt: skip
        node = pending.commit(response)
        trace.calls.append(
            ModelCall(node=node, model=MODEL, endpoint="/chat/completions", finish_reason=response.finish_reason, usage=response.usage)
        )  # fmt: skip
        return reply

    def step(messages, content, calls=(), tool_result=None):
        reply = complete(messages, content, calls)
        out = [*messages, reply]
        if tool_result is not None:
            out.append(ToolMessage(tool_call_id=reply.tool_calls[0].id, content=tool_result))
        return out

    task = "Fix the failing test in calc.py"
    m = [SystemMessage(content="You are a coding agent."), UserMessage(content=task)]
    m = step(m, "", [("bash", {"command": "pytest -q"})], "1 failed: test_add")
    complete(
        [SystemMessage(content="Generate a short title."), UserMessage(content=task)], "Fix add() sign bug", tools=[]
    )
    complete(m, "", [("write_file", {"path": "calc.py"})])  # rejected by the harness, resampled
    m = step(m, "", [("write_file", {"path": "calc.py", "content": "def add(a, b): return a + b"})], "ok")
    m_fork = step(m, "", [("bash", {"command": "pytest -q"})])
    cid = m_fork[-1].tool_calls[0].id
    a = step(
        [*m_fork, ToolMessage(tool_call_id=cid, content="1 passed")],
        "",
        [("bash", {"command": "git diff"})],
        "+return a + b",
    )
    b = step(
        [*m_fork, ToolMessage(tool_call_id=cid, content="1 passed in 0.01s (rerun)")],
        "",
        [("bash", {"command": "git status"})],
        " M calc.py",
    )
    step(a, "Fixed add(): it subtracted instead of adding.")
    step(b, "Done: calc.add fixed.")
    for node in trace.nodes:  # the trainer's columns, as prime-rl's orchestrator fills them
        if node.sampled:
            n = sum(node.mask)
            node.advantages = [0.25] * n
            node.trainer_logprobs = [lp - 0.01 for lp in node.logprobs]
    trace.rewards["correct"] = Reward(score=1.0)
    trace.is_completed, trace.ok, trace.stop_condition = True, True, "agent_completed"
    return trace


trace = rollout("solver")
episode = Episode(env=EnvInfo(id="calc-fix"), task=trace.task, traces=[trace], ok=True)
folder = OUT / "verifiers"
folder.mkdir(parents=True, exist_ok=True)
(folder / TRACES_FILE).unlink(missing_ok=True)
write_episode(folder, episode)
print(f"wrote {folder / TRACES_FILE}")

if not (SRC / "src/prime_rl/monitors/file.py").exists():  # no prime-rl checkout: verifiers' file only
    sys.exit(0)
monitor = load(
    SRC / "src/prime_rl/monitors/file.py", ("log_episodes",), {"asyncio": asyncio, "orjson": orjson}, cls="FileMonitor"
)
self = type("FileMonitor", (), {"output_dir": OUT / "prime-rl"})()
episodes = [episode, Episode(env=EnvInfo(id="calc-fix"), task=trace.task, traces=[rollout("solver-2")], ok=True)]
asyncio.run(monitor["log_episodes"](self, episodes, step=0, kind="train", subset="all"))
print(f"wrote {OUT / 'prime-rl/rollouts/step_0/train/all/traces.jsonl'}")
