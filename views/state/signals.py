"""Training signals in the app: where they come from (bundled, ``view --signals``, an upload), the
token-colour switch, the workspace with the signals joined (cached per content), and the
corrections the mismatch lens starts with (``view --correction``, read from the environment here).

Entry points: ``render_options`` and ``apply(workspace) -> Joined`` (the sidebar's choice, joined),
``starting_labels`` / ``chosen_labels``, the row picker and the worst-token jump
(``render_row_picker``, ``jump_to_token``, ``apply_jump``, ``worst_token_button``, ``scroll_to_mark``).

Where it sits: state under the signals, corrections and node panels; the join is
graph/signals/join.py, the lens's pure parts views/builders/mismatch/."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from rollout_graph.core.rollout import Rollout
from rollout_graph.resources import SAMPLES, SIGNALS_ENV
from rollout_graph.signals.corrections import CORRECTIONS_ENV
from rollout_graph.signals.join import DEFAULT_THRESHOLD, JoinReport, attach_all
from rollout_graph.signals.reading import SignalsError, SignalsFile, read_signals_bytes
from rollout_graph.ui import state
from rollout_graph.ui.builders import mismatch, overlays
from rollout_graph.ui.state.lru import LRU
from rollout_graph.ui.state.sources import BUNDLED, COMMAND_LINE, Workspace
from rollout_graph.ui.state.widgets import jump_to, run_script

BUNDLED_SIGNALS = SAMPLES / "signals" / "samples.signals.jsonl"
ENV = SIGNALS_ENV  # set by `rollout-graph view --signals FILE` (os.pathsep-separated)
UPLOAD_TYPES = ["jsonl", "parquet", "gz", "zst"]


@dataclass
class Joined:
    """The workspace with signals joined, and what happened to the file's rows."""

    workspace: Workspace
    report: JoinReport | None = None
    error: str | None = None


_CACHE: LRU[str, Joined] = LRU(6)  # joins that worked (an error is computed again)


def starting_labels() -> list[str]:
    """The corrections the mismatch lens starts with: ``view --correction``'s choice (its
    environment variable), else four common ones."""
    return mismatch.initial_labels(os.environ.get(CORRECTIONS_ENV, ""))


def chosen_labels() -> list[str]:
    """The corrections chosen in the Corrections panel, or those it starts with before it is drawn."""
    return mismatch.chosen_labels(st.session_state.get(mismatch.CHOSEN), starting_labels())


def command_line_files() -> list[Path]:
    """Signals files the operator gave to ``rollout-graph view --signals``."""
    return [Path(p) for p in os.environ.get(ENV, "").split(os.pathsep) if p]


def _chosen(kind: str) -> list[tuple[str, bytes]]:
    """(name, bytes) of every signals file chosen in the sidebar for this kind of source."""
    files: list[tuple[str, bytes]] = []
    st.sidebar.divider()
    st.sidebar.markdown("**Training signals**")
    if kind == BUNDLED and BUNDLED_SIGNALS.exists():
        if st.sidebar.toggle(
            "Bundled signals (llama-cpp recompute)",
            value=True,
            key=state.SIGNALS_BUNDLED,
            help="Trainer logprobs from re-scoring each bundled row with the same model, task-outcome rewards "
            "and advantages (docs/signals.md).",
        ):
            files.append((BUNDLED_SIGNALS.name, BUNDLED_SIGNALS.read_bytes()))
    if kind == COMMAND_LINE:
        files += [(p.name, p.read_bytes()) for p in command_line_files() if p.is_file()]
    upload = None
    if st.sidebar.toggle("Add a signals file", key=state.SIGNALS_ADD, help="Upload a signals file to join."):
        upload = st.sidebar.file_uploader(
            "Signals file (JSONL or Parquet)",
            type=UPLOAD_TYPES,
            key=state.SIGNALS_UPLOAD,
            help="Rows keyed by session_id and leaf_id with trainer_logprobs, advantages, reward (docs/signals.md).",
        )
    if upload is not None:
        files.append((upload.name, upload.getvalue()))
    return files


def render_options() -> str:
    """The token-colour switch; returns the chosen overlay mode."""
    return st.sidebar.radio(
        "Colour sampled tokens by",
        list(overlays.MODES),
        format_func=overlays.MODES.get,
        key=state.TOKEN_OVERLAY,
        help="Logprob: the inference engine's. Trainer − inference, importance ratio and advantage need a signals "
        "file; the entropy lower bound needs recorded top-k alternatives.",
    )


def _join(workspace: Workspace, files: list[tuple[str, bytes]], threshold: float) -> Joined:
    digest = hashlib.sha256(workspace.key.encode())
    for name, data in files:
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    digest.update(repr(threshold).encode())
    key = digest.hexdigest()
    found = _CACHE.get(key)
    if found is not None:
        return found
    signals = SignalsFile()
    try:
        for name, data in files:
            signals.extend(read_signals_bytes(name, data))
    except SignalsError as exc:
        return Joined(workspace, error=str(exc))
    ids = list(workspace.rollouts)
    joined, report = attach_all([workspace.rollouts[s] for s in ids], signals, threshold)
    result = Joined(
        Workspace(
            key,
            workspace.label,
            workspace.loaded,
            workspace.trace_paths,
            dict(zip(ids, joined, strict=True)),
            workspace.sources,  # Raw JSON reads the records back from the same files or uploads
        ),
        report,
    )
    return _CACHE.put(key, result)


