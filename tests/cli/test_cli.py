"""`rollout-graph inspect`: the readable summary, the JSON contract (docs/cli.md, "The JSON contract") and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.builders import ROLLOUT, TOOLS, Turn, vllm_chat, write


def run(*args):
    return subprocess.run([sys.executable, "-m", "rollout_graph", *args], capture_output=True, text=True)


def trace(tmp_path):
    records = [vllm_chat(t) for t in ROLLOUT] + ["garbage"]
    return write(tmp_path / "trace.jsonl", records)


def test_json_contract(tmp_path):
    out = run("inspect", str(trace(tmp_path)), "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["load"]["records"] == 6 and doc["load"]["loaded"] == 5
    assert doc["load"]["skipped"][0]["line"] == 6
    (session,) = doc["sessions"]
    assert session["session_id"] == "s1"
    assert {k: session["stats"][k] for k in ("n_turns", "n_roots", "n_leaves", "n_forks", "n_discarded")} == {
        "n_turns": 5,
        "n_roots": 2,
        "n_leaves": 3,
        "n_forks": 1,
        "n_discarded": 1,
    }
    first = session["nodes"][0]
    assert {
        k: first[k] for k in ("node_id", "index", "parent_id", "root_id", "n_prompt", "n_sampled", "discarded")
    } == {
        "node_id": "c0",
        "index": 0,
        "parent_id": None,
        "root_id": "c0",
        "n_prompt": 3,
        "n_sampled": 2,
        "discarded": False,
    }
    assert [n["index"] for n in session["nodes"]] == list(range(5))
    assert [s["leaf_id"] for s in session["sequences"]] == ["c1", "c3", "t0"]
    seq = session["sequences"][1]
    assert seq["node_ids"] == ["c0", "c2", "c3"] and seq["role"] == "agent" and seq["input_ids"] == []
    assert {"level", "code", "node_id", "detail"} <= set(session["findings"][0])


def test_json_tokens_are_complete(tmp_path):
    doc = json.loads(run("inspect", str(trace(tmp_path)), "--json", "--tokens").stdout)
    seq = doc["sessions"][0]["sequences"][1]
    assert seq["input_ids"] == [1, 2, 3, 4, 5, 6, 8, 9, 10, 11]
    assert seq["loss_mask"] == [0, 0, 0, 1, 1, 0, 1, 1, 0, 1]
    assert seq["logprobs"][3:5] == [-0.25, -1.5]


def test_readable_summary(tmp_path):
    out = run("inspect", str(trace(tmp_path)))
    assert out.returncode == 0
    assert "6 records, 5 loaded, 1 skipped" in out.stdout
    assert "trace.jsonl:6: not JSON" in out.stdout
    assert "calls 5 · roots 2 · forks 1 · discarded 1 · leaves 3" in out.stdout
    assert "WARN" in out.stdout and "discarded_turns" in out.stdout


def test_session_filter_and_unknown_session(tmp_path):
    records = [vllm_chat(Turn("a", [1], [2], session="x")), vllm_chat(Turn("b", [1], [2], tools=TOOLS, session="y"))]
    path = write(tmp_path / "two.jsonl", records)
    doc = json.loads(run("inspect", str(path), "--json", "--session", "y").stdout)
    assert [s["session_id"] for s in doc["sessions"]] == ["y"]
    out = run("inspect", str(path), "--session", "nope")
    assert out.returncode == 2 and "no session 'nope'" in out.stderr


def test_unreadable_path_exits_2(tmp_path):
    out = run("inspect", str(tmp_path / "missing.jsonl"), "--json")
    assert out.returncode == 2 and "cannot read" in out.stderr and not out.stdout


def test_directory_without_traces_exits_2(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    out = run("inspect", str(tmp_path))
    assert out.returncode == 2 and "no trace files" in out.stderr


def test_an_empty_file_is_readable_and_empty(tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    out = run("inspect", str(tmp_path / "empty.jsonl"), "--json")
    assert out.returncode == 0 and json.loads(out.stdout)["load"]["records"] == 0


def test_directory_is_read_recursively(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    write(tmp_path / "a" / "b" / "deep.jsonl", [vllm_chat(Turn("x", [1], [2]))])
    doc = json.loads(run("inspect", str(tmp_path), "--json").stdout)
    assert doc["load"]["loaded"] == 1 and doc["load"]["files"][0].endswith("deep.jsonl")


def test_findings_do_not_change_the_exit_code(tmp_path):
    path = write(tmp_path / "fatal.jsonl", [vllm_chat(Turn("a", [1], [2], logprobs=[3.0]))])
    out = run("inspect", str(path), "--json")
    assert out.returncode == 0
    assert json.loads(out.stdout)["sessions"][0]["finding_counts"]["FATAL"] >= 1


def test_console_script_is_installed():
    import shutil

    exe = shutil.which("rollout-graph", path=str(__import__("pathlib").Path(sys.executable).parent))
    assert exe is not None
    assert subprocess.run([exe, "--help"], capture_output=True).returncode == 0
