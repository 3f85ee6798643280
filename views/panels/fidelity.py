"""What the rollout's source can support (docs/formats.md, "Fidelity"): the grade, what it rules
out, the framework it came from and its step, shown instead of panels left empty.

Entry points: ``render(rollout)``; ``banner_text(rollout)`` builds its words (pure).

Where it sits: at the top of the explorer (views/screens/explorer.py), under the headline."""

from __future__ import annotations

import streamlit as st

from rollout_graph.core.rollout import Rollout
from rollout_graph.escape import md
from rollout_graph.ingest.formats.fidelity import TOKENS_LOGPROBS, fidelity_json

ICONS = {
    "tokens": ":material/tag:",
    "sequences": ":material/view_list:",
    "messages": ":material/chat:",
    "text": ":material/notes:",
}


def banner_text(detail: dict) -> str | None:
    """The banner's Markdown (every trace-derived part escaped), or None for a full-fidelity trace
    that names no framework and no step; pure."""
    origin = ", ".join(
        part
        for part in (
            md(detail["format"]) if detail.get("format") else None,
            f"step {detail['step']}" if detail.get("step") is not None else None,
        )
        if part
    )
    if detail["grade"] == TOKENS_LOGPROBS:
        return f"Fidelity **tokens+logprobs** · {origin}" if origin else None
    text = f"Fidelity **{detail['grade']}**" + (f" · {origin}" if origin else "")
    return f"{text} — rules out: {md(detail['rules_out'])}"


def render(rollout: Rollout) -> None:
    """One caption (full fidelity) or info line (anything less) under the headline."""
    detail = fidelity_json(rollout.calls)
    text = banner_text(detail)
    if text is None:
        return
    if detail["grade"] == TOKENS_LOGPROBS:
        st.caption(text)
    else:
        st.info(text, icon=ICONS.get(detail["grade"], ":material/info:"))
