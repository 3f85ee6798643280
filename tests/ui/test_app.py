"""App flows through Streamlit's AppTest: open samples, select a call through the app's own
widgets, deep links, paging a long span, and a broken file's load report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from rollout_graph.resources import SAMPLES
from tests.support.apptest import app, html_of, no_errors, open_tab, pick_call
from tests.support.builders import TOOLS, Turn, vllm_chat, write


def test_opens_the_bundled_samples(monkeypatch):
    at = app(monkeypatch)
    no_errors(at)
    assert "Rollout fix-config-bug<" in html_of(at)  # the richest rollout opens first
    assert at.query_params["session"] == "fix-config-bug"
    assert [m.label for m in at.metric][:6] == [
        "calls",
        "roots",
        "forks",
        "retries",
        "broken replays",
        "trainable tokens (rows)",
    ]
    assert at.metric[0].value == "25"
    harness_traces = len(list((SAMPLES / "harnesses").glob("*.jsonl.gz")))  # a rollout each
    assert any(d.value.shape[0] == 4 + harness_traces for d in at.dataframe)  # the rollouts table
    assert at.get("plotly_chart")


def test_selecting_a_call_shows_its_detail_and_updates_the_link(monkeypatch):
    at = pick_call(app(monkeypatch), "c07")
    no_errors(at)
    page = html_of(at)
    assert ">c07 <span" in page
    assert "Token text decoded with" not in page and "rg-chat" not in page  # tabs not shown are not built
    assert at.query_params["node"] == "c07"
    facts = html_of(open_tab(at, "Facts"))
    assert "Token text decoded with sample_traces/SmolLM2-135M-Instruct" in facts
    at = open_tab(at, "Tokens")
    assert {"Tokens", "Messages", "Sequence"} <= {t.label for t in at.tabs}
    assert "Where the tokens went" not in {t.label for t in at.tabs}  # the Audit panel runs only when opened
    at = next(t for t in at.toggle if t.label.startswith("Audit")).set_value(True).run()
    no_errors(at)
    assert {"Where the tokens went", "Why it split"} <= {t.label for t in at.tabs}
    assert "rg-b" in page and "rg-c" in page  # sampled tokens coloured, context tokens neutral
    assert "You are a coding agent" in html_of(open_tab(at, "Messages"))  # the messages tab


def test_deep_link_restores_the_selection(monkeypatch):
    at = app(monkeypatch, session="list-todos", node="c05")
    no_errors(at)
    assert "Rollout list-todos<" in html_of(at) and ">c05 <span" in html_of(at)


def test_unknown_deep_link_keeps_the_url_and_says_so(monkeypatch):
    at = app(monkeypatch, session="nope", node="zzz")
    no_errors(at)
    assert at.query_params["session"] == "nope" and at.query_params["node"] == "zzz"  # the link is kept
    assert any("no rollout 'nope' in these traces" in w.value.replace("\\", "") for w in at.warning)
    assert "Rollout fix-config-bug<" in html_of(at)  # the rest of the page opens normally


def long_trace(tmp_path: Path) -> Path:
    prompt = list(range(1000, 6000))
    logprobs = [-0.1] * 300
    logprobs[250] = -9.5
    folder = tmp_path / "long"
    folder.mkdir()
    write(folder / "long.jsonl", [vllm_chat(Turn("big", prompt, list(range(300)), logprobs=logprobs, tools=TOOLS))])
    return folder


def caption_with(at: AppTest, text: str) -> bool:
    return any(text in c.value for c in at.caption)


def test_long_spans_page_and_jump(monkeypatch, tmp_path):
    at = pick_call(app(monkeypatch, long_trace(tmp_path)), "big")
    no_errors(at)
    assert caption_with(at, "tokens 0–799 of 5,300 · page 1 of 7")
    next(b for b in at.button if b.label == "▶").click().run()
    assert caption_with(at, "tokens 800–1,599 of 5,300 · page 2 of 7")
    next(b for b in at.button if b.label == "Lowest logprob").click().run()
    assert caption_with(at, "tokens 4,800–5,299 of 5,300 · page 7 of 7")
    assert "rg-m" in html_of(at)  # the jump target is ringed
    next(b for b in at.button if b.label == "First sampled token").click().run()
    assert caption_with(at, "page 7 of 7")
    at.number_input[0].set_value(42).run()
    assert caption_with(at, "tokens 0–799 of 5,300 · page 1 of 7")


def test_broken_file_shows_the_load_report(monkeypatch, tmp_path):
    folder = tmp_path / "broken"
    folder.mkdir()
    good = json.dumps(vllm_chat(Turn("a", [1, 2], [3])))
    (folder / "bad.jsonl").write_text(f'{good}\nnot json at all\n{{"what": 1}}\n')
    at = app(monkeypatch, folder)
    no_errors(at)
    assert "**2 skipped**" in at.warning[0].value
    report = next(d.value for d in at.dataframe if "reason" in d.value.columns)
    assert report["line"].tolist() == [2, 3]
    assert report["reason"].iloc[1] == "unknown record shape (keys: what)"


@pytest.mark.parametrize("node", ["c09", "c17"])
def test_every_tab_renders_for_sample_calls(monkeypatch, node):
    at = app(monkeypatch, session="fix-config-bug", node=node)
    no_errors(at)
    assert not at.json and not at.code  # only the Tokens tab is built
    assert "rg-tokens" in html_of(at)
    seen = {}
    for label in [t.label for t in at.tabs if not t.label.startswith("Tokens")]:
        at = open_tab(at, label.split(" (")[0])
        no_errors(at)
        seen[label.split(" (")[0]] = (
            html_of(at),
            {m.label for m in at.metric},
            bool(at.dataframe) or any("No findings" in c.value for c in at.caption),
            bool(at.json) and bool(at.code),
        )
    assert "rg-facts" in seen["Facts"][0]
    assert "rg-chat" in seen["Messages"][0]
    assert "trainable tokens (row)" in seen["Sequence"][0]  # the row's numbers, wrapping in the pane
    assert seen["Findings"][2]
    assert seen["Raw JSON"][3]  # the record read back, and the derived fields


def test_view_command_serves_the_app(tmp_path):
    import urllib.request

    from tests.support.browser import running_app

    write(tmp_path / "t.jsonl", [vllm_chat(Turn("a", [1], [2]))])
    with running_app(str(tmp_path), via_cli=True) as url:
        with urllib.request.urlopen(url) as response:
            assert response.status == 200 and b"<noscript>" in response.read()


def test_the_guide_opens_an_example_in_one_click(monkeypatch):
    at = app(monkeypatch)
    assert any(p.proto.popover.label == "Take the tour" for p in at.get("popover"))  # at the top: no scrolling
    next(b for b in at.button if b.label.startswith("a subagent")).click().run()
    no_errors(at)
    assert ">c08 <span" in html_of(at) and at.query_params["node"] == "c08"