def apply(workspace: Workspace) -> Joined:
    """Render the signals part of the sidebar and join what was chosen to the workspace."""
    files = _chosen(st.session_state.get(state.SOURCE, BUNDLED))
    threshold = DEFAULT_THRESHOLD
    if files:
        threshold = st.sidebar.number_input(
            "Mismatch threshold (nats)",
            min_value=0.0,
            value=DEFAULT_THRESHOLD,
            step=0.1,
            key=state.SIGNALS_THRESHOLD,
            help="WARN logprob_mismatch on a call whose trainer and inference logprobs differ by more than this.",
        )
    render_options()
    if not files:
        return Joined(workspace)
    joined = _join(workspace, files, float(threshold))
    if joined.error:
        st.sidebar.error(joined.error)
    return joined


def report_caption(joined: Joined) -> str | None:
    """One line on the signals rows: how many read, skipped and for rollouts not loaded."""
    if joined.report is None:
        return None
    r = joined.report.as_dict()
    text = f"Signals: {r['rows']:,} rows from {len(r['files'])} file(s)"
    if r["skipped"]:
        first = r["skipped"][0]
        text += (
            f" · {len(r['skipped'])} unreadable (first: {Path(first['file']).name}:{first['line']}: {first['reason']})"
        )
    if r["n_unmatched_rows"]:
        text += f" · {r['n_unmatched_rows']} for rollouts not loaded"
    return text


# ---- the row each call's overlay and scatter show, and the jump to a flagged token

SCROLL_TO_MARK = "rg-scroll-to-mark"  # set by a jump: scroll the ringed token into view once drawn
# our own script (never trace text): bring the ringed token into view in its scrolling pane, not the page
SCROLL_JS = """<script>
// window.__rgMarkLooks ({at: the token's position, left: looks to come}) says when the last look is done
const looks = window.parent.__rgMarkLooks = {at: null, left: 3};
function bringMark() {
  const mark = window.parent.document.querySelector('.rg-tokens .rg-m');
  if (!mark) return;
  looks.at = mark.dataset.i;
  let pane = mark.parentElement;
  while (pane && !(pane.scrollHeight > pane.clientHeight + 4 && /(auto|scroll)/.test(getComputedStyle(pane).overflowY)))
    pane = pane.parentElement;
  if (!pane) return;
  const box = mark.getBoundingClientRect(), pane_box = pane.getBoundingClientRect();
  // what of the pane the window shows; the least scroll that shows the token there, so what is
  // above it (header, row picker) stays in view when it can
  const top = Math.max(pane_box.top, 0), bottom = Math.min(pane_box.bottom, window.parent.innerHeight);
  if (box.bottom > bottom - 24) pane.scrollTop += box.bottom - bottom + 140;
  else if (box.top < top) pane.scrollTop -= top - box.top + 48;
  // the pane at its end and the token still under the window's edge: the page moves the rest
  const below = mark.getBoundingClientRect().bottom - (window.parent.innerHeight - 100);
  if (below > 0) {
    let page = pane.parentElement;
    while (page && !(page.scrollHeight > page.clientHeight + 4 && /(auto|scroll)/.test(getComputedStyle(page).overflowY)))
      page = page.parentElement;
    if (page) page.scrollTop += below; else window.parent.scrollBy(0, below);
  }
}
[300, 1000, 2000].forEach(t => setTimeout(() => { bringMark(); looks.left -= 1; }, t));
</script>"""
ROWS = "rg-signals-rows"  # {session_id: {node_id: leaf_id}}: the joined row picked per call
JUMP = "rg-signals-jump"  # (session_id, node_id, offset): a sampled token to mark when the call's detail draws


def wanted_rows(rollout: Rollout) -> dict[int, str]:
    """The rows picked for this rollout's calls (arrival index -> leaf id of the row)."""
    picked = st.session_state.get(ROWS, {}).get(rollout.session_id, {})
    ids = {c.node_id: k for k, c in enumerate(rollout.calls)}
    return {ids[n]: leaf for n, leaf in picked.items() if n in ids}


def shown_rows(rollout: Rollout) -> dict[int, int]:
    """The row shown per call (arrival index -> sequence index): the one picked, else the default."""
    return mismatch.shown_rows(rollout, wanted_rows(rollout))


def pick_row(rollout: Rollout, node: int, leaf_id: str) -> None:
    """Show the joined row ending at ``leaf_id`` for the call (its overlay and its scatter points)."""
    rows = st.session_state.setdefault(ROWS, {})
    rows.setdefault(rollout.session_id, {})[rollout.calls[node].node_id] = leaf_id


