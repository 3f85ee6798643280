"""Notes that travel (graph/reports/notes.py): the sidecar's schema, its bounds, and how
``export --notes`` turns an audit decision into the rows a trainer reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rollout_graph.cli import main
from rollout_graph.ingest.load.files import load_paths
from rollout_graph.pipeline import analyse
from rollout_graph.reports import export
from rollout_graph.reports import notes as notes_io

VLLM = Path(__file__).resolve().parents[2] / "sample_traces" / "vllm"
SESSION = "fix-config-bug"


@pytest.fixture(scope="module")
def rollout():
    return analyse(load_paths([VLLM]).sessions[SESSION])


def rows_of(path: Path) -> dict[str, dict]:
    return {r["leaf_id"]: r for r in map(json.loads, path.read_text().splitlines())}


def export_rows(tmp_path: Path, *args: str) -> dict[str, dict]:
    out = tmp_path / "rows.jsonl"
    assert main(["export", str(VLLM), "--session", SESSION, "--out", str(out), *args]) == 0
    return rows_of(out)


def write(tmp_path: Path, *notes: dict) -> Path:
    path = tmp_path / "notes.json"
    notes_io.write_notes(path, notes)
    return path


def test_notes_round_trip_through_the_file(tmp_path):
    a = notes_io.make_note(SESSION, "  wrong tool output ", "drop", node="c05", author="ana")
    b = notes_io.make_note(SESSION, "fine", leaf="c17")
    path = write(tmp_path, a, b)
    read = notes_io.read_notes(path)
    assert read["version"] == 1
    assert read["notes"] == [a, b]
    assert a["text"] == "wrong tool output" and a["created"].endswith("Z") and b["action"] == "keep"
    # one note a line, so an error can name it
    assert len(path.read_text().splitlines()) == 4


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("{not json", "notes.json:1: not JSON"),
        ('{"version": 2, "notes": []}', "notes.json:1: notes version 2"),
        ('{"notes": {}}', "notes.json:1: not a notes file"),
        ('{"version": 1, "notes": [\n{"session": "s", "node": "c1"},\n{"session": "s", "node": "c1", "leaf": "c2"}\n]}',
         "notes.json:3: a note names exactly one of 'node'"),
        ('{"version": 1, "notes": [\n  {"session": "s", "node": "c1", "action": "delete"}\n]}',
         "notes.json:2: unknown action 'delete'"),
        ('{"version": 1, "notes": [{"session": "s", "node": "c1", "eval": "x"}]}', "notes.json:1: unknown key 'eval'"),
        ('{"version": 1, "notes": [{"session": 3, "node": "c1"}]}', "'session' must be a string"),
        ('{"version": 1, "notes": [{"session": "s", "node": "c1", "text": "' + "x" * 2001 + '"}]}',
         "the text has 2,001 characters"),
        ('{"version": 1, "notes": [7]}', "a note is an object, not int"),
    ],
)  # fmt: skip
def test_bad_notes_name_the_file_line_and_reason(tmp_path, body, reason, capsys):
    path = tmp_path / "notes.json"
    path.write_text(body)
    with pytest.raises(notes_io.NotesError) as raised:
        notes_io.read_notes(path)
    assert reason in str(raised.value).replace(str(tmp_path) + "/", "")
    # the command line says the same in one line, exit 2, nothing written
    out = tmp_path / "rows.jsonl"
    assert main(["export", str(VLLM), "--notes", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert reason in err.replace(str(tmp_path) + "/", "") and "Traceback" not in err
    assert not out.exists()


def test_a_notes_file_is_bounded(tmp_path):
    path = tmp_path / "notes.json"
    path.write_bytes(b'{"version": 1, "notes": [' + b" " * notes_io.MAX_FILE_BYTES + b"]}")
    with pytest.raises(notes_io.NotesError, match="more than a notes file may hold"):
        notes_io.read_notes(path)
    with pytest.raises(notes_io.NotesError, match="not UTF-8"):
        notes_io.parse_notes(b'{"version": 1, "notes": ["\xff"]}', "n.json")


def test_drop_notes_leave_out_the_rows_they_touch(tmp_path, rollout):
    everything = export_rows(tmp_path)
    assert len(everything) == len(rollout.sequences)
    # a note on a call drops every row through it; a note on a row drops that row
    through_c11 = {rollout.calls[s.leaf].node_id for s in rollout.sequences if rollout.index_of("c11") in s.nodes}
    path = write(
        tmp_path,
        notes_io.make_note(SESSION, "bad edit", "drop", node="c11"),
        notes_io.make_note(SESSION, "empty answer", "drop", leaf="c24"),
        notes_io.make_note("another-session", "not this rollout", "drop", node="c05"),
    )
    kept = export_rows(tmp_path, "--notes", str(path))
    assert set(kept) == set(everything) - through_c11 - {"c24"}
    assert through_c11 == {"c17"}
    untouched = next(iter(kept.values()))
    assert untouched == everything[untouched["leaf_id"]]  # rows no note touches are byte for byte the same


def test_mask_notes_zero_the_call_sampled_tokens(tmp_path, rollout):
    everything = export_rows(tmp_path)
    c11 = rollout.index_of("c11")
    call = rollout.calls[c11]
    assert rollout.trainable[c11] and call.n_sampled
    path = write(tmp_path, notes_io.make_note(SESSION, "hallucinated path", "mask", node="c11", author="bo"))
    masked = export_rows(tmp_path, "--notes", str(path))
    assert set(masked) == set(everything)
    row, before = masked["c17"], everything["c17"]
    seq = next(s for s in rollout.sequences if rollout.calls[s.leaf].node_id == "c17")
    start = int(rollout.tokens(seq).turn_starts[seq.nodes.index(c11)]) + call.n_prompt - rollout.context_start(c11)
    stop = start + call.n_sampled
    assert before["loss_mask"][start:stop] == [1] * call.n_sampled
    assert (
        row["loss_mask"][start:stop] == [0] * call.n_sampled and row["logprobs"][start:stop] == [0.0] * call.n_sampled
    )
    assert (
        row["loss_mask"][:start] == before["loss_mask"][:start]
        and row["loss_mask"][stop:] == before["loss_mask"][stop:]
    )
    assert row["input_ids"] == before["input_ids"]  # masked, never cut
    assert row["n_trainable"] == before["n_trainable"] - call.n_sampled == sum(row["loss_mask"])
    assert row["notes"] == [{"target": "c11", "action": "mask", "text": "hallucinated path", "author": "bo"}]
    # a mask on a whole row trains none of it
    path = write(tmp_path, notes_io.make_note(SESSION, "", "mask", leaf="c25"))
    assert sum(export_rows(tmp_path, "--notes", str(path))["c25"]["loss_mask"]) == 0


def test_drop_noted_spares_only_keep_notes(tmp_path, capsys):
    path = write(
        tmp_path,
        notes_io.make_note(SESSION, "looked fine", "keep", leaf="c24"),
        notes_io.make_note(SESSION, "suspicious", "mask", leaf="c25"),
    )
    everything = export_rows(tmp_path)
    noted = export_rows(tmp_path, "--notes", str(path))
    assert set(noted) == set(everything) and noted["c24"]["notes"][0]["action"] == "keep"
    assert "0 row(s) left out, 1 masked" in capsys.readouterr().err
    dropped = export_rows(tmp_path, "--notes", str(path), "--drop-noted")
    assert set(dropped) == set(everything) - {"c25"}
    assert f"notes from {path}: 1 row(s) left out, 0 masked" in capsys.readouterr().err


def test_notes_for_unknown_calls_warn_and_do_nothing(tmp_path, capsys):
    path = write(tmp_path, notes_io.make_note(SESSION, "typo", "drop", node="c99"))
    everything = export_rows(tmp_path)
    assert export_rows(tmp_path, "--notes", str(path)) == everything
    assert "a note names call 'c99', not in session 'fix-config-bug': ignored" in capsys.readouterr().err


def test_notes_options_say_what_they_need(tmp_path, capsys):
    out = str(tmp_path / "x.jsonl")
    assert main(["export", str(VLLM), "--drop-noted", "--out", out]) == 2
    assert "--drop-noted needs --notes FILE" in capsys.readouterr().err
    path = write(tmp_path)
    assert main(["export", str(VLLM), "--notes", str(path), "--format", "trace-entries", "--out", out]) == 2
    assert "--notes applies to --format rows" in capsys.readouterr().err


def test_parquet_rows_with_notes_keep_their_schema(tmp_path, rollout):
    import pyarrow.parquet as pq

    path = write(tmp_path, notes_io.make_note(SESSION, "x", "mask", node="c11"))
    out = tmp_path / "rows.parquet"
    assert main(["export", str(VLLM), "--session", SESSION, "--notes", str(path), "--out", str(out)]) == 0
    table = pq.read_table(out)
    assert table.schema.names == export._schema("rows").names
    assert table.num_rows == len(rollout.sequences)


def test_sidecar_lives_beside_the_traces(tmp_path):
    assert notes_io.sidecar_for([VLLM]) == VLLM / notes_io.SIDECAR
    assert notes_io.sidecar_for([VLLM / "agent-rollouts.jsonl"]) == VLLM / notes_io.SIDECAR
    assert notes_io.sidecar_for([]) is None


def test_the_sidecar_is_never_read_as_a_trace(tmp_path):
    from rollout_graph.ingest.load.trace_files import trace_files

    (tmp_path / "a.jsonl").write_bytes((VLLM / "agent-rollouts.jsonl").read_bytes())
    write(tmp_path, notes_io.make_note(SESSION, "x", node="c05"))
    (tmp_path / "notes.json").rename(tmp_path / notes_io.SIDECAR)
    assert trace_files(tmp_path) == [tmp_path / "a.jsonl"]
