"""Analysed rollouts -> other formats: rollout documents, labelled training rows, trace entries."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from graph.core.rollout import Rollout
from graph.signals.join import row_columns


def rollout_document(rollout: Rollout, include_discarded: bool = True, include_messages: bool = True) -> dict[str, Any]:
    """The rollout as ``{"turns": [...], "sequences": [...]}`` (docs/formats.md, rollout documents)."""
    turns = []
    for i, call in enumerate(rollout.calls):
        turn: dict[str, Any] = {
            "node_id": call.node_id,
            "n_prompt": call.n_prompt,
            "n_sampled": call.n_sampled,
            "finish_reason": call.finish_reason,
            "model": call.model,
            "discarded": i in rollout.topology.discarded,
        }
        if include_messages:
            turn["messages"] = call.request_messages
            turn["tools"] = call.tools
            turn["response_message"] = call.response_message
        turns.append(turn)
    sequences = []
    for seq in rollout.sequences:
        if seq.role == "discarded" and not include_discarded:
            continue
        tokens = rollout.tokens(seq)
        sequences.append(
            {
                "leaf_id": rollout.calls[seq.leaf].node_id,
                "node_ids": [rollout.calls[k].node_id for k in seq.nodes],
                "role": seq.role,
                "trainable": seq.n_trainable > 0,
                "input_ids": tokens.input_ids.tolist(),
                "loss_mask": tokens.loss_mask.tolist(),
                "logprobs": tokens.logprobs.tolist(),
            }
        )
    fatal = [f.as_dict() for f in rollout.findings if f.level == "FATAL"]
    return {
        "session_id": rollout.session_id,
        "capture_level": "tokens",
        "rollout_type": "agentic" if any(c.has_tools for c in rollout.calls) else "chat",
        "include_discarded": include_discarded,
        "include_messages": include_messages,
        "validation": {"ok": not fatal, "fatal": fatal},
        "turns": turns,
        "sequences": sequences,
    }


ALL_ROLES = ("agent", "auxiliary", "discarded")


def _path_findings(rollout: Rollout, seq) -> list[dict[str, Any]]:
    ids = {rollout.calls[k].node_id for k in seq.nodes}
    leaf = rollout.calls[seq.leaf].node_id
    return [f.as_dict() for f in rollout.findings if f.node_id in ids and (f.leaf_id is None or f.leaf_id == leaf)]


def training_rows(rollout: Rollout, roles: tuple[str, ...] = ALL_ROLES) -> list[dict[str, Any]]:
    """One labelled row per sequence (every role by default; rows are labelled, never dropped)."""
    rows = []
    for index, seq in enumerate(rollout.sequences):
        if seq.role not in roles:
            continue
        tokens = rollout.tokens(seq)
        row: dict[str, Any] = {
            "session_id": rollout.session_id,
            "leaf_id": rollout.calls[seq.leaf].node_id,
            "root_id": rollout.calls[seq.nodes[0]].node_id,
            "node_ids": [rollout.calls[k].node_id for k in seq.nodes],
            "role": seq.role,
            "input_ids": tokens.input_ids.tolist(),
            "loss_mask": tokens.loss_mask.tolist(),
            "logprobs": tokens.logprobs.tolist(),
            "prompt_len": seq.prompt_len,
            "n_trainable": seq.n_trainable,
            "findings": _path_findings(rollout, seq),
        }
        if rollout.signals is not None:  # joined with --signals: the trainer's columns too
            row.update(row_columns(rollout.signals, index))
        rows.append(row)
    return rows


def trace_entries(rollout: Rollout) -> list[dict[str, Any]]:
    """Per-call records in the TRL/OpenEnv ``TraceEntry`` shape, for the agent's calls."""
    entries = []
    for i, call in enumerate(rollout.calls):
        if rollout.node_roles[i] != "agent" or call.prompt_ids is None:
            continue
        parent = rollout.topology.parents[i]
        trained = bool(rollout.trainable[i])
        entries.append(
            {
                "call_id": call.node_id,
                "request": {"messages": call.request_messages, "tools": call.tools, **call.requested_params},
                "response": {
                    "choices": [{"message": call.response_message, "finish_reason": call.finish_reason}],
                    "model": call.model,
                },
                "prompt_token_ids": call.prompt_ids.tolist(),
                "completion_token_ids": call.sampled_ids.tolist(),
                "per_token_logps": call.sampled_logprobs.tolist() if call.logprobs_aligned else None,
                "loss_mask": [1 if trained else 0] * call.n_sampled,
                "metadata": {
                    "session_id": rollout.session_id,
                    "node_id": call.node_id,
                    "parent_id": None if parent is None else rollout.calls[parent].node_id,
                    "role": rollout.node_roles[i],
                    "findings": [f.as_dict() for f in rollout.findings_for(i)],
                },
            }
        )
    return entries


def write_records(records: list[dict[str, Any]], out: str | Path) -> None:
    """JSONL, or Parquet when the file name ends in .parquet."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        flat = [{k: orjson.dumps(v).decode() if isinstance(v, dict) else v for k, v in r.items()} for r in records]
        pq.write_table(pa.Table.from_pylist(flat), out)
    else:
        out.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
