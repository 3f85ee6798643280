"""Every rough edge issue 42 found in the browser that Streamlit's AppTest (or the pure builders the
page draws) can show, on the source a user meets it with; the ones only a browser can see (widths,
clipping, focus, uploads) are in tests/browser/test_browser_story.py."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import orjson
import pandas as pd

import rollout_graph as rg
from rollout_graph.analysis.decode import TraceTextDecoder
from rollout_graph.analysis.story import SUB, main_row, outline
from rollout_graph.reports.compare import compare
from rollout_graph.reports.notes import make_note, sidecar_for, write_notes
from rollout_graph.ui.builders.dag import RING_BOX, box_goes_below, dag_drawing, dag_figure, line_segments, rings
from rollout_graph.ui.builders.fork import fork_html
from rollout_graph.ui.builders.search import hit_rows
from rollout_graph.ui.builders.timeline import timeline_figure
from rollout_graph.ui.panels.downloads import rows_bytes
from rollout_graph.ui.panels.rollouts import with_dashes
from rollout_graph.ui.panels.run import figures
from tests.support.apptest import app, html_of, no_errors, open_tab
from tests.support.builders import rollout_of_tokens

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"
VLLM = SAMPLES / "vllm" / "agent-rollouts.jsonl"
QWEN = SAMPLES / "harnesses" / "qwen-code.jsonl.gz"
QWEN_MEMORY = SAMPLES / "harnesses" / "qwen-code-token-limit.jsonl.gz"


def rollout(path: Path, session: str | None = None):
    found = rg.load(path)
    return found[session] if session else next(iter(found.values()))


# ---- the call's detail


def test_a_16k_system_prompt_is_folded_in_the_messages_tab(monkeypatch):
    at = open_tab(app(monkeypatch, QWEN, node="8f48e2-00002", session="qwen-code"), "Messages")
    no_errors(at)
    chat = next(h for h in at.get("html") if "rg-chat" in h.proto.body).proto.body
    system = re.search(r'<details class="rg-fold"><summary><span class="rg-role"[^>]*>system</span>'
                       r'<span class="rg-size">([^<]+)</span>', chat)  # fmt: skip
    assert system and system.group(1).startswith("15,054 characters")  # folded, its size shown
    assert chat.count('<details class="rg-fold">') >= 1
    assert '<div class="rg-msg rg-resp"' in chat and 'rg-resp" style="border-left-color:#2563eb"><details' not in chat


def test_the_origin_view_jumps_to_the_text_the_harness_re_inserted(monkeypatch):
    at = app(monkeypatch, session="list-todos", node="c16")
    next(t for t in at.toggle if t.label == "Whole prompt, coloured by origin").set_value(True).run()
    no_errors(at)
    button = next(b for b in at.button if b.label.startswith("Re-inserted text (1)"))
    mark = next(k for k in at.session_state if str(k).startswith("org-") and str(k).endswith("-mark"))
    button.click().run()
    no_errors(at)
    assert at.session_state[mark] == 483  # the first amber token, ringed
    assert 'data-i="483"' in html_of(at)


def test_a_fork_of_seven_children_reads_one_child_per_row():
    spec = [([1, 2], [3])] + [([1, 2, 3, 4], [10 + k, 20 + k]) for k in range(7)]
    r = rollout_of_tokens(spec)
    page = fork_html(r, 0, TraceTextDecoder({t: f"w{t} " for t in range(40)}))
    assert page.count('<div class="row">') == 7 and "grid-template-columns" not in page  # all seven, full width
    numbers = re.findall(r"logprob (-?\d+\.\d+) here vs (-?\d+\.\d+)", page)
    assert numbers and all(len(a.split(".")[1]) == 3 and len(b.split(".")[1]) == 3 for a, b in numbers)


def test_the_sequence_tab_numbers_wrap_instead_of_being_cut(monkeypatch):
    at = open_tab(app(monkeypatch, session="fix-config-bug", node="c09"), "Sequence")
    no_errors(at)
    page = html_of(at)
    assert 'class="rg-rownums"' in page and "flex-wrap:wrap" in page
    assert "<span>prompt_len<b>" in page and "<span>role<b>" in page  # whole labels, never "a…"


# ---- search


def test_hits_that_read_the_same_are_one_row_and_a_click_pins_the_token(monkeypatch):
    at = app(monkeypatch, session="fix-config-bug")
    box = next(t for t in at.text_input if t.label == "Search this rollout")
    at = box.input("setup.cfg").run()
    no_errors(at)
    hits = [b for b in at.button if "· message" in b.label or "token" in b.label]
    assert hits and len(hits) < 6  # the same message every later call repeats: one row
    assert any("later call" in b.label for b in hits)
    token_hit = next((b for b in hits if "token" in b.label), hits[0])
    token_hit.click().run()
    no_errors(at)
    pinned = at.session_state["rg_pinned_strip"] if "rg_pinned_strip" in at.session_state else None
    if "token" in token_hit.label:
        assert pinned and at.session_state[f"{pinned}-mark"] is not None


def test_hit_rows_group_only_what_reads_the_same():
    from rollout_graph.analysis.search import Hit

    def hit(i, snippet, message=1):
        return Hit(session_id="s", index=i, node_id=f"c{i}", where="request", role="user", message_index=message,
                   token_index=None, char_offset=0, count=1, snippet=snippet)  # fmt: skip

    grouped = {1: [hit(1, "a")], 2: [hit(2, "a")], 3: [hit(3, "b")], 4: [hit(4, "a")]}
    rows = hit_rows(grouped, [f"c{i}" for i in range(5)])
    assert [r.calls for r in rows] == [(1, 2), (3,), (4,)]
    assert rows[0].label.startswith("c1 · #1 and 1 later call ·")


# ---- notes, uploads, the CLI


def test_a_drop_note_changes_the_apps_training_rows_and_the_page_says_so(monkeypatch, tmp_path):
    folder = tmp_path / "traces"
    folder.mkdir()
    shutil.copy(VLLM, folder / VLLM.name)
    r = rollout(folder / VLLM.name, "fix-config-bug")
    leaf = r.calls[r.sequences[0].leaf].node_id
    note = make_note("fix-config-bug", "bad row", "drop", leaf=leaf)
    write_notes(sidecar_for([folder]), [note])
    before = rows_bytes(r, False, []).count(b"\n")
    after = rows_bytes(r, False, [note]).count(b"\n")
    assert after == before - 1  # the row the note drops is left out, as export --notes leaves it out
    at = app(monkeypatch, folder, session="fix-config-bug")
    no_errors(at)
    caption = " ".join(c.value for c in at.caption)
    assert "The training rows apply your notes: 1 drop" in caption
    button = next(d for d in at.get("download_button") if "Training rows" in d.proto.label)
    assert "drop/mask note applied" in button.proto.help


def test_inspect_exits_2_when_nothing_of_a_file_loads(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n{}\n")
    out = subprocess.run([sys.executable, "-m", "rollout_graph", "inspect", str(bad)], capture_output=True, text=True)
    assert out.returncode == 2 and "0 loaded" in out.stdout  # the report still says why
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert subprocess.run([sys.executable, "-m", "rollout_graph", "inspect", str(empty)]).returncode == 0


# ---- Compare and the bundle lay out as the explorer does; the main row is the agent's


def test_compare_aligns_the_agents_row_never_a_subagents():
    r = rollout(QWEN_MEMORY)
    row = main_row(r)
    kinds = {c.root: c.kind for c in outline(r).conversations}
    assert kinds[r.topology.root_of[row.leaf]] != SUB and r.calls[row.leaf].node_id == "3eaa3b-00004"
    result = compare(r, rollout(QWEN))
    assert result["a"]["main_leaf_id"] == "3eaa3b-00004"


def test_compare_draws_the_dag_the_explorer_draws(monkeypatch):
    at = app(monkeypatch)
    at.switch_page("views/screens/compare.py").run()
    no_errors(at)
    samples = [r for path in (VLLM, SAMPLES / "openenv" / "fix-config-bug.json") for r in rg.load(path).values()]

    def calls_xy(spec: dict) -> str:
        return json.dumps([spec["data"][1]["x"], spec["data"][1]["y"]], sort_keys=True)

    as_explorer = {calls_xy(json.loads(dag_figure(r, near_misses=True).to_json())) for r in samples}
    drawn = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    dags = [d for d in drawn if len(d.get("data", [])) > 1 and d["data"][1].get("name") == "calls"]
    assert len(dags) == 2 and all(calls_xy(d) in as_explorer for d in dags)  # laid out as the explorer lays them out


def test_the_bundle_lays_out_the_rollout_as_the_app_does():
    from rollout_graph.analysis.layout import dag_view
    from rollout_graph.reports.bundle import bundle_data

    r = rollout(VLLM, "fix-config-bug")
    data = bundle_data([r], [TraceTextDecoder.from_calls(r.calls)])
    placed = data["sessions"][0]["layout"]["collapsed"]
    view = dag_view(r, near_misses=True, collapse=True)
    assert placed["visible"] == view.visible
    assert placed["y"] == [view.y[v] for v in view.visible]
    assert placed["x"] == [round(view.x[v], 3) for v in view.visible]
    story = data["sessions"][0]["story"]
    assert story["conversations"][0]["title"] == "The agent · conversation 1 of 2" and story["chapters"]


# ---- clipped or hidden text, small things


def test_the_boxed_id_of_a_top_lane_call_goes_below_it():
    r = rollout(VLLM, "fix-config-bug")
    fig, targets = dag_drawing(r, near_misses=True)
    top = max(targets.nodes, key=lambda i: targets.nodes[i][1])  # the top lane (y is up)
    assert box_goes_below(fig, targets.nodes[top][1])
    box = next(s for s in rings(fig, targets, r, top)["shapes"] if s["name"] == RING_BOX)
    assert box["y0"] < 0 and box["y1"] < 0  # under its point: inside the chart, not cut at its top edge
    main = r.index_of("c05")
    box = next(s for s in rings(fig, targets, r, main)["shapes"] if s["name"] == RING_BOX)
    assert box["y0"] > 0  # a call with room above keeps its box above


def test_a_near_miss_link_across_lanes_bends_between_the_columns():
    r = rollout(SAMPLES / "harnesses" / "claude-code-continue.jsonl.gz")
    fig = dag_figure(r, near_misses=True)
    path = next(s.path for s in fig.layout.shapes if s.name == "near misses")
    links = line_segments(fig, "near misses")
    assert links and any(a[1] != b[1] for a, b in links)
    assert "C" in path  # a link to another lane is a curve, not a line through the calls stacked there


def test_the_timeline_legend_sits_above_its_axis():
    from rollout_graph.analysis.timing import timeline

    r = rollout(VLLM, "fix-config-bug")
    fig = timeline_figure(r, timeline(r))
    assert fig.layout.legend.y >= 1 and fig.layout.legend.yanchor == "bottom"


def test_the_rollouts_table_shows_a_dash_for_a_missing_value():
    frame = with_dashes(pd.DataFrame([{"session": "a", "reward": None}, {"session": "b", "reward": 0.5}]))
    assert list(frame["reward"]) == ["—", "0.5"] and "None" not in frame.to_string()


def test_run_page_steps_tick_on_whole_numbers():
    steps = pd.DataFrame({"step": [1, 2, 3], "n_rollouts": [4, 4, 4], "n_calls": [9, 8, 7]})
    axis = next(iter(figures(steps).values())).layout.xaxis
    assert list(axis.tickvals) == [1, 2, 3] and axis.tickformat == "d"


def test_the_worst_token_table_shows_each_tokens_text(monkeypatch):
    at = app(monkeypatch, session="fix-config-bug")  # the bundled signals are joined: the lens is there
    frames = [d.value for d in at.dataframe if "trainer logprob" in d.value.columns]
    assert frames and "token" in frames[0].columns
    assert all(isinstance(t, str) and t for t in frames[0]["token"])


def test_the_corpus_page_names_every_harness_and_no_server_path(monkeypatch, tmp_path):
    folder = tmp_path / "captures"
    folder.mkdir()
    lines = gzip.open(QWEN, "rt").read().splitlines()
    records = [json.loads(line) for line in lines]
    for record in records:
        record["harness"] = None  # a capture made without naming its harness
    (folder / "run.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    at = app(monkeypatch, folder)
    at.switch_page("views/screens/corpus.py").run()
    no_errors(at)
    harness = next(m for m in at.multiselect if m.label == "Harness")
    assert harness.options == ["not recorded"]
    table = next(d.value for d in at.dataframe if "file" in d.value.columns)
    assert list(table["file"]) == ["run.jsonl"] and str(tmp_path) not in " ".join(map(str, table["file"]))


def test_the_story_numbers_never_count_a_folded_root_as_a_conversation():
    r = rollout(VLLM, "fix-config-bug")
    assert len(outline(r).conversations) == 4 == r.stats["n_roots"] - 2  # c01 and c18 retried, folded
    assert np.all(np.diff([c.root for c in outline(r).conversations[:2]]) > 0)
