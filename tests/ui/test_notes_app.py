"""Notes and sharing in the app (Streamlit AppTest, in-process): a note on a call is written to
the sidecar beside command-line traces, shown escaped, and the rollout downloads as one HTML file."""

from __future__ import annotations

import json
from pathlib import Path

from rollout_graph.reports import notes as notes_io
from rollout_graph.ui.panels import share
from tests.support.apptest import app, html_of, no_errors

VLLM = Path(__file__).resolve().parents[2] / "sample_traces" / "vllm"
HOSTILE = "<img src=x onerror=window.__pwned=1> [x](https://attacker)"


def traces(tmp_path: Path) -> Path:
    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "agent-rollouts.jsonl").write_bytes((VLLM / "agent-rollouts.jsonl").read_bytes())
    return folder


def notes_form(at, text: str, action: str, target: int = 0, author: str = "ana"):
    area = next(t for t in at.text_area if t.label == "Note")
    area.set_value(text)
    next(r for r in at.radio if r.label == "Action on export --notes").set_value(action)
    next(t for t in at.text_input if t.label == "Author").set_value(author)
    next(s for s in at.selectbox if s.label == "Note on").set_value(target)
    return next(b for b in at.button if b.label == "Add note").click().run()


def test_a_note_on_a_call_goes_to_the_sidecar_beside_the_traces(monkeypatch, tmp_path):
    folder = traces(tmp_path)
    at = app(monkeypatch, folder, session="fix-config-bug", node="c05")
    no_errors(at)
    assert any(e.label.startswith("Notes (0) on c05") for e in at.expander)
    at = notes_form(at, HOSTILE, "drop")
    no_errors(at)
    sidecar = folder / notes_io.SIDECAR
    (note,) = notes_io.read_notes(sidecar)["notes"]
    assert note["node"] == "c05" and note["action"] == "drop" and note["text"] == HOSTILE and note["author"] == "ana"
    assert "agent-rollouts.jsonl" in {p.name for p in folder.iterdir()}
    assert json.loads((folder / "agent-rollouts.jsonl").read_text().splitlines()[0])  # the trace is untouched
    assert (folder / "agent-rollouts.jsonl").read_bytes() == (VLLM / "agent-rollouts.jsonl").read_bytes()
    page = html_of(at)
    assert "&lt;img src=x onerror=window.__pwned=1&gt;" in page and "<img src=x" not in page
    assert any(e.label.startswith("Notes (1) on c05") for e in at.expander)
    # a note on a training row through the call, then the page opened again reads both back
    at = notes_form(at, "row looks fine", "keep", target=1)
    assert len(notes_io.read_notes(sidecar)["notes"]) == 2
    again = app(monkeypatch, folder, session="fix-config-bug", node="c05")
    assert any(e.label.startswith("Notes (2) on c05") for e in again.expander)


def test_bundled_samples_keep_notes_in_the_session_and_download_them(monkeypatch):
    at = app(monkeypatch, session="fix-config-bug", node="c07")
    no_errors(at)
    at = notes_form(at, "mask this", "mask")
    no_errors(at)
    assert not (VLLM / notes_io.SIDECAR).exists()  # never written into the package's samples
    assert "Kept in this browser session only" in "\n".join(c.value for c in at.caption)
    labels = [b.proto.label for b in at.get("download_button")]
    assert "⬇ Notes file (JSON)" in labels and share.LABEL in labels


def test_the_share_button_builds_the_bundle_of_the_open_view(monkeypatch, tmp_path):
    folder = traces(tmp_path)
    at = app(monkeypatch, folder, session="fix-config-bug", node="c05")
    no_errors(at)
    assert share.LABEL in [b.proto.label for b in at.get("download_button")]
    # what the button sends: the library's bundle, opening at the selected call
    from rollout_graph.analysis.decode import decoder_for
    from rollout_graph.ui.state.live import COMMAND_LINE_LABEL
    from rollout_graph.ui.state.sources import load_files
    from tests.reports.test_bundle import page_data

    workspace = load_files([folder / "agent-rollouts.jsonl"], COMMAND_LINE_LABEL)
    rollout = workspace.rollouts["fix-config-bug"]
    decoder = decoder_for(rollout.calls, workspace.trace_paths)
    data = page_data(share.page(rollout, decoder, workspace, rollout.index_of("c05")))
    assert data["open"] == {"session": "fix-config-bug", "node": rollout.index_of("c05")}
    assert len(data["sessions"][0]["details"]) == len(rollout.calls)


def test_an_opened_notes_file_merges_once_and_is_saved(tmp_path):
    from rollout_graph.ui.state.notes import Store

    sidecar = tmp_path / notes_io.SIDECAR
    store = Store(sidecar)
    first = notes_io.make_note("fix-config-bug", "a", "drop", node="c05")
    second = notes_io.make_note("fix-config-bug", "b", "mask", leaf="c17")
    assert store.merge([first, second]) == 2 and store.merge([first, second]) == 0
    assert notes_io.read_notes(sidecar)["notes"] == [first, second]
    store.remove(store.notes[0])
    assert notes_io.read_notes(sidecar)["notes"] == [second]
    # a sidecar that cannot be written says so, and keeps the notes in the session
    blocked = Store(tmp_path / "missing-file-as-folder" / notes_io.SIDECAR)
    (tmp_path / "missing-file-as-folder").write_text("")
    blocked.add(first)
    assert blocked.notes == [first] and blocked.problem.startswith("cannot write the notes file")
    assert [n["text"] for n in Store(None, [first, second]).for_session("fix-config-bug")] == ["a", "b"]
