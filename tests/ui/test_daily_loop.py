"""The daily loop (issue 22) through AppTest: Raw JSON on every source, Compare and the Corpus
page on command-line traces, honest links, and one vocabulary in what the app and CLI print."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rollout_graph.resources import SAMPLES
from tests.support.apptest import app, html_of, no_errors, open_tab, pick_call

VLLM = SAMPLES / "vllm"


def warnings(at) -> list[str]:
    """The page's warnings as a user reads them (Markdown escapes dropped)."""
    return [w.value.replace("\\", "") for w in at.warning]


def raw_record_shown(at) -> str:
    """The Raw JSON tab's text: the record read back from its file (not a warning)."""
    captions = [c.value for c in at.caption if c.value.startswith("The record from")]
    assert captions, [w.value for w in warnings(at)]
    return "\n".join(c.value for c in at.code)


def test_raw_json_reads_the_record_back_on_the_bundled_samples(monkeypatch):
    at = open_tab(app(monkeypatch, session="fix-config-bug", node="c07"), "Raw JSON")  # bundled signals joined
    no_errors(at)
    text = raw_record_shown(at)
    assert '"prompt_token_ids"' in text or '"prompt_ids"' in text or "{" in text
    assert not any("unloaded" in w for w in warnings(at))


def test_raw_json_reads_the_record_back_on_command_line_traces(monkeypatch):
    at = app(monkeypatch, VLLM)
    no_errors(at)
    session = at.query_params["session"]
    at = open_tab(app(monkeypatch, VLLM, session=session, node="c01"), "Raw JSON")
    no_errors(at)
    text = raw_record_shown(at)
    assert "agent-rollouts.jsonl" in "\n".join(c.value.replace("\\", "") for c in at.caption)
    assert text.startswith("{")


def run_cli(*args: str, cwd: Path | None = None):
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "rollout_graph", *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


@pytest.mark.parametrize(("name", "starts"), [("g.graphml", b"<?xml"), ("r.jsonl", b'{"'), ("r.parquet", b"PAR1")])
def test_export_out_extension_picks_the_format(tmp_path, name, starts):
    out = tmp_path / name
    done = run_cli("export", str(VLLM), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert out.read_bytes().startswith(starts)


@pytest.mark.parametrize("name", ["rows.csv", "rows", "graph.gml"])
def test_export_refuses_an_unknown_extension(tmp_path, name):
    done = run_cli("export", str(VLLM), "--out", str(tmp_path / name))
    assert done.returncode == 2
    assert f"{name}: unknown output extension" in done.stderr and ".graphml" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / name).exists()


def test_export_refuses_a_format_the_extension_contradicts(tmp_path):
    done = run_cli("export", str(VLLM), "--out", str(tmp_path / "rows.jsonl"), "--format", "graphml")
    assert done.returncode == 2 and "GraphML needs an --out ending in .graphml" in done.stderr


def test_a_link_to_an_unknown_call_keeps_the_url_and_says_so(monkeypatch):
    at = app(monkeypatch, session="fix-config-bug", node="c99")
    no_errors(at)
    assert at.query_params["node"] == "c99"
    assert any("No call 'c99' in rollout fix-config-bug" in w for w in warnings(at))
    assert "Rollout fix-config-bug<" in html_of(at) and at.get("plotly_chart")


def test_choosing_a_call_after_an_unknown_link_writes_the_url_again(monkeypatch):
    at = app(monkeypatch, session="nope")
    assert at.query_params["session"] == "nope"
    at = pick_call(at, "c07")
    no_errors(at)
    assert at.query_params["session"] == "fix-config-bug" and at.query_params["node"] == "c07"
    assert not any("no rollout 'nope'" in w for w in warnings(at))


