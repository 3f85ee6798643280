"""Notes on the open call and its training rows: read, add, remove, download, open a file.

Entry points: ``render(rollout, node, workspace)`` and ``note_html(note)`` (note text is untrusted:
escaped).

Where it sits: under the call's detail in the explorer; the notes are rollout_graph.reports.notes,
kept by views/state/notes.py."""

from __future__ import annotations

import streamlit as st

from rollout_graph.core.rollout import Rollout
from rollout_graph.escape import html_text, md
from rollout_graph.reports import notes as notes_io
from rollout_graph.ui.state import notes as notes_state
from rollout_graph.ui.state.sources import Workspace

ACTION_HELP = {
    "keep": "keep: nothing changes; the note records that someone looked",
    "mask": "mask: export --notes keeps the rows but trains none of the noted tokens",
    "drop": "drop: export --notes leaves out every row the note touches",
}
ACTION_COLORS = {"keep": "#15803d", "mask": "#b45309", "drop": "#b91c1c"}


def note_html(note: dict) -> str:
    """One note as an escaped HTML line."""
    color = ACTION_COLORS.get(note["action"], "#475569")
    target = f"call {note['node']}" if note.get("node") else f"training row {note['leaf']}"
    who = " · ".join(x for x in (note.get("author"), note.get("created")) if x)
    return (
        '<div class="rg-note" style="background:#fefce8;border:1px solid #fde68a;border-radius:6px;padding:4px 8px;'
        'margin:3px 0;font:13px system-ui,sans-serif">'
        f'<span style="background:{color};color:#fff;border-radius:4px;padding:0 6px;margin-right:6px;font:600 11px system-ui;'
        f'text-transform:uppercase">{html_text(note["action"])}</span>'
        f'<span style="white-space:pre-wrap;color:#0f172a">{html_text(note["text"]) or "(no text)"}</span>'
        f'<span style="color:#64748b"> · {html_text(target)}{" · " + html_text(who) if who else ""}</span></div>'
    )


def render(rollout: Rollout, node: int, workspace: Workspace | None) -> None:
    """The notes of call ``node`` and the rows through it, and a form to add one."""
    if workspace is None:
        return
    store = notes_state.store(workspace)
    call_id = rollout.calls[node].node_id
    leaves = [rollout.calls[s.leaf].node_id for s in rollout.sequences if node in s.nodes]
    mine = [
        n for n in store.for_session(rollout.session_id) if n.get("node") == call_id or n.get("leaf") in set(leaves)
    ]
    key = f"notes-{workspace.key}-{rollout.session_id}-{call_id}"
    with st.expander(f"Notes ({len(mine)}) on {md(call_id, 60)} and its training rows", expanded=bool(mine)):
        if store.problem:
            st.warning(md(store.problem))
        for k, note in enumerate(mine):
            st.html(note_html(note))
            if st.button("Remove this note", key=f"{key}-rm-{k}", type="tertiary"):
                store.remove(note)
                st.rerun()
        with st.form(key=f"{key}-form", clear_on_submit=True, border=False):
            targets = [f"call {call_id}"] + [f"training row {leaf}" for leaf in leaves]
            target = st.selectbox("Note on", range(len(targets)), format_func=lambda t: targets[t])
            action = st.radio(
                "Action on export --notes",
                notes_io.ACTIONS[::-1],
                horizontal=True,
                help="; ".join(ACTION_HELP[a] for a in notes_io.ACTIONS[::-1]),
            )
            text = st.text_area("Note", max_chars=notes_io.MAX_TEXT, height=80, placeholder="what you found")
            author = st.text_input("Author", max_chars=notes_io.MAX_FIELD)
            if st.form_submit_button("Add note"):
                leaf = None if target == 0 else leaves[target - 1]
                store.add(
                    notes_io.make_note(
                        rollout.session_id,
                        text,
                        str(action),
                        node=call_id if leaf is None else None,
                        leaf=leaf,
                        author=author,
                    )
                )
                st.rerun()
        where = (
            f"Saved beside the traces in {md(str(store.sidecar))}."
            if store.sidecar is not None
            else "Kept in this browser session only: download them to keep them."
        )
        st.caption(where + " Never written into a trace. `rollout-graph export --notes FILE` applies them.")
        st.download_button(
            "⬇ Notes file (JSON)",
            data=notes_io.notes_json(store.notes),
            file_name=notes_io.SIDECAR,
            mime="application/json",
            on_click="ignore",
            key=f"{key}-download",
            disabled=not store.notes,
        )
        opened = st.file_uploader("Open a notes file", type=["json"], key=f"{key}-open")
        if opened is not None:
            try:
                added = store.merge(notes_io.parse_notes(opened.getvalue(), opened.name)["notes"])
            except notes_io.NotesError as exc:
                st.error(md(str(exc)))
            else:
                if added:
                    st.rerun()