def jump_to_token(rollout: Rollout, node: int, sequence: int | None = None, offset: int | None = None) -> None:
    """Select the call, show the row ``sequence`` for it and mark its sampled token ``offset`` in the
    token view; without them, the call's worst token in the row holding it (the default row)."""
    signals = rollout.signals
    if signals is None or node not in signals.calls:
        return
    if sequence is None or offset is None:
        default = mismatch.default_row(mismatch.covering_rows(rollout, node))
        if default is None or default.worst_offset is None:
            return
        sequence, offset = default.sequence, default.worst_offset
    pick_row(rollout, node, rollout.calls[rollout.sequences[sequence].leaf].node_id)
    st.session_state[JUMP] = (rollout.session_id, rollout.calls[node].node_id, int(offset))
    state.select_node(rollout, node)


def apply_jump(rollout: Rollout, node: int, key: str) -> None:
    """Mark the token a jump asked for, in the call's token views (``tok-`` and ``org-`` + ``key``),
    before they render; a jump for another call waits."""
    pending = st.session_state.get(JUMP)
    if not pending or pending[:2] != (rollout.session_id, rollout.calls[node].node_id):
        return
    st.session_state[JUMP] = None
    st.session_state[SCROLL_TO_MARK] = True  # the token view drawn below scrolls its ringed token into view
    offset = int(pending[2])
    jump_to(f"tok-{key}", mismatch.view_position(rollout, node, offset))
    call = rollout.calls[node]
    jump_to(f"org-{key}", (call.n_prompt if call.prompt_ids is not None else 0) + offset)


JUMP_LABEL = "jump to the worst token"


def worst_token_button(rollout: Rollout, node: int, where: str, rows: list | None = None) -> None:
    """The ``logprob_mismatch`` finding's "jump to the worst token" button (wherever the finding is
    shown): it selects the call, shows the row holding the token, and rings the token."""
    rows = mismatch.covering_rows(rollout, node) if rows is None else rows
    default = mismatch.default_row(rows)
    if default is None or default.worst_offset is None or default.worst_d is None:
        return
    st.button(
        f"⚠ logprob_mismatch: {JUMP_LABEL} ({rollout.calls[node].node_id}, sampled token {default.worst_offset}, "
        f"Δ {default.worst_d:+.3g} nats, {default.name})",
        key=f"worst-{where}-{rollout.session_id}-{rollout.calls[node].node_id}",
        on_click=jump_to_token,
        args=(rollout, node),
        help="Selects the call, shows the row holding the token and rings the sampled token whose trainer and "
        "inference logprobs differ most, in the Tokens tab.",
    )


ROW_PICKED = "rg-signals-row-picked"  # set by the row picker: the page (not only the fragment) redraws


def _picked(rollout: Rollout, node: int, leaf_id: str) -> None:
    pick_row(rollout, node, leaf_id)
    st.session_state[ROW_PICKED] = True


def render_row_picker(rollout: Rollout, node: int, key: str) -> None:
    """The call's signals-row picker (only when two or more joined rows cover it), and its worst-token
    jump when the call has a ``logprob_mismatch``. The picker says which row is shown and why the
    default is the default; the Tokens tab's overlay and the signals scatter follow it."""
    rows = mismatch.covering_rows(rollout, node)
    flagged = any(f.code == mismatch.MISMATCH for f in rollout.findings_for(node))
    default = mismatch.default_row(rows)
    if flagged:
        worst_token_button(rollout, node, "detail", rows)
    if len([r for r in rows if r.n_compared]) < 2:
        return
    widget = f"rg-row-pick-{key}"
    current = mismatch.resolve_row(rows, wanted_rows(rollout).get(node))
    leaves = [r.leaf_id for r in rows]
    if current is not None and st.session_state.get(widget) != current.leaf_id:
        st.session_state[widget] = current.leaf_id  # before the widget is drawn: a jump or a scatter click moved it
    by_leaf = {r.leaf_id: r for r in rows}
    st.selectbox(
        f"Signals row shown ({len(rows)} joined rows cover this call)",
        leaves,
        format_func=lambda leaf: mismatch.row_label(by_leaf[leaf], default),
        key=widget,
        on_change=lambda: _picked(rollout, node, st.session_state[widget]),
        help="The Tokens tab's trainer colours and the signals scatter show this row's trainer logprobs for the call.",
    )
    if st.session_state.pop(ROW_PICKED, False):
        # the picker sits in the selection fragment, which reruns alone; the signals scatter below it
        # (outside the fragment) plots the row picked too, so the whole page draws again
        st.rerun(scope="app")
    st.caption(mismatch.default_reason(rows))


def scroll_to_mark() -> None:
    """After a jump, scroll the ringed token into view in the call's detail pane (once)."""
    if st.session_state.pop(SCROLL_TO_MARK, False):
        run_script(SCROLL_JS, "rg-script-mark")