def test_a_link_to_an_uploaded_trace_asks_for_the_file(monkeypatch):
    at = app(monkeypatch, source="upload", session="my-run", node="c13")
    no_errors(at)
    assert any(
        "This link points to an uploaded trace: drop the same file in the sidebar to open c13" in w
        for w in warnings(at)
    )
    assert at.query_params["session"] == "my-run" and at.query_params["node"] == "c13"


# Words the glossary retired (docs/semantics.md, Glossary). Finding codes keep their names
# (truncated_turn, discarded_turns): they are matched as whole identifiers and left out first.
RETIRED = re.compile(
    r"\bturns?\b|\bretried\b|\bresampled\b|a retry that led nowhere|model's (own )?turn"
    # a discarded call is not necessarily a retry; a broken replay has one name; replies re-tokenized
    # are not "edited"; token counts have the glossary's names ("trained" is no count)
    r"|discarded retr(?:y|ies)|history rewritten|rewrites its history|come back edited|broken prefix"
    r"|rewritten continuation of|context added|never trained|trained: yes",
    re.I,
)
CODES = re.compile(r"\b[a-z]+(?:_[a-z]+)+\b")  # snake_case identifiers: finding codes, JSON keys


def retired_words(text: str) -> list[str]:
    return sorted({m.group(0) for m in RETIRED.finditer(CODES.sub("", text))})


def visible_text(at) -> str:
    """Everything the page shows as text: Markdown, HTML, labels, captions, tiles, tabs, expanders."""
    parts = [html_of(at)]
    for kind in ("markdown", "caption", "info", "warning", "success", "error"):
        parts += [e.value for e in at.get(kind)]
    parts += [m.label for m in at.metric] + [t.label for t in at.tabs] + [e.label for e in at.expander]
    parts += [w.label for w in (*at.button, *at.toggle, *at.selectbox, *at.radio, *at.checkbox)]
    parts += [str(w.help or "") for w in (*at.button, *at.toggle)]
    parts += [o for s in at.selectbox for o in s.options]
    parts += [str(c) for d in at.dataframe for c in d.value.columns]  # table headers
    text = "\n".join(parts)
    return re.sub(r"<style>.*?</style>|class=\"[^\"]*\"", "", text, flags=re.S)


@pytest.mark.parametrize("node", [None, "c01", "c07", "c19"])
def test_the_app_uses_no_retired_word(monkeypatch, node):
    at = app(monkeypatch, session="fix-config-bug", **({"node": node} if node else {}))
    no_errors(at)
    text = visible_text(at)
    assert "calls" in text
    assert retired_words(text) == [], text[:0]


def test_the_command_line_uses_no_retired_word(tmp_path):
    outputs = []
    for args in (
        ["tail", str(VLLM), "--until-idle", "1"],
        ["audit", str(VLLM), "--out", str(tmp_path / "audit.parquet"), "--workers", "1"],
        ["inspect", str(SAMPLES)],
        ["explain", str(SAMPLES), "--session", "fix-config-bug"],
        ["explain", str(SAMPLES / "harnesses")],
        ["search", "config", str(SAMPLES)],
        ["compare", str(SAMPLES), str(SAMPLES), "--session-a", "fix-config-bug", "--session-b", "list-todos"],
        ["--help"],
        ["export", "--help"],
    ):
        done = run_cli(*args)
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout + done.stderr)
    text = "\n".join(outputs)
    assert "calls 25" in text
    assert retired_words(text) == []


def test_the_summary_lists_every_finding_code_most_severe_first():
    done = run_cli("inspect", str(SAMPLES), "--session", "fix-config-bug")
    findings = next(line for line in done.stdout.splitlines() if "findings:" in line)
    assert findings.index("FATAL") < findings.index("WARN") < findings.index("INFO")
    for code in ("truncated_turn", "discarded_turns", "unfinished_attempts", "sampling_changed", "multiple_roots"):
        assert code in findings


