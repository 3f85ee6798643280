"""``rollout-graph bundle``: one self-contained HTML file (graph/reports/bundle.py), without a browser.

tests/browser/test_bundle_browser.py opens the files in Chromium with every request blocked.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from rollout_graph.cli import main
from rollout_graph.core.messages import display_text
from rollout_graph.ingest.load.files import load_paths
from rollout_graph.pipeline import analyse
from rollout_graph.reports import notes as notes_io
from rollout_graph.reports.bundle import BundleOptions, bundle_data, bundle_html, script_json
from tests.support.builders import Turn, jsonl, vllm_chat
from tests.support.hostile import cases

ROOT = Path(__file__).resolve().parents[2]
VLLM = ROOT / "sample_traces" / "vllm"
DATA = re.compile(r'<script type="application/json" id="rollout-data">(.*?)</script>', re.S)
PAYLOADS = ["<img src=x onerror=window.__pwned=1>", "</script><script>window.__pwned=1</script>", "a\u2028b\u2029c<!--"]
MORE = {  # more places a trace puts text (tests/browser/test_browser.py feeds the app the same kinds)
    "message": '<iframe srcdoc="<script>parent.__pwned=1</script>"></iframe>[click](javascript:alert(1))',
    "argument": '<svg onload="window.__pwned=1">',
    "tool": "bash<script>window.__pwned=1</script>",
    "note": '<b onmouseover="window.__pwned=1">hover me</b>',
}


def page_data(page: str) -> dict:
    """The JSON a page embeds, read back as JSON.parse would."""
    found = DATA.findall(page)
    assert len(found) == 1
    return json.loads(found[0])


def outside_data(page: str) -> str:
    return DATA.sub("", page)


def bundle(tmp_path: Path, *args: str, name: str = "out.html") -> tuple[Path, str]:
    out = tmp_path / name
    assert main(["bundle", *args, "--out", str(out)]) == 0
    return out, out.read_text(encoding="utf-8")


def test_fix_config_bug_is_one_small_file_with_every_call(tmp_path, capsys):
    out, page = bundle(tmp_path, str(VLLM), "--session", "fix-config-bug")
    size = out.stat().st_size
    assert size < 3_000_000, size
    assert "(0." in capsys.readouterr().err  # the size is reported
    rollout = analyse(load_paths([VLLM]).sessions["fix-config-bug"])
    data = page_data(page)
    (session,) = data["sessions"]
    assert session["session_id"] == "fix-config-bug" and data["everything"]
    assert [c["id"] for c in session["calls"]] == rollout.node_ids
    assert len(session["details"]) == len(rollout.calls) and session["left_out"]["n"] == 0
    assert session["stats"]["n_calls"] == len(rollout.calls) == session["stats"]["n_turns"]
    # each call's spans are the library's: context span + sampled span add up to its training row
    for seq, row in zip(rollout.sequences, session["rows"], strict=True):
        tokens = rollout.tokens(seq)
        ids = [
            t
            for k in row["nodes"]
            for t in session["details"][str(k)]["context_ids"] + session["details"][str(k)]["sampled_ids"]
        ]
        assert ids == tokens.input_ids.tolist()
        assert row["n_trainable"] == int(tokens.loss_mask.sum())
    # the fork and near-miss diffs are there for the calls that have them
    forks = [i for i in range(len(rollout.calls)) if len(rollout.topology.children[i]) > 1]
    assert forks and all("fork" in session["details"][str(i)] for i in forks)
    for i in rollout.near_misses:
        assert session["details"][str(i)]["near_miss"]["kind"] == rollout.near_misses[i].kind
    # top-k alternatives travel with each sampled token
    call = rollout.calls[rollout.index_of("c05")]
    c05 = session["details"][str(rollout.index_of("c05"))]
    assert len(c05["top"]) == len(c05["sampled"]) == call.n_sampled
    assert [t[1] for t in c05["top"][0]] == [t for t in call.top_k.ids[0].tolist() if t >= 0]


def test_nothing_in_the_page_can_reach_the_network(tmp_path):
    _, page = bundle(tmp_path, str(VLLM))
    shell = outside_data(page)
    policy = html.unescape(re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', shell)[1])
    assert "default-src 'none'" in policy and "connect-src 'none'" in policy and "script-src 'sha256-" in policy
    assert not re.search(r"<(link|img|iframe|object|embed)\b", shell)
    assert not re.search(r"\b(src|href)\s*=", shell)
    assert "@import" not in shell and "url(" not in shell
    assert not re.search(r"https?://", shell.replace("http://www.w3.org/2000/svg", ""))
    assert shell.count("<script") == 1 and page.count("</script>") == 2  # the data and the inline script


def test_script_json_cannot_close_the_element_and_reads_back_the_same():
    data = {"texts": PAYLOADS, "nested": {"k</script>": PAYLOADS}}
    text = script_json(data)
    assert "<" not in text and ">" not in text and "&" not in text
    assert "\u2028" not in text and "\u2029" not in text
    assert json.loads(text) == data


def hostile_rollout(tmp_path: Path) -> Path:
    turn = Turn(
        PAYLOADS[0],
        [1, 2, 3],
        [7, 8],
        session=PAYLOADS[1],
        messages=[{"role": "user", "content": PAYLOADS[1]}, {"role": "user", "content": MORE["message"]}],
        reply=PAYLOADS[0],
        tools=[{"type": "function", "function": {"name": MORE["tool"], "parameters": {"type": "object"}}}],
    )
    record = vllm_chat(turn, token_text=True)
    record["response"]["model"] = PAYLOADS[1]
    choice = record["response"]["choices"][0]
    choice["logprobs"]["content"][0]["token"] = PAYLOADS[1]
    choice["message"]["tool_calls"] = [
        {
            "id": "t",
            "type": "function",
            "function": {"name": MORE["tool"], "arguments": json.dumps({"cmd": MORE["argument"]})},
        }
    ]
    path = tmp_path / "hostile.jsonl"
    path.write_bytes(jsonl([record]))
    note = notes_io.make_note(PAYLOADS[1], MORE["note"], "drop", node=PAYLOADS[0], author=PAYLOADS[0])
    notes_io.write_notes(tmp_path / notes_io.SIDECAR, [note])
    return path


def test_hostile_text_stays_inside_the_data(tmp_path):
    trace = hostile_rollout(tmp_path)
    _, page = bundle(tmp_path, str(trace))
    shell = outside_data(page)
    for payload in [*PAYLOADS[:2], *MORE.values()]:
        assert payload not in page
    assert "onerror" not in shell and "<script>window" not in shell and "srcdoc" not in shell
    data = page_data(page)
    (session,) = data["sessions"]
    assert session["session_id"] == PAYLOADS[1] and session["calls"][0]["id"] == PAYLOADS[0]
    assert session["details"]["0"]["messages"]["request"][0]["text"] == PAYLOADS[1]
    assert PAYLOADS[1] in data["title"]
    # the title is the one place Python writes trace text into markup: escaped
    assert "<title>&lt;/script&gt;" in page


@pytest.mark.parametrize("case", [c for c in cases() if not c.bomb], ids=lambda c: c.name)
def test_hostile_corpus_bundles_or_says_why(case, tmp_path, capsys):
    path = tmp_path / f"{case.name}{case.suffix}"
    case.write(path)
    out = tmp_path / "out.html"
    code = main(["bundle", str(path), "--out", str(out), *case.flags])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if code:
        assert code == 2 and err.startswith("rollout-graph: "), err
        return
    page = out.read_text(encoding="utf-8")
    assert outside_data(page).count("<script") == 1 and page.count("</script>") == 2
    ids = {c["id"] for s in page_data(page)["sessions"] for c in s["calls"]}
    assert set(case.loads) <= ids


def test_big_rollouts_keep_the_dag_and_say_what_is_left_out(tmp_path, capsys):
    out, page = bundle(tmp_path, str(VLLM), "--session", "fix-config-bug", "--max-detail", "1000", "--node", "c05")
    err = capsys.readouterr().err
    assert "token detail of 24 of 25 calls is left out" in err
    data = page_data(page)
    (session,) = data["sessions"]
    assert len(session["calls"]) == 25 and list(session["details"]) == ["4"]
    assert data["open"] == {"session": "fix-config-bug", "node": 4}
    command = session["left_out"]["command"]
    assert command.startswith(f"rollout-graph bundle {VLLM} --session fix-config-bug --calls ")
    # the command the page prints works: it embeds the calls named
    _, again = bundle(tmp_path, str(VLLM), "--session", "fix-config-bug", "--calls", "c11,c12", name="again.html")
    assert sorted(page_data(again)["sessions"][0]["details"]) == ["10", "11"]
    smaller = bundle(tmp_path, str(VLLM), "--session", "fix-config-bug", "--calls", "c11", name="one.html")[0]
    assert smaller.stat().st_size < out.stat().st_size * 2


def test_bad_arguments_are_one_line(tmp_path, capsys):
    assert main(["bundle", str(VLLM), "--node", "nope", "--out", str(tmp_path / "x.html")]) == 2
    assert "no call 'nope'" in capsys.readouterr().err
    assert main(["bundle", str(tmp_path / "missing"), "--out", str(tmp_path / "x.html")]) == 2
    assert "no such file" in capsys.readouterr().err
    bad = tmp_path / "notes.json"
    bad.write_text('{"version": 1, "notes": [\n{"session": "s"}\n]}')
    assert main(["bundle", str(VLLM), "--notes", str(bad), "--out", str(tmp_path / "x.html")]) == 2
    assert f"{bad}:2: a note names exactly one of" in capsys.readouterr().err
    assert not (tmp_path / "x.html").exists()
    (tmp_path / "file").write_text("")
    assert main(["bundle", str(VLLM), "--out", str(tmp_path / "file" / "x.html")]) == 3
    err = capsys.readouterr().err
    assert err.startswith("rollout-graph: cannot write") and "nothing written" in err


def test_notes_beside_the_traces_are_shown(tmp_path):
    trace = tmp_path / "traces"
    trace.mkdir()
    (trace / "agent-rollouts.jsonl").write_bytes((VLLM / "agent-rollouts.jsonl").read_bytes())
    note = notes_io.make_note("fix-config-bug", "<b>bad</b> tool output", "drop", node="c05", author="ana")
    notes_io.write_notes(trace / notes_io.SIDECAR, [note])
    _, page = bundle(tmp_path, str(trace), "--session", "fix-config-bug")
    (session,) = page_data(page)["sessions"]
    assert [n["text"] for n in session["notes"]] == ["<b>bad</b> tool output"]
    assert "<b>bad</b>" not in page


def test_library_bundle_of_several_rollouts():
    loaded = load_paths([VLLM])
    rollouts = [analyse(s) for s in loaded.sessions.values()]
    from rollout_graph.analysis.decode import TraceTextDecoder

    decoders = [TraceTextDecoder({}) for _ in rollouts]
    data = bundle_data(rollouts, decoders, BundleOptions(node="c03"))
    assert [s["session_id"] for s in data["sessions"]] == [r.session_id for r in rollouts]
    assert data["open"]["session"] == rollouts[0].session_id
    assert bundle_html(rollouts, decoders).startswith("<!doctype html>")


def test_a_big_rollout_embeds_the_notable_calls_that_fit(tmp_path):
    from rollout_graph.reports.bundle import _detail_cost, _notable

    rollout = analyse(load_paths([VLLM]).sessions["fix-config-bug"])
    _, page = bundle(tmp_path, str(VLLM), "--session", "fix-config-bug", "--max-detail", "60000")
    session = page_data(page)["sessions"][0]
    detailed = {int(k) for k in session["details"]}
    assert detailed and detailed <= set(_notable(rollout)) and len(detailed) < len(rollout.calls)
    assert sum(_detail_cost(rollout, i) for i in detailed) <= 60_000
    assert session["left_out"]["n"] == len(rollout.calls) - len(detailed)


def test_controls_are_shown_as_the_app_shows_them(tmp_path):
    from rollout_graph.escape import visible

    sneaky = "c1\u202eexe.txt\x1b[2J"
    record = vllm_chat(Turn(sneaky, [1, 2, 3], [7, 8], messages=[{"role": "user", "content": "a\u2066b\x00"}]))
    trace = tmp_path / "sneaky.jsonl"
    trace.write_bytes(jsonl([record]))
    _, page = bundle(tmp_path, str(trace))
    (session,) = page_data(page)["sessions"]
    assert session["calls"][0]["id"] == visible(sneaky) == "c1\\u202eexe.txt\\x1b[2J"
    assert session["details"]["0"]["messages"]["request"][0]["text"] == "a\\u2066b\\x00"
    assert "\u202e" not in page and "\x1b" not in page


def test_the_page_script_never_builds_markup_from_text():
    from importlib import resources

    script = resources.files("rollout_graph.reports").joinpath("bundle_template", "bundle.js").read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "fetch(",
                 "XMLHttpRequest", "import(", ".src", "href"):  # fmt: skip
        assert sink not in script, sink
    assert "JSON.parse" in script and "textContent" in script


def test_content_nested_deeper_than_the_encoder_allows_is_named_not_a_traceback(tmp_path, capsys):
    # the bundle reads message text through the app's display_text (one reader, depth-safe:
    # tests/core/test_messages.py nests it 100,000 deep)
    deep: object = "bottom"
    for _ in range(300):
        deep = [deep]
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "x", "v": deep}]},
        {"role": "user", "content": {"v": deep}},
        {"role": "user", "content": "hi", "meta": deep},
    ]
    record = vllm_chat(Turn("deep", [1, 2, 3], [7, 8], messages=messages))
    trace = tmp_path / "deep.jsonl"
    trace.write_bytes(jsonl([record]))
    _, page = bundle(tmp_path, str(trace))
    (session,) = page_data(page)["sessions"]
    assert [c["id"] for c in session["calls"]] == ["deep"]
    parts, whole, extra = session["details"]["0"]["messages"]["request"]
    assert parts["text"] == "look\n[x]"  # a part that is not text is named by its type, as in the app
    shown = display_text({"v": deep})
    assert whole["text"].startswith(shown[:2000]) and "more characters left out" in whole["text"]
    assert extra["text"] == "hi"
    assert extra["extra"].startswith("(not shown: ") and "Recursion limit" in extra["extra"]
    assert "Traceback" not in capsys.readouterr().err
