"""Analysed rollouts -> other formats: rollout documents, labelled training rows, trace entries,
OpenEnv training traces.

Entry points: :func:`iter_training_rows` (``export --format rows``: one labelled row per
sequence), :func:`iter_trace_entries` (``--format trace-entries``: the agent's calls as TRL/OpenEnv
``TraceEntry`` records), :func:`training_trace` (``--format openenv-training-trace``: one OpenEnv
``TrainingTrace.model_dump()`` per rollout), :func:`rollout_document` (a document the readers open
again) and :func:`write_records` (JSONL or Parquet, streamed and atomic). It sits after the
analysis (``rollout_graph.pipeline``) and before the command line (``rollout_graph.cli.export``)
and the app's download buttons. Trace entries and training traces are what OpenEnv's own trainer
contract accepts unchanged (its ``TrainingTrace.from_entries``; tests/conformance/ runs it):
``loss_mask`` over prompt plus completion, and the calls its per-call check refuses left out
(:func:`not_trainer_ready`). Formats and their keys: docs/cli.md, "Training rows".
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from rollout_graph.core.records import Call
from rollout_graph.core.rollout import Rollout
from rollout_graph.core.types import AGENT, DISCARDED, FATAL, RETOKENIZED, ROLES
from rollout_graph.reports.output import OutputError, atomic_path
from rollout_graph.signals.join import row_columns

__all__ = [
    "OutputError",
    "Written",
    "iter_trace_entries",
    "iter_training_rows",
    "not_trainer_ready",
    "training_trace",
    "write_records",
]


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
        if seq.role == DISCARDED and not include_discarded:
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
    fatal = [f.as_dict() for f in rollout.findings if f.level == FATAL]
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


ALL_ROLES = ROLES


def _path_findings(rollout: Rollout, seq) -> list[dict[str, Any]]:
    ids = {rollout.calls[k].node_id for k in seq.nodes}
    leaf = rollout.calls[seq.leaf].node_id
    return [f.as_dict() for f in rollout.findings if f.node_id in ids and (f.leaf_id is None or f.leaf_id == leaf)]


def unfinished_nodes(rollout: Rollout) -> set[int]:
    """Calls in sibling groups none of which continued (the ``unfinished_attempts`` finding)."""
    return {m for group in rollout.topology.unfinished for m in group}


def retokenized_replays(rollout: Rollout) -> dict[int, list[str]]:
    """Call -> the node ids of the earlier calls whose reply its prompt replays re-tokenized (the
    same text, other ids: near-miss kind ``retokenized``)."""
    out: dict[int, list[str]] = {}
    for m in sorted(rollout.near_misses.values(), key=lambda m: (m.later, m.earlier)):
        if m.kind == RETOKENIZED:
            out.setdefault(m.later, []).append(rollout.calls[m.earlier].node_id)
    return out


def iter_training_rows(
    rollout: Rollout, roles: tuple[str, ...] = ALL_ROLES, drop_unfinished: bool = False
) -> Iterator[dict[str, Any]]:
    """One labelled row per sequence, built only when asked for (streamed exports). Every role
    by default; rows are labelled, never dropped unless ``drop_unfinished`` leaves out the rows
    that end in an unfinished attempt."""
    unfinished = unfinished_nodes(rollout) if drop_unfinished else set()
    retokenized = retokenized_replays(rollout)
    for index, seq in enumerate(rollout.sequences):
        if seq.role not in roles or seq.leaf in unfinished:
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
            # the earlier calls whose reply this row's context replays re-tokenized (docs/semantics.md)
            "retokenized_history": [e for k in seq.nodes for e in retokenized.get(k, ())],
        }
        if rollout.signals is not None:  # joined with --signals: the trainer's columns too
            row.update(row_columns(rollout.signals, index))
        yield row


def training_rows(
    rollout: Rollout, roles: tuple[str, ...] = ALL_ROLES, drop_unfinished: bool = False
) -> list[dict[str, Any]]:
    """One labelled row per sequence (every role by default; rows are labelled, never dropped
    unless ``drop_unfinished``)."""
    return list(iter_training_rows(rollout, roles, drop_unfinished))


def trace_entries(rollout: Rollout, drop_unfinished: bool = False) -> list[dict[str, Any]]:
    """Per-call records in the TRL/OpenEnv ``TraceEntry`` shape, for the agent's calls (without
    the unfinished attempts when ``drop_unfinished``)."""
    return list(iter_trace_entries(rollout, drop_unfinished))


def not_trainer_ready(call: Call) -> str | None:
    """Why OpenEnv's trainer contract (``TrainingTrace.from_entries``, its per-call check) would
    refuse this call's tokens, or None: the calls ``trace-entries`` leaves out, as OpenEnv's own
    ``to_trace_entries`` does (docs/cli.md, "Trace entries")."""
    prompt, sampled, lps = call.prompt_ids, call.sampled_ids, call.sampled_logprobs
    if prompt is None or prompt.shape[0] == 0:
        return "no prompt token ids"
    if sampled.shape[0] == 0:
        return "no sampled tokens"
    if (prompt < 0).any() or (sampled < 0).any():
        return "invalid token ids"
    if lps is None or lps.shape[0] == 0:
        return "no logprobs"
    if lps.shape[0] != sampled.shape[0]:
        return f"{lps.shape[0]} logprobs for {sampled.shape[0]} sampled tokens"
    if not np.isfinite(lps).all():
        return "logprobs that are not finite numbers"
    if (lps > 0).any():
        return "positive logprobs"
    return None


def _sampling(call: Call) -> dict[str, Any]:
    """What was submitted to the engine: the proxy's record of it, else the request as sent."""
    return dict(call.submitted_params if call.submitted_params is not None else call.requested_params)


