"""What the engine behind a capture is, as the capture proxy's start-up probes found it.

Every record ``rollout-graph capture`` writes carries ``engine`` (rollout_graph.capture.probe:
the model, its context window, whether token ids and logprobs come back, whether the logprobs are
raw or processed, whether tool calling works); a reader puts it on the call as
``claims["engine"]``. A rollout document may say how its logprobs were taken too
(``logprobs_mode`` in its metadata, or OpenEnv's ``llm.logprobs_mode``): :func:`logprobs_mode`
reads either. The findings that need the engine (``raw_logprobs``, ``no_tool_calling``,
``no_tool_call_emitted``, ``context_budget_exhausted``; docs/semantics.md, "Findings") and the
reports that show it (``inspect``, ``tail``, the app's load report) read it here.

Entry points: :func:`engine_of` (a call's engine), :func:`engines` (the distinct engines of a
rollout's calls), :func:`describe` (one line for people).
"""

from __future__ import annotations

from typing import Any

from rollout_graph.core.records import Call

RAW, PROCESSED = "raw", "processed"


def engine_of(call: Call) -> dict[str, Any] | None:
    """The probe summary a call's record carried (None when it carried none)."""
    engine = call.claims.get("engine")
    return engine if isinstance(engine, dict) else None


def engines(calls: list[Call]) -> list[dict[str, Any]]:
    """The distinct engine summaries of ``calls``, in the order they first appear."""
    seen: list[dict[str, Any]] = []
    for call in calls:
        engine = engine_of(call)
        if engine is not None and engine not in seen:
            seen.append(engine)
    return seen


def logprobs_mode(call: Call, document: dict[str, Any] | None = None) -> str | None:
    """``raw`` or ``processed`` when a probe measured it (or a document says it), else None."""
    engine = engine_of(call)
    mode = engine.get("logprobs_mode") if engine is not None else call.claims.get("logprobs_mode")
    if mode is None and document is not None:
        meta: dict[str, Any] = document["metadata"] if isinstance(document.get("metadata"), dict) else {}
        llm: dict[str, Any] = meta["llm"] if isinstance(meta.get("llm"), dict) else {}
        mode = document.get("logprobs_mode", meta.get("logprobs_mode", llm.get("logprobs_mode")))
    return mode if mode in (RAW, PROCESSED) else None


def describe(engine: dict[str, Any]) -> str:
    """One line for people: ``model · context 8,192 · token ids yes · logprobs raw (...) · tool calling ok``."""
    if engine.get("reachable") is False:
        return "engine not reachable at start-up: nothing probed"
    parts = [str(engine.get("model", "model ?"))]
    if engine.get("model_served") is False:
        parts.append("NOT SERVED")
    if isinstance(engine.get("max_model_len"), int):
        parts.append(f"context {engine['max_model_len']:,}")
    if "token_ids" in engine:
        ids = bool(engine["token_ids"]) and engine.get("prompt_ids") is not False
        parts.append(f"token ids {'yes' if ids else 'NO'}")
    mode = engine.get("logprobs_mode")
    gap = engine.get("temperature_gap")
    if mode is not None:
        evidence = ""
        if isinstance(gap, list) and len(gap) == 2 and all(isinstance(g, int | float) for g in gap):
            evidence = f" (top-2 gap {gap[0]:.3g} at T=1, {gap[1]:.3g} at T=2)"
        parts.append(f"logprobs {mode}{evidence}")
    elif engine.get("logprobs") is False:
        parts.append("logprobs NO")
    if engine.get("tool_calling"):
        parts.append(f"tool calling {engine['tool_calling']}")
    return " · ".join(parts)