def test_the_selected_call_is_ringed_and_boxed_and_nothing_else_changes():
    from rollout_graph.ui.builders.dag import RING_BOX, RING_SELECTED, SELECTED_RING, dag_drawing, rings
    from tests.support.builders import rollout_of_tokens

    r = rollout_of_tokens([([1], [2]), ([1, 2, 3], [4]), ([1, 2, 3, 4, 5], [6])])
    fig, targets = dag_drawing(r)
    before = fig.to_json()
    shapes = rings(fig, targets, r, 1)["shapes"]  # what the browser draws over the unchanged figure
    ring = [s for s in shapes if s["name"] == RING_SELECTED]
    calls = fig.data[1]
    assert [(s["xanchor"], s["yanchor"]) for s in ring] == [(calls.x[1], calls.y[1])]
    assert ring[0]["line"]["color"] == SELECTED_RING
    assert [s["label"]["text"] for s in shapes if s["name"] == RING_BOX] == ["<b>n1</b>"]
    assert fig.to_json() == before  # a click keeps the figure, so plotly keeps its view
    assert list(calls.selectedpoints) == []  # no call drawn paler or faded
    # a call chosen outside the chart is boxed in its own figure ...
    chosen, chosen_targets = dag_drawing(r, highlight=2)
    assert [s.label.text for s in chosen.layout.shapes if s.name == RING_BOX] == ["<b>n2</b>"]
    # ... and another call clicked then: the browser replaces the figure's rg-ring- shapes with one box
    moved = rings(chosen, chosen_targets, r, 0)["shapes"]
    assert [s["label"]["text"] for s in moved if s["name"] == RING_BOX] == ["<b>n0</b>"]


def test_a_small_rollout_fills_the_window_wherever_the_selection_is():
    from rollout_graph.ui.builders.dag import dag_figure
    from tests.support.builders import rollout_of_tokens

    r = rollout_of_tokens([([1], [2]), ([1, 2, 3], [4]), ([1, 2, 3, 4, 5], [6])])
    assert dag_figure(r, highlight=2).layout.xaxis.range == dag_figure(r).layout.xaxis.range
    low, high = dag_figure(r, highlight=2).layout.xaxis.range
    assert high - low < 4  # three calls in a row: not a 33-column window


def test_signals_point_at_the_worst_token_of_a_call_two_rows_cover():
    """c0 is covered by the rows of c1 (trainer agrees) and of c2 (a -2.5 nat token at c0's second
    sampled token): the call's arrays come from c2's row, the scatter plots that token, and the
    finding names it."""
    from rollout_graph.signals.join import join_rollout
    from rollout_graph.signals.reading import parse_row
    from rollout_graph.ui.builders import mismatch
    from rollout_graph.ui.panels.signals import points
    from tests.support.builders import Turn, rollout_of, vllm_chat

    turns = [
        Turn("c0", [1, 2, 3], [4, 5], [-0.5, -1.0]),
        Turn("c1", [1, 2, 3, 4, 5, 6], [7], [-0.2]),
        Turn("c2", [1, 2, 3, 4, 5, 8], [9], [-0.2]),
    ]
    rollout = rollout_of([vllm_chat(t) for t in turns])
    rows = [
        parse_row({"session_id": "s1", "leaf_id": "c1", "trainer_logprobs": [None, 0, 0, -0.5, -1.0, 0, -0.2]}, 1),
        parse_row({"session_id": "s1", "leaf_id": "c2", "trainer_logprobs": [None, 0, 0, -0.5, -3.5, 0, -0.2]}, 2),
    ]
    signals = join_rollout(rollout, rows, 0.5)
    c0 = signals.calls[0]
    assert c0.max_abs_diff == pytest.approx(2.5) and c0.worst_offset == 1
    assert c0.trainer[1] == pytest.approx(-3.5)  # the overlay shows the worst row's token
    finding = next(f for f in signals.findings if f.code == "logprob_mismatch")
    assert finding.node_id == "c0" and "the worst is sampled token 1" in finding.detail
    from rollout_graph.signals.join import attach

    joined = attach(rollout, signals)
    p = points(joined)
    assert any(n == 0 and o == 1 and d == pytest.approx(-2.5) for n, o, d in zip(p.node, p.offset, p.diff, strict=True))
    # the worst-token jump (views/state/signals.py jump_to_token): the default row holds it
    default = mismatch.default_row(mismatch.covering_rows(joined, 0))
    assert default.leaf_id == "c2" and abs(default.worst_d) == pytest.approx(2.5)
    assert mismatch.view_position(joined, 0, default.worst_offset) == 3 + 1  # 3 context tokens, then sampled token 1