def iter_trace_entries(
    rollout: Rollout, drop_unfinished: bool = False, left_out: list[str] | None = None
) -> Iterator[dict[str, Any]]:
    """:func:`trace_entries`, built one at a time (streamed exports). Each entry passes OpenEnv's
    ``TrainingTrace.from_entries`` unchanged: ``loss_mask`` spans prompt plus completion (0 over
    the prompt), ``metadata`` carries ``node_id``, ``sampling_params``, ``requested_sampling_params``,
    ``n_tools`` and ``model``. An agent call OpenEnv's per-call check would refuse (no logprobs,
    positive or non-finite ones, no prompt ids) is left out, as OpenEnv's ``to_trace_entries``
    leaves it out; ``left_out`` (when given) collects ``session/node: reason`` for each."""
    unfinished = unfinished_nodes(rollout) if drop_unfinished else set()
    parents = rollout.topology.parents
    for i, call in enumerate(rollout.calls):
        if rollout.node_roles[i] != AGENT or call.prompt_ids is None or i in unfinished:
            continue
        reason = not_trainer_ready(call)
        if reason is not None:
            if left_out is not None:
                left_out.append(f"{rollout.session_id}/{call.node_id}: {reason}")
            continue
        yield _trace_entry(rollout, i, call, parents[i])


def _trace_entry(rollout: Rollout, i: int, call: Call, parent: int | None) -> dict[str, Any]:
    assert call.prompt_ids is not None and call.sampled_logprobs is not None
    trained = 1 if rollout.trainable[i] else 0
    completion_mask = [trained] * call.n_sampled
    return {
        "call_id": call.node_id,
        "request": {"messages": call.request_messages or [], "tools": call.tools, **call.requested_params},
        "response": {
            "choices": [{"message": call.response_message or {}, "finish_reason": call.finish_reason}],
            "model": call.model,
        },
        "prompt_token_ids": call.prompt_ids.tolist(),
        "completion_token_ids": call.sampled_ids.tolist(),
        "per_token_logps": call.sampled_logprobs.astype(float).tolist(),
        "loss_mask": [0] * call.n_prompt + completion_mask,
        # deprecated alias: the completion-only mask ``loss_mask`` was before (docs/cli.md)
        "completion_loss_mask": completion_mask,
        "metadata": {
            "node_id": call.node_id,
            "index": i,
            "model": call.model,
            "n_tools": len(call.tools or ()),
            "harness_session_id": call.claims.get("harness_session_id"),
            "sampling_params": _sampling(call),
            "requested_sampling_params": dict(call.requested_params),
            "session_id": rollout.session_id,
            "parent_id": None if parent is None else rollout.calls[parent].node_id,
            "role": rollout.node_roles[i],
            "findings": [f.as_dict() for f in rollout.findings_for(i)],
        },
    }


TURN_KEYS = (
    "prompt_token_ids",
    "completion_token_ids",
    "per_token_logps",
    "loss_mask",
    "request",
    "response",
    "metadata",
)


def training_trace(
    rollout: Rollout, drop_unfinished: bool = False, left_out: list[str] | None = None
) -> dict[str, Any] | None:
    """The rollout as OpenEnv's ``TrainingTrace.model_dump()`` (``schema_version``, ``turns``): the
    agent calls of :func:`iter_trace_entries`, each a ``TrainingTurn`` named by its ``node_id``;
    ``TrainingTrace.model_validate`` accepts it as it is. None when no call is trainer-ready."""
    turns = [
        {"node_id": entry["metadata"]["node_id"], **{k: entry[k] for k in TURN_KEYS}}
        for entry in iter_trace_entries(rollout, drop_unfinished, left_out)
    ]
    return {"schema_version": 1, "turns": turns} if turns else None


