"""Signals point at what they flag (issue 22 item 5): which joined row a call's overlay and the
mismatch scatter show (the row picker's choice and its default), every flagged token plotted, and
the worst token named by the finding and the text report. Hand-built rows, hand-computed answers."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rollout_graph.reports.summary import mismatch_lines
from rollout_graph.signals.join import attach, join_rollout
from rollout_graph.signals.reading import parse_row, read_signals_bytes
from rollout_graph.ui.builders import mismatch, overlays
from rollout_graph.ui.builders.tokens import node_strip, sequence_strip
from tests.support.builders import Turn, rollout_of, vllm_chat

# c0 is covered by two training rows (leaves c1 and c2, in that leaf order); the SECOND row has a
# -2.5 nat token at c0's sampled token 1. Row layout: c0's prompt 1 2 3 (0-2), its sampled 4 5 (3, 4),
# the context 6 or 8 (5), the leaf's sampled token (6).
TURNS = [
    Turn("c0", [1, 2, 3], [4, 5], [-0.5, -1.0]),
    Turn("c1", [1, 2, 3, 4, 5, 6], [7], [-0.2]),
    Turn("c2", [1, 2, 3, 4, 5, 8], [9], [-0.2]),
]
ROW_C1 = [None, 0, 0, -0.3, -1.1, 0, -0.2]  # d at c0: +0.2, -0.1
ROW_C2 = [None, 0, 0, -0.5, -3.5, 0, -0.3]  # d at c0: 0, -2.5; at c2: -0.1


def joined(rows=(ROW_C1, ROW_C2), threshold=1.0, extra=({}, {})):
    rollout = rollout_of([vllm_chat(t) for t in TURNS])
    parsed = [
        parse_row({"session_id": "s1", "leaf_id": leaf, "trainer_logprobs": r, "advantages": [k + 1.0] * 7, **x},
                  line, "dir/two.signals.jsonl")
        for line, (leaf, r, x, k) in enumerate(zip(("c1", "c2"), rows, extra, (0, 1), strict=True), start=1)
        if r is not None
    ]  # fmt: skip
    return attach(rollout, join_rollout(rollout, parsed, threshold))


def seq_of(rollout, leaf_id):
    return next(i for i, s in enumerate(rollout.sequences) if rollout.calls[s.leaf].node_id == leaf_id)


def test_the_default_row_holds_the_worst_token_and_says_why():
    r = joined()
    rows = mismatch.covering_rows(r, 0)
    assert [x.leaf_id for x in rows] == ["c1", "c2"]  # leaf order
    assert [x.worst_offset for x in rows] == [0, 1] and rows[1].worst_d == pytest.approx(-2.5)
    assert [x.begin for x in rows] == [3, 3] and [x.n_compared for x in rows] == [2, 2]
    default = mismatch.default_row(rows)
    assert default is rows[1] and default.sequence == seq_of(r, "c2")
    assert default.sequence == r.signals.calls[0].sequence  # the same rule as the join's per-call arrays
    assert default.name == "row c2 (two.signals.jsonl line 2)"
    reason = mismatch.default_reason(rows)
    assert reason.startswith("row c2 (two.signals.jsonl line 2) is the default: it holds the call's worst token")
    assert "sampled token 1, Δ -2.5 nats" in reason and "of the 2 rows" in reason
    assert mismatch.row_label(rows[1], default).endswith("worst Δ -2.5 at sampled token 1 · default")
    assert "default" not in mismatch.row_label(rows[0], default)
    # a call one row covers, and the picker's fallbacks
    assert mismatch.default_reason(mismatch.covering_rows(r, 2)) == (
        "row c2 (two.signals.jsonl line 2) is the only joined row through this call."
    )
    assert mismatch.resolve_row(rows, "c1") is rows[0]
    assert mismatch.resolve_row(rows, "c9") is rows[1] and mismatch.resolve_row(rows, None) is rows[1]
    assert mismatch.default_row([]) is None and mismatch.default_reason([]) == "No joined row covers this call."


def test_a_step_column_names_the_rows_step():
    r = joined(extra=({"step": 7}, {"global_step": 8}))
    rows = mismatch.covering_rows(r, 0)
    assert [x.step for x in rows] == ["7", "8"]
    assert "· step 8 ·" in mismatch.row_label(rows[1], rows[1])


def test_ties_and_rows_without_logprobs_take_the_first_row_in_leaf_order():
    same = [None, 0, 0, -0.5, -3.5, 0, -0.2]
    rows = mismatch.covering_rows(joined(rows=(same, same)), 0)
    assert mismatch.default_row(rows) is rows[0]
    assert mismatch.default_reason(rows).endswith("(a tie: the first in leaf order).")
    r = joined(rows=([None] * 7, [None] * 7))
    rows = mismatch.covering_rows(r, 0)
    assert mismatch.default_row(rows) is rows[0] and rows[0].worst_d is None
    assert "No row compares a token of this call" in mismatch.default_reason(rows)
    assert r.signals.calls[0].sequence == rows[0].sequence


def test_row_arrays_and_the_overlay_follow_the_row_shown():
    r = joined()
    c1, c2 = seq_of(r, "c1"), seq_of(r, "c2")
    trainer, advantages = mismatch.row_arrays(r, 0, c1)
    np.testing.assert_allclose(trainer, [-0.3, -1.1])
    np.testing.assert_allclose(advantages, [1.0, 1.0])
    assert mismatch.row_arrays(r, 1, c2) is None  # row c2 does not cover c1
    strip = node_strip(r, 0)  # c0's three context tokens, then its two sampled tokens
    np.testing.assert_allclose(strip.overlay.trainer[3:], [-0.5, -3.5])  # the default: row c2
    overlays.show_rows(r, strip.overlay, {0: c1})
    np.testing.assert_allclose(strip.overlay.trainer[3:], [-0.3, -1.1])
    np.testing.assert_allclose(strip.overlay.advantages[3:], [1.0, 1.0])
    assert strip.overlay.rows == {0: (c1, 3)}
    # the pinned-token inspector names the row its trainer logprob comes from
    assert strip.overlay.facts(4) == [
        ("trainer logprob", "-1.100000 (row c1)"),
        ("Δ trainer − inf.", "-0.1000 · ratio 0.9048"),
    ]
    assert strip.overlay.facts(0) == []  # a context token: nothing compared
    overlays.show_rows(r, strip.overlay, {0: c2})  # and back
    np.testing.assert_allclose(strip.overlay.trainer[3:], [-0.5, -3.5])
    np.testing.assert_allclose(strip.overlay.advantages[3:], [2.0, 2.0])
    # a Sequence tab shows its own row: c1's row, even for the call c2's row covers worse
    seq = sequence_strip(r, r.sequences[c1]).overlay
    np.testing.assert_allclose(seq.trainer[[3, 4, 6]], [-0.3, -1.1, -0.2])


def test_every_flagged_token_of_every_row_is_plotted():
    # both rows flag a token of c0 at 0.5 nat: c1's row at sampled token 0 (+0.6), c2's at 1 (-2.5)
    r = joined(rows=([None, 0, 0, 0.1, -1.1, 0, -0.2], ROW_C2), threshold=0.5)
    c1, c2 = seq_of(r, "c1"), seq_of(r, "c2")
    flagged = mismatch.flagged_tokens(r)
    assert [(f.node, f.sequence, f.offset) for f in flagged] == [(0, c1, 0), (0, c2, 1)]
    assert [f.d for f in flagged] == pytest.approx([0.6, -2.5])
    for shown in (None, {0: c1}, {0: c2}):
        p = mismatch.scatter_points(r, shown)
        plotted = {
            (int(n), int(s), int(o)): float(d) for n, s, o, d in zip(p.node, p.sequence, p.offset, p.diff, strict=True)
        }
        for f in flagged:
            assert plotted[(f.node, f.sequence, f.offset)] == pytest.approx(f.d)
    p = mismatch.scatter_points(r)  # default: c0 from row c2; row c1's flagged token is "other"
    other = [
        (int(n), int(s), int(o))
        for n, s, o in zip(p.node[p.other], p.sequence[p.other], p.offset[p.other], strict=True)
    ]
    assert other == [(0, c1, 0)]
    assert (p.node[~p.other] == 0).sum() == 2 and set(p.sequence[(p.node == 0) & ~p.other]) == {c2}
    fig = mismatch.scatter_figure(r, p, 0.5)
    assert [t.name for t in fig.data] == ["agreement", "tokens", "outliers", mismatch.OTHER_ROW]
    diamond = fig.data[3]
    assert list(diamond.customdata) == [[0, c1, 0]] and diamond.y[0] == pytest.approx(-0.5 + 0.6)
    outlier = fig.data[2]
    assert [0, c2, 1] in list(outlier.customdata)  # the -2.5 nat token, in the shown row


def test_the_figure_is_the_same_on_a_rerun_and_changes_with_the_row():
    r = joined()
    c1 = seq_of(r, "c1")
    first = mismatch.scatter_figure(r, mismatch.scatter_points(r), 1.0).to_json()
    assert mismatch.scatter_figure(r, mismatch.scatter_points(r), 1.0).to_json() == first
    assert mismatch.scatter_figure(r, mismatch.scatter_points(r, mismatch.shown_rows(r, {})), 1.0).to_json() == first
    picked = mismatch.shown_rows(r, {0: "c1"})
    assert picked[0] == c1 and mismatch.shown_rows(r, {0: "c9"})[0] == r.signals.calls[0].sequence
    other = mismatch.scatter_figure(r, mismatch.scatter_points(r, picked), 1.0)
    assert other.to_json() != first
    # row c1 shown for c0: the flagged token of row c2 is still plotted, as a red diamond
    assert other.data[-1].name == mismatch.OTHER_ROW and list(other.data[-1].customdata) == [[0, seq_of(r, "c2"), 1]]


def test_a_clicked_point_is_read_from_its_customdata():
    assert mismatch.picked_point([{"curve_number": 3, "customdata": [0, 1, 1]}]) == (0, 1, 1)
    assert mismatch.picked_point([{"curve_number": 1}, {"customdata": ["x", 1, 2]}, {"customdata": [2, 0, 5]}]) == (
        2, 0, 5,
    )  # fmt: skip
    assert mismatch.picked_point([{"customdata": {"0": 1, "1": 0, "2": 7}}]) == (1, 0, 7)  # a typed array's row
    assert mismatch.picked_point([]) is None and mismatch.picked_point([{"customdata": 4}]) is None
    r = joined()
    assert mismatch.view_position(r, 0, 1) == 4  # c0's three context tokens, then sampled token 1


def test_the_finding_and_the_text_report_name_call_row_and_position():
    r = joined()
    (finding,) = [f for f in r.findings if f.code == "logprob_mismatch"]
    assert finding.node_id == "c0"
    assert finding.detail.endswith(
        "; the worst is sampled token 1 (Δ -2.5 nats), in row c2 (two.signals.jsonl line 2) at position 4"
    )
    assert mismatch_lines(r) == [
        "  logprob_mismatch c0: |Δ| up to 2.5 nats; the worst is sampled token 1 (Δ -2.5 nats), "
        "in row c2 (two.signals.jsonl line 2) at position 4"
    ]


def test_a_signals_row_remembers_its_file():
    data = "\n".join(json.dumps({"session_id": "s1", "leaf_id": leaf}) for leaf in ("c1", "c2")).encode()
    rows = read_signals_bytes("mine.signals.jsonl", data).rows
    assert [(x.file, x.line) for x in rows] == [("mine.signals.jsonl", 1), ("mine.signals.jsonl", 2)]


# ---- a trace and signals file on disk: the app's surfaces (AppTest here, Chromium in test_browser_signals.py)

SESSION = "two-rows"
# c0 samples 12 tokens; c1 and c2 both continue it (two tool results): two training rows cover c0
CASE = [
    Turn("c0", list(range(1, 9)), list(range(100, 112)), [-0.1 - 0.05 * k for k in range(12)], session=SESSION),
    Turn("c1", [*range(1, 9), *range(100, 112), 50, 51], [60, 61, 62], [-0.3, -0.2, -0.1], session=SESSION),
    Turn("c2", [*range(1, 9), *range(100, 112), 70, 71], [80, 81, 82], [-0.4, -0.5, -0.6], session=SESSION),
]
WORST_OFFSET = 3  # c0's sampled token 3 is 2.5 nats lower in the SECOND row (leaf c2)


def write_case(folder):
    """(trace path, signals path) of the case: trainer logprobs close to the engine's (±0.05)
    except one -2.5 nat token of c0 in the row of c2, the second row in leaf order."""
    from rollout_graph.reports.export import training_rows
    from tests.support.builders import write

    folder.mkdir(parents=True, exist_ok=True)
    trace = write(folder / "two-rows.jsonl", [vllm_chat(t) for t in CASE])
    rollout = rollout_of([vllm_chat(t) for t in CASE])
    lines = []
    for k, row in enumerate(training_rows(rollout)):
        assert row["leaf_id"] == ("c1", "c2")[k]  # leaf order: c1's row first
        trainer = [None if m == 0 else lp + (0.05 if (i % 2) else -0.05) for i, (m, lp) in
                   enumerate(zip(row["loss_mask"], row["logprobs"], strict=True))]  # fmt: skip
        if row["leaf_id"] == "c2":
            at = 8 + WORST_OFFSET  # c0's prompt (8 tokens), then its sampled span
            trainer[at] = row["logprobs"][at] - 2.5
        lines.append(json.dumps({"session_id": SESSION, "leaf_id": row["leaf_id"], "trainer_logprobs": trainer,
                                 "reward": float(k), "step": 3}))  # fmt: skip
    signals = folder / "two-rows.signals.jsonl"
    signals.write_text("\n".join(lines) + "\n")
    return trace, signals


def test_the_case_raises_one_warn_on_c0_from_the_second_row(tmp_path):
    from rollout_graph.signals.join import attach_all
    from rollout_graph.signals.reading import read_signals

    trace, signals = write_case(tmp_path)
    rollout = rollout_of([vllm_chat(t) for t in CASE])
    (r,), _ = attach_all([rollout], read_signals(signals))
    mismatches = [(f.level, f.node_id) for f in r.findings if f.code == "logprob_mismatch"]
    assert mismatches == [("WARN", "c0")]
    default = mismatch.default_row(mismatch.covering_rows(r, 0))
    assert default.leaf_id == "c2" and default.worst_offset == WORST_OFFSET and default.worst_d == pytest.approx(-2.5)
    assert [f.offset for f in mismatch.flagged_tokens(r)] == [WORST_OFFSET]


def test_in_the_app_jump_to_the_worst_token_selects_call_row_and_token(monkeypatch, tmp_path):
    from rollout_graph.resources import SIGNALS_ENV
    from tests.support.apptest import app, html_of, no_errors

    trace, signals = write_case(tmp_path / "case")
    monkeypatch.setenv(SIGNALS_ENV, str(signals))
    at = app(monkeypatch, trace.parent)
    no_errors(at)
    assert not [b for b in at.button if mismatch_jump(b.label)]  # a findings group is built when opened
    at.session_state[f"triage-group-{SESSION}-WARN-logprob_mismatch"] = True  # as a click on its title does
    at.run()
    jumps = [b for b in at.button if mismatch_jump(b.label)]
    assert jumps, [b.label for b in at.button]  # in the findings list, before any call is chosen
    assert "c0, sampled token 3, Δ -2.5 nats, row c2 (two-rows.signals.jsonl line 2)" in jumps[0].label
    at = jumps[0].click().run()
    no_errors(at)
    html = html_of(at)
    assert 'class="rg-node-title"' in html and ">c0 <" in html  # the call is selected
    position = 8 + WORST_OFFSET  # c0 is a root: its whole prompt is its context span
    assert f'rg-m" data-i="{position}"' in html  # the token is ringed
    (picker,) = [s for s in at.selectbox if s.label.startswith("Signals row shown")]
    assert picker.value == "c2"
    assert any("row c2 (two-rows.signals.jsonl line 2) is the default" in c.value for c in at.caption)
    # another row picked: the token view and the scatter follow it; the jump brings the worst row back
    at = picker.select("c1").run()
    no_errors(at)
    assert at.session_state["rg-signals-rows"][SESSION]["c0"] == "c1"
    at = next(b for b in at.button if mismatch_jump(b.label)).click().run()
    assert next(s for s in at.selectbox if s.label.startswith("Signals row shown")).value == "c2"


def mismatch_jump(label: str) -> bool:
    return "jump to the worst token" in label


def test_inspect_names_the_call_row_and_position_of_the_worst_token(tmp_path):
    import subprocess
    import sys

    trace, signals = write_case(tmp_path)
    text = subprocess.run(
        [sys.executable, "-m", "rollout_graph", "inspect", str(trace), "--signals", str(signals)],
        capture_output=True,
        text=True,
    )
    assert text.returncode == 0, text.stderr
    line = "  logprob_mismatch c0: |Δ| up to 2.5 nats; the worst is sampled token 3 (Δ -2.5 nats), in row c2 "
    assert line + "(two-rows.signals.jsonl line 2) at position 11" in text.stdout
    doc = subprocess.run(
        [sys.executable, "-m", "rollout_graph", "inspect", str(trace), "--signals", str(signals), "--json"],
        capture_output=True,
        text=True,
    )
    (session,) = json.loads(doc.stdout)["sessions"]
    (finding,) = [f for f in session["findings"] if f["code"] == "logprob_mismatch"]
    assert finding["node_id"] == "c0" and finding["detail"].endswith("at position 11")
    assert session["signals"]["worst_tokens"][0] | {"d": round(session["signals"]["worst_tokens"][0]["d"], 6)} == {
        "leaf_id": "c2", "position": 11, "node_id": "c0", "d": -2.5,
        "inference_logprob": pytest.approx(-0.25), "trainer_logprob": pytest.approx(-2.75),
    }  # fmt: skip