def test_a_bad_file_leads_with_the_reasons(monkeypatch, tmp_path):
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "bad.jsonl").write_text('not json at all\n{"what": 1}\n')
    at = app(monkeypatch, folder)
    no_errors(at)
    (warning,) = [w for w in warnings(at) if "skipped" in w]
    assert warning.startswith("**2 skipped** of 2 records")
    assert "bad.jsonl:1: not JSON" in warning and "bad.jsonl:2: unknown record shape (keys: what)" in warning
    assert "0 loaded: nothing else to load." in warning
    assert "every other record loaded normally" not in warning


# One word, one number (docs/semantics.md, Glossary): "(rows)" sums the training rows, "(calls)"
# counts each call's own tokens once. inspect, explain and the app print the same number per word.
WORDS = re.compile(
    r"(trainable tokens \((?:rows|calls)\)|context tokens \((?:rows|calls)\)|discarded tokens|inherited tokens"
    r"|sampled tokens) ([\d,]+)"
)
STAT_OF = {
    "trainable tokens (rows)": "n_trainable_tokens",
    "context tokens (rows)": "n_context_tokens",
    "trainable tokens (calls)": "n_trainable_call_tokens",
    "context tokens (calls)": "n_context_call_tokens",
    "discarded tokens": "n_discarded_tokens",
    "inherited tokens": "n_inherited_tokens",
    "sampled tokens": "n_sampled_tokens",
}


def numbers_by_word(text: str) -> dict[str, set[int]]:
    found: dict[str, set[int]] = {}
    for m in WORDS.finditer(text):
        found.setdefault(m.group(1), set()).add(int(m.group(2).replace(",", "")))
    return found


def fixture_with_an_untrainable_call(tmp_path: Path) -> Path:
    """The builders' small rollout (a retry, a fork, a side call) with c2's logprobs dropped: c2's
    sampled tokens stay context (mask 0), so "(calls)" and "(rows)" differ in more than scope."""
    from tests.support.builders import ROLLOUT, vllm_chat, write

    def strip(value):
        if isinstance(value, dict):
            value.pop("logprobs", None)
            for v in value.values():
                strip(v)
        elif isinstance(value, list):
            for v in value:
                strip(v)

    records = [vllm_chat(t) for t in ROLLOUT]
    strip(records[2])
    folder = tmp_path / "fixture"
    folder.mkdir()
    write(folder / "trace.jsonl", records)
    return folder


