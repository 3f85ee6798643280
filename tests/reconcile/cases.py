"""A rollout as a plain-JSON case the frameworks' own code reads (tests/reconcile/oracle_worker.py),
and our rows in the same shape, so the two can be compared row by row."""

from __future__ import annotations

import math
from typing import Any

from rollout_graph.analysis.reconcile.model import Reconciled, row_tokens
from rollout_graph.core.rollout import Rollout


def _logprobs(call) -> list[float] | None:
    lps = call.sampled_logprobs
    if lps is None:
        return None
    values = [float(x) for x in lps.tolist()]
    return None if any(not math.isfinite(v) for v in values) else values


def _n_tools(call) -> int:
    """The tool manifest's size as OpenEnv's node holds it: the request's list, else the count a
    rollout document gives without the list (``Call.has_tools``)."""
    if call.tools is not None:
        return len(call.tools)
    return int((call.claims or {}).get("n_tools") or 0)


def case_from_rollout(rollout: Rollout, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the oracle needs of a rollout's calls, in arrival order."""
    calls = []
    for c in rollout.calls:
        calls.append(
            {
                "node_id": c.node_id,
                "prompt_ids": None if c.prompt_ids is None else [int(t) for t in c.prompt_ids.tolist()],
                "sampled_ids": [int(t) for t in c.sampled_ids.tolist()],
                "logprobs": _logprobs(c),
                "messages": c.request_messages,
                "response": c.response_message,
                "tools": c.tools,
                "n_tools": _n_tools(c),
                "finish_reason": c.finish_reason,
                "ended_at": c.timing.get("ended_at"),
            }
        )
    return {"session_id": rollout.session_id, "calls": calls, "params": params or {}}


def our_rows(rollout: Rollout, result: Reconciled, trained_only: bool = False) -> list[dict[str, Any]]:
    """Our rows as the oracle reports the framework's."""
    out = []
    for row in result.rows:
        if trained_only and not row.trained:
            continue
        t = row_tokens(rollout, row)
        out.append(
            {
                "input_ids": t.input_ids.tolist(),
                "mask": t.loss_mask.tolist(),
                "logprobs": [round(x, 6) for x in t.logprobs.tolist()],
                "label": row.label,
                "trained": row.trained,
            }
        )
    return out


def rounded(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The oracle's rows with logprobs rounded as ours are."""
    return [{**r, "logprobs": [round(float(x), 6) for x in r["logprobs"]]} for r in rows]