def _schema(kind: str | None):
    """The Parquet schema of an export kind (fixed, so every row group agrees); None: inferred."""
    import pyarrow as pa

    ids, floats, text = pa.list_(pa.int64()), pa.list_(pa.float64()), pa.string()
    if kind == "rows":
        finding = pa.struct([("level", text), ("code", text), ("node_id", text), ("leaf_id", text), ("detail", text)])
        return pa.schema(
            [
                ("session_id", text), ("leaf_id", text), ("root_id", text), ("node_ids", pa.list_(text)),
                ("role", text), ("input_ids", ids), ("loss_mask", ids), ("logprobs", floats),
                ("prompt_len", pa.int64()), ("n_trainable", pa.int64()), ("findings", pa.list_(finding)),
            ]
        )  # fmt: skip
    if kind == "trace-entries":
        return pa.schema(
            [
                ("call_id", text), ("request", text), ("response", text), ("prompt_token_ids", ids),
                ("completion_token_ids", ids), ("per_token_logps", floats), ("loss_mask", ids),
                ("completion_loss_mask", ids), ("metadata", text),
            ]
        )  # fmt: skip
    return None


@dataclass(slots=True)
class Written:
    """What a streamed export wrote, and the records it had to leave out (with the first reason)."""

    records: int = 0
    failed: int = 0
    first_failure: str | None = None

    def fail(self, exc: Exception) -> None:
        """Count a record left out, keeping the first reason."""
        self.failed += 1
        if self.first_failure is None:
            self.first_failure = f"{type(exc).__name__}: {exc}"[:200]


ROW_GROUP_VALUES = 1_000_000  # list items buffered before a Parquet row group is written


def _flat(record: dict[str, Any]) -> dict[str, Any]:
    """Nested objects as JSON text (Parquet columns stay flat)."""
    return {k: orjson.dumps(v).decode() if isinstance(v, dict) else v for k, v in record.items()}


# What `export --out NAME.ext` writes, by the file name's extension (anything else is refused).
OUT_FORMATS = {".jsonl": "jsonl", ".parquet": "parquet", ".graphml": "graphml"}


def out_format(out: str | Path) -> str:
    """The output format named by ``out``'s extension: ``jsonl``, ``parquet`` or ``graphml``.

    Raises:
        ValueError: an extension that names none of them (the message lists the known ones).
    """
    suffix = Path(out).suffix.lower()
    if suffix not in OUT_FORMATS:
        known = ", ".join(OUT_FORMATS)
        raise ValueError(
            f"{Path(out).name}: unknown output extension {suffix or '(none)'!r}; the extension picks the format: {known}"
        )
    return OUT_FORMATS[suffix]


def write_records(records: Iterable[dict[str, Any]], out: str | Path, kind: str | None = None) -> Written:
    """Stream records to JSONL, or Parquet when the file name ends in .parquet, atomically.

    Records are written as they come (JSONL line by line, Parquet in row groups), so memory is
    bounded by one rollout's rows, not the output. A record that cannot be serialised (nested
    deeper than the encoder allows) is left out and counted. ``kind`` (``"rows"`` or
    ``"trace-entries"``) fixes the Parquet schema.

    Raises:
        OutputError: the output cannot be written; nothing is left at ``out``.
    """
    out = Path(out)
    written = Written()
    with atomic_path(out) as tmp:
        if out.suffix.lower() == ".parquet":
            _write_parquet(records, tmp, _schema(kind), written)
        else:
            with open(tmp, "wb", buffering=1 << 20) as f:
                for record in records:
                    try:
                        line = orjson.dumps(record, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n"
                    except (orjson.JSONEncodeError, TypeError) as exc:
                        written.fail(exc)
                        continue
                    f.write(line)
                    written.records += 1
    return written


def _write_parquet(records: Iterable[dict[str, Any]], tmp: Path, schema, written: Written) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    writer = None
    batch: list[dict[str, Any]] = []
    values = 0

    def flush() -> None:
        nonlocal writer, batch, values
        if not batch:
            return
        table = pa.Table.from_pylist(batch, schema=schema)
        if writer is None:
            writer = pq.ParquetWriter(tmp, table.schema)
        writer.write_table(table)
        batch, values = [], 0

    try:
        for record in records:
            try:
                flat = _flat(record)
            except (orjson.JSONEncodeError, TypeError) as exc:
                written.fail(exc)
                continue
            batch.append(flat)
            written.records += 1
            values += sum(len(v) for v in flat.values() if isinstance(v, list))
            if values >= ROW_GROUP_VALUES:
                flush()
        flush()
        if writer is None:  # no records: an empty file with the schema
            pq.write_table(pa.Table.from_pylist([], schema=schema or pa.schema([])), tmp)
    finally:
        if writer is not None:
            writer.close()