@pytest.mark.parametrize("source", ["samples", "fixture"])
def test_inspect_explain_and_the_app_show_one_number_per_word(monkeypatch, tmp_path, source):
    import orjson

    path, session = (
        (VLLM, "fix-config-bug") if source == "samples" else (fixture_with_an_untrainable_call(tmp_path), "s1")
    )
    contract = orjson.loads(run_cli("inspect", str(path), "--session", session, "--json").stdout)
    (stats,) = [s["stats"] for s in contract["sessions"]]
    expected = {word: {stats[key]} for word, key in STAT_OF.items()}
    if source == "samples":  # the example: the two scopes really differ
        assert (stats["n_trainable_tokens"], stats["n_trainable_call_tokens"]) == (3230, 1982)
        assert (stats["n_context_tokens"], stats["n_context_call_tokens"]) == (2980, 1552)
    else:  # hand-counted: c2's 2 sampled tokens are context once as a call, and in its one row
        assert (stats["n_trainable_tokens"], stats["n_context_tokens"]) == (7, 13)
        assert (stats["n_trainable_call_tokens"], stats["n_context_call_tokens"]) == (5, 10)
        assert (stats["n_discarded_tokens"], stats["n_inherited_tokens"], stats["n_sampled_tokens"]) == (1, 18, 7)
        assert stats["n_trainable_tokens_in_discarded_rows"] == 3

    inspect_text = run_cli("inspect", str(path), "--session", session).stdout
    explain_text = run_cli("explain", str(path), "--session", session).stdout
    assert numbers_by_word(inspect_text) == expected
    assert numbers_by_word(explain_text) == expected
    table = explain_text.splitlines()
    head = next(i for i, line in enumerate(table) if line.split()[:2] == ["scope", "calls"])
    cells = table[head + 1].replace(",", "").split()
    assert cells[0] == "rollout"
    sampled, trainable, discarded, never, context, inherited = map(int, cells[2:8])
    assert (sampled, trainable, discarded, context, inherited) == (
        stats["n_sampled_tokens"], stats["n_trainable_call_tokens"], stats["n_discarded_tokens"],
        stats["n_context_call_tokens"], stats["n_inherited_tokens"],
    )  # fmt: skip
    assert trainable + never == sampled

    at = app(monkeypatch, path, session=session)
    no_errors(at)
    tile = next(m for m in at.metric if m.label == "trainable tokens (rows)")
    assert tile.value == f"{stats['n_trainable_tokens']:,}"
    assert f"{stats['n_trainable_call_tokens']:,} trainable tokens (calls)" in tile.proto.help
    at.toggle(key="rg_show_audit").set_value(True).run()
    no_errors(at)
    flows = next(d.value for d in at.dataframe if "trainable tokens (calls)" in d.value.columns)
    whole = flows.iloc[0]
    assert whole["scope"] == "rollout"
    shown = {word: {int(whole[word])} for word in STAT_OF if word in flows.columns}
    assert shown == {w: expected[w] for w in shown} and len(shown) == 5
    caption = next(c.value for c in at.caption if "Summed over the training rows" in c.value)
    assert numbers_by_word(caption) == {w: expected[w] for w in ("trainable tokens (rows)", "context tokens (rows)")}


def retokenized_roots() -> list:
    """Three calls, each replaying the previous reply's text with other ids inside its sampled span:
    three roots, the last two broken replays (re-tokenized: the same text, other ids)."""
    from tests.analysis.test_replays import END, GEN, LIMIT, NL, SYSTEM, TASK, USER, turn

    prompt, history, records = SYSTEM + USER + GEN, [TASK], []
    for k, (ids, replayed) in enumerate([([30, 31, 32], [33, 32]), ([34, 35], [36]), ([37, 38, 39], None)]):
        text = f"part {k} of the answer"
        records.append(turn(f"X{k + 1}", prompt, ids, history, text, finish="length"))
        if replayed is not None:
            history = [*history, {"role": "assistant", "content": text}, {"role": "user", "content": "limit hit"}]
            prompt = prompt + replayed + [END, NL] + LIMIT + GEN
    return records


