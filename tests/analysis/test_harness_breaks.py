"""Every break of the bundled real-harness samples (sample_traces/harnesses/) and the hand-made
harness fixtures (tests/fixtures/, issue 23) against one golden file, tests/golden/breaks.json:
for each call that starts a root, a branch of a fork, is discarded or has a near miss, its place,
the one classifier's cause (near-miss kind), the call it is named against, and the findings that
name it. The request messages alone must name each break (a tokenizer changes nothing), and
``inspect``, ``explain`` and ``tail`` (the file replayed one record at a time, and the CLI on the
complete file) give every call the same kind in the same words.

The golden file is written by ``tools/run_harness_samples.py`` (``--golden`` rewrites it from the
bundled traces without running a harness); review the diff."""

from __future__ import annotations

import gzip
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from rollout_graph.analysis.decode import BUNDLED, SAMPLES, TokenizerDecoder
from rollout_graph.ingest.load.files import load_paths
from rollout_graph.pipeline import analyse
from rollout_graph.reports.explain import explain_text
from tests.cli.test_tail_kinds import last_misses, tail_kinds

ROOT = Path(__file__).resolve().parents[2]
TOKENIZER = SAMPLES / "SmolLM2-135M-Instruct" / "tokenizer.json"


def _runner():
    spec = importlib.util.spec_from_file_location("run_harness_samples", ROOT / "tools" / "run_harness_samples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


RUNNER = _runner()
FILES = RUNNER.break_files()
GOLDEN = json.loads(RUNNER.BREAKS.read_text())


def _key(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _cli(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "rollout_graph", *args, "--no-cache"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _records(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def test_every_bundled_sample_and_fixture_is_in_the_golden_file():
    assert sorted(GOLDEN) == sorted(_key(p) for p in FILES)
    assert any(k.startswith("sample_traces/harnesses/") for k in GOLDEN)


def test_every_break_matches_the_golden_file():
    assert RUNNER.breaks_golden() == GOLDEN


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_a_tokenizer_names_the_same_breaks(path):
    assert RUNNER.breaks(path, TokenizerDecoder(TOKENIZER, BUNDLED)) == GOLDEN[_key(path)]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_inspect_explain_and_tail_give_each_call_the_same_kind_and_words(path, tmp_path):
    golden = GOLDEN[_key(path)]
    inspected = json.loads(_cli("inspect", str(path), "--json"))
    explained = _cli("explain", str(path))
    for session in inspected["sessions"]:
        misses = {n["node_id"]: n["near_miss"] for n in session["nodes"] if n.get("near_miss")}
        causes = {k: (v["cause"], v.get("of")) for k, v in golden[session["session_id"]]["calls"].items() if v["cause"]}
        assert {k: (m["kind"], m["node_id"]) for k, m in misses.items()} == causes
        for node, miss in misses.items():
            assert miss["why"] in explained, (node, miss["why"])
        # tail: the file's records arriving one at a time, then the CLI on the complete file
        records = [r for r in _records(path) if str(r.get("session_id")) == session["session_id"]] or _records(path)
        tailed, _ = tail_kinds(tmp_path / f"{session['session_id']}.jsonl", records)
        expected = {k: (m["kind"], m["node_id"], m["why"]) for k, m in misses.items()}
        assert tailed == expected
        lines = _cli("tail", str(path), "--json", "--until-idle", "0", "--session", session["session_id"])
        assert last_misses([json.loads(line) for line in lines.splitlines()]) == expected


def _rollout(name: str):
    session = next(iter(load_paths([ROOT / "tests" / "fixtures" / name]).sessions.values()))
    return analyse(session)


def test_qwen_token_limit_chain_reads_as_one_conversation():
    r = _rollout("qwen-token-limit.jsonl")
    text = explain_text(r, TokenizerDecoder(TOKENIZER, BUNDLED))
    assert "qwen-code-00001 -> qwen-code-00002 -> qwen-code-00003 -> qwen-code-00004: one conversation" in text
    assert "sampled ' py|test' vs replayed ' pytest'" in text
    assert "unfinished_attempts" not in {f.code for f in r.findings}
    finding = next(f for f in r.findings if f.code == "retokenized_replay")
    assert finding.level == "WARN"  # 2 ids of each 11-13 token reply: under a quarter
    assert "3 calls replay the model's own reply" in finding.detail and "6 of the 35 replayed" in finding.detail
    memory = r.near_misses[r.index_of("qwen-code-00006")]
    assert memory.kind == "side_call" and "pasted into a user message" in memory.evidence


def test_claude_continue_names_the_dropped_turns():
    r = _rollout("claude-continue.jsonl")
    resumed = r.index_of("claude-code-00006")
    assert r.topology.parents[resumed] == r.index_of("claude-code-00002")  # the fork at the last shared call
    text = explain_text(r, TokenizerDecoder(TOKENIZER, BUNDLED))
    line = next(x for x in text.splitlines() if "claude-code-00006 is no rival" in x)
    assert "resumed" in line and "120 s after claude-code-00005 ended" in line
    assert "dropped 3 messages (user 'Output token limit hit. Resume directly…' ×3)" in line


# -- the harness rejected a reply and asked again (mini-swe-agent's format errors) -----------------

SYSTEM_MSG = {"role": "system", "content": "You are a shell agent. Answer with one bash tool call."}
TASK_MSG = {"role": "user", "content": "Fix the failing test."}
LS = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]}  # fmt: skip
LISTING = {"role": "tool", "tool_call_id": "c1", "content": "README.md\nconfiglib\ntests"}
FORMAT_ERROR = {
    "role": "user",
    "content": "Tool call error: No tool calls found in the response. Every response MUST include one.",
}
LENGTH_CUT = {"role": "user", "content": "Your previous response reached the output token limit before a tool call."}


def _rejections(*extra: dict) -> list[dict]:
    """p (the steered ls), then a: a reply without a tool call; b re-asks after a format error.
    The ids: b's prompt is a's prompt with the format error where a's reply would be."""
    from tests.support.builders import Turn, vllm_chat

    history = [SYSTEM_MSG, TASK_MSG, LS, LISTING]
    p = Turn("p", list(range(1, 41)), [41, 42], messages=[SYSTEM_MSG, TASK_MSG])
    a = Turn("a", list(range(1, 43)) + [43, 44, 45], [46, 47, 48], messages=history, reply="I think the bug is")
    b_prompt = list(range(1, 43)) + [43, 44, 90, 91, 92, 93]
    b = Turn("b", b_prompt, [60, 61], messages=history + list(extra), reply="Let me look")
    return [vllm_chat(t) for t in (p, a, b)]


def _misses(records: list[dict], tmp_path: Path) -> dict[str, tuple[str, str, str]]:
    from rollout_graph.analysis.near_miss import describe
    from tests.support.builders import jsonl

    path = tmp_path / "t.jsonl"
    path.write_bytes(jsonl(records))
    r = analyse(next(iter(load_paths([path]).sessions.values())))
    return {
        r.calls[i].node_id: (m.kind, r.calls[m.other].node_id, describe(r.calls, m)) for i, m in r.near_misses.items()
    }


def test_a_reply_left_out_and_a_format_error_added_is_rejected(tmp_path):
    misses = _misses(_rejections(FORMAT_ERROR), tmp_path)
    kind, other, why = misses["b"]
    assert (kind, other) == ("rejected", "a")
    assert why == (
        "rejected: b asks again without a's reply [the same history, a's reply left out, then user "
        "'Tool call error: No tool calls found in…' added]"
    )


def test_two_harness_messages_are_both_named(tmp_path):
    _, _, why = _misses(_rejections(LENGTH_CUT, FORMAT_ERROR), tmp_path)["b"]
    assert "user 'Your previous response reached the outp…', user 'Tool call error: No tool calls found in…'" in why


def test_a_replayed_reply_is_not_rejected(tmp_path):
    """The same shape with a's reply kept before the new message: a continuation in text, not a
    rejection (a broken replay or an exact child, whatever the ids say)."""
    reply = {"role": "assistant", "content": "I think the bug is"}
    misses = _misses(_rejections(reply, FORMAT_ERROR), tmp_path)
    assert misses.get("b", ("",))[0] != "rejected"


def test_an_assistant_message_added_is_not_rejected(tmp_path):
    other = {"role": "assistant", "content": "Something the harness wrote for the model"}
    misses = _misses(_rejections(other, FORMAT_ERROR), tmp_path)
    assert misses.get("b", ("",))[0] != "rejected"


def test_a_root_re_sent_with_the_same_prompt_is_not_called_unrelated():
    """qwen-code's first call cut at the cap, re-sent identical with a larger max_tokens, and the
    re-send continued: the re-send (a root too) names the first call it re-sent (never "shares no
    token with any earlier call"), and the discarded first call says which later call replaced it."""
    from rollout_graph.analysis.breaks import UNRELATED, prefix_breaks
    from rollout_graph.analysis.near_miss import describe
    from tests.support.builders import Turn, rollout_of, vllm_chat

    first = Turn("first", [1, 2, 3, 4], [5, 6], finish="length")
    again = Turn("again", [1, 2, 3, 4], [7, 8], finish="length")
    replay = Turn("replay", [1, 2, 3, 4, 7, 8, 9, 10], [11])
    r = rollout_of([vllm_chat(t) for t in (first, again, replay)])
    assert r.topology.roots == [0, 1] and 0 not in r.near_misses  # nothing came before the first call
    breaks = {r.calls[b.root].node_id: b for b in prefix_breaks(r)}
    assert breaks["again"].reason != UNRELATED
    assert all(b.reason != UNRELATED for b in breaks.values())
    resend = r.near_misses[1]  # the re-send's own near miss: what tail prints when it arrives
    assert (resend.kind, resend.earlier, resend.later, resend.node) == ("retry", 0, 1, 1)
    assert describe(r.calls, resend) == "retry: again re-sends first's prompt [the identical prompt ids]"
    replaced = r.replaced_by[0]  # the discarded first call: which later call replaced it
    assert (replaced.kind, replaced.node, replaced.later) == ("retry", 0, 1)
    assert r.stats["n_discarded_retries"] == 1  # counted once
