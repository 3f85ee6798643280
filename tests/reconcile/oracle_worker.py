"""Run a framework's own reconciler on cases (tests/reconcile/cases.py) and print its rows as JSON.

Runs in the writers venv (.ci/writers-env), never in the project's: it imports only the
frameworks and the standard library. Usage: ``python oracle_worker.py FRAMEWORK``, then one case per line on stdin
where FRAMEWORK is ``trl`` (``_chain_to_sequences`` over every call with prompt ids, in order),
``trl-openenv`` (TRL's OpenEnv harness: ``to_training_trace`` then ``_turns_from_training_trace``
then ``_chain_to_sequences``), ``openenv`` (``RolloutGraph`` + ``export_session``) or
``verifiers`` (``prepare_turn`` / ``commit`` then ``Trace.branches``). Each case gets
one line ``{"rows": [...], "error": null | "..."}``; a line ``{"versions": {...}}`` comes first.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from importlib.metadata import version
from types import SimpleNamespace

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
warnings.filterwarnings("ignore")


def _openenv_graph(case):
    from openenv.core.harness.capture.graph import RolloutGraph, TurnNode
    from openenv.core.harness.capture.validate import check_turn

    graph = RolloutGraph()
    for c in case["calls"]:
        prompt = c["prompt_ids"] or []
        logprobs = c["logprobs"]
        # capture/server.py: a turn check_turn rejects keeps its ids, loses its logprobs
        if not check_turn(prompt, c["sampled_ids"], logprobs).ok:
            logprobs = None
        graph.add_turn(
            TurnNode(
                node_id=c["node_id"],
                prompt_ids=list(prompt),
                sampled_ids=list(c["sampled_ids"]),
                sampled_logprobs=list(logprobs) if logprobs else None,
                finish_reason=c["finish_reason"],
                n_tools=c["n_tools"],
                request_messages=c["messages"] or [],
                request_tools=c["tools"],
                response_message=c["response"] or {},
            )
        )
    return graph


def _openenv_document(case):
    from openenv.core.harness.capture.export import export_session

    graph = _openenv_graph(case)
    tokens = any(c["prompt_ids"] is not None and c["sampled_ids"] for c in case["calls"])
    session = SimpleNamespace(graph=graph, session_id=case["session_id"], metadata={}, findings=[], budget_stop_count=0)
    document = export_session(session, include_discarded=True, capture_level="tokens" if tokens else "messages")
    return graph, document


def openenv(case):
    _, document = _openenv_document(case)
    rows = [
        {
            "input_ids": r["input_ids"],
            "mask": r["loss_mask"],
            "logprobs": r["logprobs"],
            "label": r["role"],
            "trained": r["trainable"],
        }
        for r in document["sequences"]
    ]
    return {"rows": rows, "error": None}


def _trl_rows(turns, case, threshold):
    from trl.experimental.async_grpo.async_rollout_worker import _chain_to_sequences

    try:
        sequences, tally = _chain_to_sequences(turns, case["session_id"], threshold)
    except ValueError as exc:
        return {"rows": [], "error": str(exc)}
    rows = [
        {"input_ids": s.input_ids, "mask": s.completion_mask, "logprobs": s.old_log_probs, "label": "", "trained": True}
        for s in sequences
    ]
    return {"rows": rows, "error": None, "tally": tally}


def trl(case):
    from trl.experimental.async_grpo.async_rollout_worker import TurnRecord

    threshold = case["params"].get("fork_threshold_tokens", 1024)
    turns = [
        TurnRecord(c["prompt_ids"], c["sampled_ids"], c["logprobs"] if c["logprobs"] is not None else [])
        for c in case["calls"]
        if c["prompt_ids"] is not None
    ]
    return _trl_rows(turns, case, threshold)


def trl_openenv(case):
    from openenv.core.harness.capture.contract import to_training_trace
    from trl.experimental.async_grpo.openenv_harness import _turns_from_training_trace

    graph, document = _openenv_document(case)
    try:
        trace = to_training_trace(graph, document)
    except ValueError as exc:
        return {"rows": [], "error": str(exc)}
    return _trl_rows(_turns_from_training_trace(trace), case, case["params"].get("fork_threshold_tokens", 0))


def verifiers(case):
    from verifiers.v1.dialects.chat import parse_message, parse_tools
    from verifiers.v1.graph import prepare_turn
    from verifiers.v1.trace import Trace
    from verifiers.v1.types import Response, TurnTokens

    trace = Trace.model_construct(nodes=[], calls=[], tools=[], mm_token_type_id_map={})
    for c in case["calls"]:
        prompt = [parse_message(m) for m in c["messages"] or []]
        turn = prepare_turn(trace, prompt, parse_tools(c["tools"]))
        tokens = None
        if c["prompt_ids"] is not None:
            tokens = TurnTokens(
                prompt_ids=c["prompt_ids"], completion_ids=c["sampled_ids"], completion_logprobs=c["logprobs"] or []
            )
        message = parse_message({**(c["response"] or {}), "role": "assistant"})
        finish = c["finish_reason"] if c["finish_reason"] in ("stop", "length", "tool_calls") else None
        turn.commit(
            Response(id=c["node_id"], created=0, model="m", message=message, finish_reason=finish, tokens=tokens)
        )
    rows = [
        {
            "input_ids": b.token_ids,
            "mask": [int(m) for m in b.sampled_mask],
            "logprobs": b.logprobs,
            "label": "",
            "trained": b.trainable,
        }
        for b in trace.branches
    ]
    return {"rows": rows, "error": None}


RUNNERS = {"trl": trl, "trl-openenv": trl_openenv, "openenv": openenv, "verifiers": verifiers}
PACKAGES = {"trl": ["trl"], "trl-openenv": ["trl", "openenv"], "openenv": ["openenv"], "verifiers": ["verifiers"]}


def main() -> int:
    framework = sys.argv[1]
    print(json.dumps({"versions": {p: version(p) for p in PACKAGES[framework]}}), flush=True)
    for line in sys.stdin:  # one case per line, one result per line: the test keeps this process open
        if not line.strip():
            continue
        case = json.loads(line)
        try:
            result = RUNNERS[framework](case)
        except Exception as exc:  # noqa: BLE001 - reported per case, the test shows it
            result = {"rows": [], "error": f"oracle crashed: {type(exc).__name__}: {exc}"}
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
