"""OpenEnv 0.10's own code, answering the conformance tests (tests/conformance/writers.py).

Runs in the writers' venv (openenv==0.10.0); reads one JSON case a line on stdin and writes one
JSON answer a line; imports nothing from rollout_graph. Cases (``op``):

- ``graph``: build OpenEnv's ``RolloutGraph`` from ``calls`` (arrival order; each ``node_id``,
  ``prompt_ids`` or null, ``sampled_ids``, ``logprobs`` or null, ``n_tools``, ``request_messages``,
  ``response_message``). ``ingest`` true runs each call through ``check_turn`` first and drops
  its logprobs when that finds a FATAL, as the capture proxy's ``_ingest`` does; false adds the
  nodes as a library caller would. Answers each node's parent, the discarded node ids, the
  stats, and ``export_session``'s sequences (``include_discarded``) with their
  ``check_sequence`` findings.
- ``entries``: ``TrainingTrace.from_entries(entries)`` -> ``ok`` and the number of turns, or the error.
- ``trace``: ``TrainingTrace.model_validate(trace)`` -> ``ok`` and whether ``model_dump()`` equals it.
"""

from __future__ import annotations

import importlib.metadata
import json
import sys
import traceback
from types import SimpleNamespace

from openenv.core.harness.capture.export import export_session
from openenv.core.harness.capture.graph import RolloutGraph, TurnNode
from openenv.core.harness.capture.validate import check_sequence, check_turn
from openenv.core.harness.training import TrainingTrace


def graph_case(case: dict) -> dict:
    graph = RolloutGraph()
    for i, call in enumerate(case["calls"]):
        prompt, sampled, logprobs = call["prompt_ids"] or [], call["sampled_ids"], call["logprobs"]
        if case.get("ingest", True) and not check_turn(prompt, sampled, logprobs, index=i).ok:
            logprobs = None
        graph.add_turn(
            TurnNode(
                node_id=call["node_id"],
                prompt_ids=list(prompt),
                sampled_ids=list(sampled),
                sampled_logprobs=None if logprobs is None else list(logprobs),
                n_tools=call.get("n_tools", 0),
                request_messages=call.get("request_messages") or [],
                response_message=call.get("response_message") or {},
            )
        )
    session = SimpleNamespace(session_id="s", graph=graph, metadata={}, findings=[])
    document = export_session(session, include_discarded=True, capture_level=case.get("capture_level", "tokens"))
    findings = {
        leaf.node_id: [str(f) for f in check_sequence(graph.sequence_for(leaf.node_id)).findings]
        for leaf in graph.leaves()
    }
    return {
        "parents": {n.node_id: n.parent_id for n in graph.nodes()},
        "discarded": sorted(n.node_id for n in graph.discarded_nodes()),
        "stats": graph.stats(),
        "sequences": [
            {k: row[k] for k in ("role", "root_id", "node_ids", "prompt_len", "input_ids", "loss_mask", "logprobs")}
            | {"check_sequence": findings[row["node_ids"][-1]]}
            for row in document["sequences"]
        ],
    }


def answer(case: dict) -> dict:
    op = case["op"]
    if op == "graph":
        return graph_case(case)
    if op == "entries":
        try:
            trace = TrainingTrace.from_entries(case["entries"])
        except Exception as exc:  # noqa: BLE001 - the validator's refusal is the answer
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        return {"ok": True, "turns": len(trace.turns), "node_ids": [t.node_id for t in trace.turns]}
    if op == "trace":
        try:
            trace = TrainingTrace.model_validate(case["trace"])
        except Exception as exc:  # noqa: BLE001
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        return {"ok": True, "turns": len(trace.turns), "same_dump": trace.model_dump() == case["trace"]}
    return {"crash": f"unknown op {op!r}"}


def main() -> None:
    print(json.dumps({"versions": {"openenv": importlib.metadata.version("openenv")}}), flush=True)
    for line in sys.stdin:
        try:
            out = answer(json.loads(line))
        except Exception:  # noqa: BLE001 - report, keep serving
            out = {"crash": traceback.format_exc(limit=3)}
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
