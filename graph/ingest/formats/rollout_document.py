"""Rollout documents: ``{"turns": [...], "sequences": [...]}``, as OpenEnv 0.10's ``export_session``
writes them (``GET /sessions/{id}/rollout``, both modes) and as ``rollout_document`` exports them.

A node's prompt is ``input_ids[:n_prompt]`` and its sampled span
``input_ids[n_prompt : n_prompt + n_sampled]`` of the first sequence that contains it. The
document's own edges (consecutive ``node_ids``), roles and validation are kept as claims so the
analysis can say where it disagrees. Read exactly as OpenEnv writes them (docs/formats.md, "Rollout
documents"): ``request_messages`` / ``request_tools`` / ``n_tools``, ``sampling_params`` (what was
submitted) and ``requested_sampling_params``, each turn's ``sampled_logprobs``; a turn the
sequences omit (OpenEnv's default export leaves discarded rows out) is placed by the document's own
``root_id`` and ``discarded`` (:func:`_place_omitted`); the grade follows ``capture_level``
(``tokens``: ids and logprobs; below it an eval document: messages, no ids).

Every turn's arrays are numpy views into its sequence, never copies: a document of N turns
sharing one sequence costs the sequence once, not N prompts. The analysis still reads every
prompt, so the ids the turns expand to (the sum of ``n_prompt + n_sampled``) are checked against
``max_expanded_ids`` BEFORE any call is built; a document over it is one named skip.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rollout_graph.core.findings import row_shape
from rollout_graph.core.records import FATAL, Call, Finding
from rollout_graph.ingest import limits
from rollout_graph.ingest.formats.fidelity import MESSAGES, TEXT, TOKENS, TOKENS_LOGPROBS
from rollout_graph.ingest.formats.fields import (
    RecordError,
    as_dict,
    message_list,
    new_call,
    params_of,
    problem_findings,
    record_problems,
    session_id_of,
    tool_list,
)
from rollout_graph.ingest.tokens import Problems, logprobs, token_ids

DOCUMENT_KEYS = (
    "role",
    "validation",
    "trainable",
    "capture_level",
    "rollout_type",
    "include_discarded",
    "include_messages",
    "stats",
    "metadata",
    "budget_stop_count",
)
OPENENV = "OpenEnv rollout document"


def is_rollout_document(record: dict) -> bool:
    """Whether the record is a rollout document (``turns`` and ``sequences``)."""
    return "turns" in record and "sequences" in record


@dataclass(slots=True)
class _Sequence:
    node_ids: list[str]
    input_ids: np.ndarray | None
    loss_mask: np.ndarray | None
    logprobs: np.ndarray | None
    claims: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Document:
    """The calls of a rollout document, its metadata and the turns skipped."""

    calls: list[Call]
    meta: dict[str, Any]
    skipped: list[str]


def _int(value) -> int | None:
    return value if type(value) is int and value >= 0 else None


def _sequences(raw: Any, problems: Problems) -> list[_Sequence]:
    out = []
    for j, seq in enumerate(raw if isinstance(raw, list) else []):
        seq = as_dict(seq)
        node_ids = seq.get("node_ids")
        node_ids = [str(n) for n in node_ids] if isinstance(node_ids, list) else []
        mask = seq.get("loss_mask")
        lps = seq.get("logprobs")
        out.append(
            _Sequence(
                node_ids=node_ids,
                input_ids=token_ids(seq.get("input_ids"), f"sequences[{j}].input_ids", problems),
                loss_mask=np.asarray(mask, dtype=np.float64) if _numbers(mask) else None,
                logprobs=logprobs(lps, f"sequences[{j}].logprobs", problems) if isinstance(lps, list) else None,
                claims={k: seq[k] for k in ("role", "trainable", "validation", "leaf_id") if k in seq},
            )
        )
        out[-1].claims["row"] = row_shape(  # for the training-row findings (core.findings.row_findings)
            len(seq["input_ids"]) if isinstance(seq.get("input_ids"), list) else None,
            mask if isinstance(mask, list) else None,
            len(lps) if isinstance(lps, list) else None,
            seq.get("prompt_len"),
        )
    return out


def _numbers(value) -> bool:
    return isinstance(value, list) and all(type(v) in (int, float) for v in value)


def expanded_ids(turns: Any, sequences: Any = None) -> int:
    """The token ids a document's turns expand to (sum of ``n_prompt + n_sampled``), from the raw
    turns; a turn that runs past the longest sequence counts none (it is reported as malformed)."""
    lengths = [
        len(s["input_ids"])
        for s in (sequences if isinstance(sequences, list) else ())
        if isinstance(s, dict) and isinstance(s.get("input_ids"), list | np.ndarray)
    ]
    longest = max(lengths) if lengths else None
    total = 0
    for turn in turns if isinstance(turns, list) else ():
        if isinstance(turn, dict):
            n_prompt, n_sampled = _int(turn.get("n_prompt")), _int(turn.get("n_sampled"))
            if n_prompt is not None and n_sampled is not None:
                if longest is None or n_prompt + n_sampled <= longest:
                    total += n_prompt + n_sampled
    return total


def parse(doc: dict, source: str, line: int, default_session: str) -> Document:
    """Convert a rollout document into calls, keeping its claims for comparison with the token links.

    Raises:
        RecordError: the turns expand to more ids than ``max_expanded_ids`` (checked before building).
    """
    cap = limits.active().max_expanded_ids
    total = expanded_ids(doc.get("turns"), doc.get("sequences"))
    if total > cap:
        raise RecordError(
            f"over a limit: this rollout document's {len(doc['turns']):,} calls expand to {total:,} token ids "
            f"(limit max_expanded_ids {cap:,}, --max-expanded-ids); the document is not loaded"
        )
    session = session_id_of(doc) or default_session
    doc_problems = Problems()
    sequences = _sequences(doc.get("sequences"), doc_problems)
    first_home: dict[str, tuple[_Sequence, int]] = {}
    claimed_parent: dict[str, str | None] = {}
    for seq in sequences:
        for k, node in enumerate(seq.node_ids):
            first_home.setdefault(node, (seq, k))
            claimed_parent.setdefault(node, seq.node_ids[k - 1] if k else None)

    meta = {k: doc[k] for k in DOCUMENT_KEYS if k in doc}
    meta["sequences"] = [
        {
            "node_ids": s.node_ids,
            **s.claims,
            "n_trainable": None if s.loss_mask is None else int(s.loss_mask.sum()),
            "masked_logprob_positions": _masked_with_logprob(s),
        }
        for s in sequences
    ]
    meta["findings"] = problem_findings(doc_problems, None) + _validation_findings(doc.get("validation"))
    level = doc.get("capture_level")
    ids_captured = level in (None, "tokens")  # below "tokens" an eval document: no ids, by construction

    calls: list[Call] = []
    skipped: list[str] = []
    turns = doc.get("turns")
    raw_turns: list[dict] = []
    for i, turn in enumerate(turns if isinstance(turns, list) else []):
        if not isinstance(turn, dict):
            skipped.append(f"turns[{i}] is not an object ({type(turn).__name__})")
            continue
        call = new_call({**turn, "session_id": session}, source, line, "rollout-document", session)
        if call.node_id == str(line):
            call.node_id = f"turn{i}"
        problems = Problems()
        _turn_fields(turn, call, problems)
        home = first_home.get(call.node_id)
        if home is not None and ids_captured:
            _turn_tokens(turn, home[0], call, problems)
        call.claims["parent"] = claimed_parent.get(call.node_id)
        call.claims["in_sequences"] = home is not None
        for key in ("role", "trainable", "discarded", "validation", "root_id", "n_tools", "harness_session_id"):
            if key in turn:
                call.claims[key] = turn[key]
        record_problems(call, problems)
        calls.append(call)
        raw_turns.append(turn)
    if ids_captured:
        _place_omitted(calls, raw_turns, first_home)
    grade = _grade(level, calls)
    if grade is not None:
        for call in calls:
            call.claims["fidelity"] = grade
    if level is not None:
        for call in calls:
            call.claims["format"] = OPENENV
    return Document(calls, meta, skipped)


def _grade(level: Any, calls: list[Call]) -> str | None:
    """The fidelity a document's ``capture_level`` gives (docs/formats.md, "Fidelity"): ``tokens``
    captures ids and logprobs; below it (``logprobs``, ``text``: an eval document) there are no
    ids, so its messages (or its text) are what it holds. None: no level (infer per call)."""
    if level == "tokens":
        return TOKENS_LOGPROBS if any(c.sampled_logprobs is not None for c in calls) else TOKENS
    if isinstance(level, str):
        return MESSAGES if any(c.request_messages or c.response_message for c in calls) else TEXT
    return None


def _validation_findings(validation: Any) -> list[Finding]:
    """OpenEnv's own FATAL findings (``"[FATAL] code: detail"`` strings in ``validation``), kept as
    FATAL ``document_validation``: the writer itself refused to train on this rollout."""
    if not isinstance(validation, list):
        return []
    return [
        Finding(FATAL, "document_validation", f"the document says: {text[:500]}")
        for text in validation
        if isinstance(text, str) and text.lstrip().startswith(("[FATAL]", "FATAL"))
    ]


def _place_omitted(calls: list[Call], turns: list[dict], first_home: dict[str, tuple[_Sequence, int]]) -> None:
    """Place the turns no sequence holds (OpenEnv's default export leaves discarded rows out; each
    turn still names its ``root_id``, ``discarded``, ``n_prompt`` and ``n_sampled``).

    Its prompt ids are known where the document implies them: a turn that is its own root has the
    prompt of a root the sequences hold with as many prompt tokens (OpenEnv discards a root only
    beside an identical prompt that continued); another turn the prompt of a sibling with as many
    prompt tokens (a retry re-sends its prompt), a sibling being a held turn of its conversation
    under the same parent: the turn whose end (``n_prompt + n_sampled``) is the longest that fits in
    its prompt (the earliest on a tie). With its prompt known it is placed there (claims
    ``placed_by_document``, its parent the document's); without, it is linked as a call without ids
    (by its messages). Its sampled ids are in no sequence either way (claims ``tokens_omitted``)."""
    index = {c.node_id: k for k, c in enumerate(calls)}
    held = [k for k, c in enumerate(calls) if c.node_id in first_home]
    for k, call in enumerate(calls):
        if call.node_id in first_home or call.prompt_ids is not None:
            continue
        turn = turns[k]
        n_prompt, n_sampled = _int(turn.get("n_prompt")), _int(turn.get("n_sampled"))
        root = turn.get("root_id")
        if n_prompt is None or n_sampled is None or not isinstance(root, str) or root not in index:
            continue
        call.claims.update(tokens_omitted=True, n_prompt=n_prompt, n_sampled=n_sampled)
        parent: int | None = None
        if root == call.node_id:
            twins = [j for j in held if calls[j].claims.get("root_id") == calls[j].node_id]
        else:
            same_root = [j for j in held if calls[j].claims.get("root_id") == root]
            fits = [j for j in same_root if 0 < calls[j].n_end <= n_prompt]
            parent = max(fits, key=lambda j: (calls[j].n_end, -j)) if fits else index[root]
            twins = [j for j in same_root if calls[j].claims.get("parent") == calls[parent].node_id]
        twin = next((j for j in twins if calls[j].n_prompt == n_prompt and calls[j].prompt_ids is not None), None)
        if twin is None:
            continue
        call.prompt_ids = calls[twin].prompt_ids
        call.claims.update(
            placed_by_document=True,
            prompt_from=calls[twin].node_id,
            parent=None if parent is None else calls[parent].node_id,
        )


def _masked_with_logprob(seq: _Sequence) -> int:
    if seq.loss_mask is None or seq.logprobs is None or seq.loss_mask.shape != seq.logprobs.shape:
        return 0
    return int(np.count_nonzero((seq.loss_mask == 0) & (np.nan_to_num(seq.logprobs, nan=1.0) != 0)))


def _turn_fields(turn: dict, call: Call, problems: Problems) -> None:
    request = as_dict(turn.get("request"))
    messages = turn.get("request_messages", turn.get("messages", request.get("messages")))
    call.request_messages = message_list(messages, "request_messages", problems)
    call.tools = tool_list(turn.get("request_tools", turn.get("tools", request.get("tools"))), problems)
    response = turn.get("response_message", turn.get("response"))
    if isinstance(response, dict) and "choices" in response:
        response = as_dict((response.get("choices") or [{}])[0]).get("message")
    call.response_message = response if isinstance(response, dict) and response else None
    for name in ("model", "finish_reason"):
        if turn.get(name) is not None:
            setattr(call, name, str(turn[name]))
    # OpenEnv: what the harness asked for, and what was submitted to the engine (docs/formats.md)
    if "requested_sampling_params" in turn:
        call.requested_params = params_of(turn["requested_sampling_params"], "requested_sampling_params", problems)
    if "sampling_params" in turn:
        call.submitted_params = params_of(turn["sampling_params"], "sampling_params", problems)


def _turn_tokens(turn: dict, seq: _Sequence, call: Call, problems: Problems) -> None:
    n_prompt, n_sampled = _int(turn.get("n_prompt")), _int(turn.get("n_sampled"))
    if n_prompt is None or n_sampled is None:
        problems.malformed.append("n_prompt/n_sampled missing or not non-negative integers")
        return
    if seq.input_ids is None or n_prompt + n_sampled > seq.input_ids.shape[0]:
        problems.malformed.append(f"n_prompt + n_sampled = {n_prompt + n_sampled} runs past its sequence's input_ids")
        return
    # Views, not copies: every turn of a sequence shares its one array (no quadratic expansion).
    call.prompt_ids = seq.input_ids[:n_prompt]
    call.sampled_ids = seq.input_ids[n_prompt : n_prompt + n_sampled]
    own = turn.get("sampled_logprobs")
    if isinstance(own, list) and len(own) == n_sampled and n_sampled:
        # the engine's logprobs of this turn, as OpenEnv recorded them (also when its row masks them)
        call.sampled_logprobs = logprobs(own, "sampled_logprobs", problems)
        return
    if seq.logprobs is None or seq.loss_mask is None or seq.logprobs.shape != seq.loss_mask.shape:
        return
    span = slice(n_prompt, n_prompt + n_sampled)
    if n_sampled and bool((seq.loss_mask[span] == 1).all()):
        call.sampled_logprobs = seq.logprobs[span]
    elif n_sampled:
        call.claims["masked_in_document"] = True
