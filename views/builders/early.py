"""What a deep link shows of one call before the rest of its trace is read (pure).

Entry points: ``header_html(call, file, line)``, ``sampled_strip(call)`` and ``note_html(size)``: the
header and the sampled tokens of the record read from its line (``rollout_graph.ingest.load.calls_at_line``).
Nothing here needs the graph: the call's parent, role, context span and whether it is trained are
known only when the whole trace is read, and none is guessed.

Where it sits: drawn by views/panels/early.py, replaced by the whole explorer once the read ends."""

from __future__ import annotations

import numpy as np

from rollout_graph.core.records import Call
from rollout_graph.escape import html_text
from rollout_graph.ui.builders.tokens import TokenStrip

EARLY_NOTE = "rg-early-note"  # the "reading the rest of the trace" note (browser tests look for it)


def sampled_strip(call: Call) -> TokenStrip:
    """The call's sampled span alone, each token coloured by its logprob (the record's own)."""
    n = call.n_sampled
    logprobs = (
        call.sampled_logprobs.astype(np.float64)
        if call.logprobs_aligned and call.sampled_logprobs is not None
        else np.full(n, np.nan)
    )
    top = call.top_k
    width = top.ids.shape[1] if top is not None and top.ids.ndim == 2 else 0
    top_ids = np.full((n, width), -1, dtype=np.int64)
    top_lps = np.full((n, width), np.nan)
    if top is not None and width:
        rows = min(n, top.ids.shape[0])
        top_ids[:rows] = top.ids[:rows]
        top_lps[:rows] = top.logprobs[:rows]
    return TokenStrip(
        ids=call.sampled_ids.astype(np.int64),
        sampled=np.ones(n, bool),
        trained=np.ones(n, bool),  # coloured by logprob; whether it is trained is not known yet
        logprobs=logprobs,
        top_ids=top_ids,
        top_logprobs=top_lps,
    )


def header_html(call: Call, file: str, line: int) -> str:
    """The call's id, rollout and place in its file, and what its record says of it."""
    facts = [
        f"rollout {call.session_id}",
        f"{file}, line {line:,}",
        f"prompt {call.n_prompt:,} tokens" if call.prompt_ids is not None else "no prompt ids",
        f"sampled {call.n_sampled:,} tokens",
    ]
    if call.model:
        facts.append(f"model {call.model}")
    if call.finish_reason:
        facts.append(f"finish {call.finish_reason}")
    return (
        f'<div class="rg-early-title" style="font-weight:600;font-size:18px;color:#0f172a;margin:4px 0">'
        f"{html_text(call.node_id)}</div>"
        f'<div style="font:13px system-ui;color:#475569">{" · ".join(html_text(f) for f in facts)}</div>'
    )


def note_html(size_bytes: int | None) -> str:
    size = f" ({size_bytes / 1e6:,.0f} MB)" if size_bytes else ""
    return (
        f'<div class="{EARLY_NOTE}" style="font:13px system-ui;color:#1e3a8a;background:#eff6ff;'
        f'border:1px solid #bfdbfe;border-radius:6px;padding:8px 12px;margin:6px 0">'
        f"<b>Reading the rest of the trace{html_text(size)}…</b> This call was read first, from its line: its "
        "messages and sampled tokens. Its graph, parent and children, role, findings and training row "
        "appear when the read ends; the page then opens at this call.</div>"
    )