def test_the_broken_replay_banner_counts_roots_and_says_re_tokenized_not_edited():
    from rollout_graph.ui.panels.near_miss import banner
    from tests.analysis.test_replays import discarded_continuer_direction
    from tests.support.builders import rollout_of

    r = rollout_of(retokenized_roots())
    assert [r.calls[i].node_id for i in r.topology.roots] == ["X1", "X2", "X3"]
    text = banner(r).replace("\\", "")
    assert text.startswith("**This harness breaks its replays:** 2 of the 3 roots begin with a broken replay")
    assert "2 re-tokenize an earlier reply (the same text, other token ids)" in text
    assert "edited" not in text and "rewrite" not in text
    # the library's one sentence, worded from the later call's side, with its evidence
    assert "For example, broken replay (re-tokenized): X2 re-tokenizes X1's reply: the same text, other ids" in text
    assert "[its request carries the reply as text" in text
    assert "Fix: replay token ids, not text" in text
    # a re-tokenized replay on a call that is not a root is no root: one root, no banner
    one_root = rollout_of(discarded_continuer_direction())
    assert len(one_root.topology.roots) == 1 and one_root.near_misses and banner(one_root) is None


def test_the_near_miss_expander_shows_the_library_sentence_and_handles_thin_evidence():
    from rollout_graph.analysis.near_miss import UNKNOWN, describe
    from rollout_graph.core.records import SessionInput
    from rollout_graph.pipeline import analyse
    from rollout_graph.ui.panels.near_miss import headline, summary
    from tests.support.builders import calls_from_tokens, rollout_of

    system, gen = list(range(100, 110)), [1, 5]
    thin = analyse(
        SessionInput("s", calls_from_tokens([(system + gen, [50]), (system + gen + [50, 7], [51]), ([1, 2, 3], [4])]))
    )
    miss = thin.near_misses[2]
    assert miss.kind == UNKNOWN
    assert headline(thin, miss) == "n2 nearly continues n1 (the evidence is thin: cause unknown)"
    text = summary(thin, miss)
    assert text.startswith(describe(thin.calls, miss))
    assert f"The evidence is thin ({miss.evidence}): the cause cannot be named from these records" in text
    r = rollout_of(retokenized_roots())
    miss = r.near_misses[r.index_of("X2")]
    assert headline(r, miss) == "X2 re-tokenizes X1's reply (a broken replay)"
    assert summary(r, miss).startswith("broken replay (re-tokenized): X2 re-tokenizes X1's reply: the same text")


def test_the_app_shows_the_broken_replay_banner_and_the_sentence(monkeypatch, tmp_path):
    from tests.support.builders import write

    write(tmp_path / "replays.jsonl", retokenized_roots())
    at = app(monkeypatch, tmp_path, session="s1", node="X3")
    no_errors(at)
    (banner_text,) = [w for w in warnings(at) if "breaks its replays" in w]
    assert "2 of the 3 roots" in banner_text and "re-tokenize" in banner_text
    assert any(
        e.label.replace("\\", "") == "Near miss: X3 re-tokenizes X2's reply (a broken replay)" for e in at.expander
    )
    assert "broken replay (re-tokenized): X3 re-tokenizes X2&#x27;s reply: the same text" in html_of(at)


def test_the_tour_explains_each_example_with_the_library_sentence():
    from rollout_graph.analysis.near_miss import describe
    from rollout_graph.core.records import SessionInput
    from rollout_graph.pipeline import analyse
    from rollout_graph.ui.panels.tour import interesting_calls
    from tests.support.builders import calls_from_tokens, rollout_of

    r = rollout_of(retokenized_roots())
    found = {e.label: e for e in interesting_calls(r)}
    replay = found["a broken replay"]
    assert r.calls[replay.node].node_id == "X2"
    assert replay.why == describe(r.calls, r.near_misses[replay.node])
    assert replay.why.startswith("broken replay (re-tokenized): X2 re-tokenizes X1's reply: the same text")
    system, gen = list(range(100, 110)), [1, 5]
    thin = analyse(
        SessionInput("s", calls_from_tokens([(system + gen, [50]), (system + gen + [50, 7], [51]), ([1, 2, 3], [4])]))
    )
    example = next(e for e in interesting_calls(thin) if e.label == "a break with thin evidence")
    assert (
        example.why == describe(thin.calls, thin.near_misses[2]) + "; the evidence is thin, so the cause is not named"
    )
