"""A fork's children one under the other (pure): every child's sampled text from the fork, where it
departs from the first child marked, the logprobs there rounded, and which child went on.

Entry point: ``fork_html(rollout, fork, decoder)``: one full-width row per child (never columns:
seven children in a 400 px pane read as text broken every few characters), the first child first,
each with its state (continued, discarded, leaf), the token where it departs, both logprobs to
three decimals and whether the other child's token was among the first one's recorded
alternatives; long texts scroll inside their row.

Where it sits: the detail pane's "Fork: its N children" expander (views/screens/explorer.py); the
diffs are rollout_graph.analysis.forks ``fork_diffs``; trace text escaped here.
"""

from __future__ import annotations

from rollout_graph.analysis.decode import Decoder
from rollout_graph.analysis.forks import fork_diffs
from rollout_graph.core.rollout import Rollout
from rollout_graph.escape import html_text

TAIL = 60  # tokens shown after the departure
STYLE = (
    "<style>.rg-fork{font:13px/1.5 system-ui,sans-serif;color:#0f172a}"
    ".rg-fork .row{border:1px solid #e2e8f0;border-radius:6px;padding:6px 10px;margin:0 0 6px}"
    ".rg-fork .h{font-size:12.5px;color:#475569;margin-bottom:3px}.rg-fork .h b{color:#0f172a}"
    ".rg-fork pre{white-space:pre-wrap;word-break:break-word;margin:0;max-height:160px;overflow:auto;"
    "font:12px/1.45 ui-monospace,Menlo,Consolas,monospace}"
    ".rg-fork .same{color:#64748b}.rg-fork .del{background:#fee2e2}.rg-fork .ins{background:#dcfce7}"
    ".rg-fork .went{color:#166534;font-weight:600}</style>"
)


def _lp(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def fork_html(rollout: Rollout, fork: int, decoder: Decoder) -> str:
    """The fork's children one per row (see the module docstring)."""
    calls, topo = rollout.calls, rollout.topology
    children = sorted(topo.children[fork])
    if not children:
        return ""
    diffs = {d.other: d for d in fork_diffs(rollout, fork)}
    departs = min((d.divergence for d in diffs.values() if d.divergence is not None), default=None)
    rows = []
    for child in children:
        call = calls[child]
        d = diffs.get(child)
        cut = (departs if d is None else d.divergence) if (d is None or d.divergence is not None) else None
        cut = call.n_sampled if cut is None else min(cut, call.n_sampled)
        pieces = decoder.pieces(call.sampled_ids[: cut + TAIL])
        same, changed = "".join(pieces[:cut]), "".join(pieces[cut:])
        more = call.n_sampled - (cut + TAIL)
        if topo.children[child]:
            status = '<span class="went">went on</span>'
        elif child in topo.discarded:
            status = f"discarded ({html_text(calls[topo.discarded[child]].node_id)} went on)"
        else:
            status = "a leaf (ends a training row)"
        note = ""
        if d is not None:
            if d.divergence is None:
                note = " · the same sampled tokens as the first"
            else:
                top = {True: "in", False: "not in", None: "no alternatives recorded for"}[d.other_in_original_top_k]
                note = (
                    f" · departs at sampled token {d.divergence:,}: logprob {_lp(d.other_logprob)} here vs "
                    f"{_lp(d.original_logprob)} in the first; {top} the first's top-k"
                    + (" · the same prompt (a retry)" if d.same_prompt else "")
                )
        cls = "ins" if d is not None else "del"
        tail = f'<span class="same"> … {more:,} more tokens</span>' if more > 0 else ""
        rows.append(
            f'<div class="row"><div class="h"><b>{html_text(call.node_id)}</b> · {status}{html_text(note)}</div>'
            f'<pre><span class="same">{html_text(same)}</span><span class="{cls}">{html_text(changed)}</span>{tail}</pre></div>'
        )
    return STYLE + '<div class="rg-fork">' + "".join(rows) + "</div>"
