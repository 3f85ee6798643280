"""Every break's kind in the bundled real-harness samples and the hand-made harness fixtures
(tests/fixtures/, issue 23) against one golden file, with and without a tokenizer: the request
messages alone must name each break. Regenerate with ``--regen`` after a reviewed change:

    .venv/bin/python tests/test_break_golden.py --regen
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from rollout_graph.analysis.decode import BUNDLED, SAMPLES, TokenizerDecoder
from rollout_graph.ingest.loading import load_paths
from rollout_graph.pipeline import analyse
from rollout_graph.reports.explain import explain_text

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden" / "breaks.json"
FILES = [
    *sorted((ROOT / "sample_traces" / "harnesses").glob("*.jsonl.gz")),
    *sorted((ROOT / "tests" / "fixtures").glob("*.jsonl")),
]
TOKENIZER = SAMPLES / "SmolLM2-135M-Instruct" / "tokenizer.json"


def breaks(path: Path, decoder=None) -> dict[str, dict[str, str]]:
    out = {}
    for sid, session in load_paths([path]).sessions.items():
        r = analyse(session, decoder=decoder)
        out[sid] = {
            r.calls[i].node_id: f"{m.kind} of {r.calls[m.earlier if m.later == i else m.other].node_id}"
            for i, m in sorted(r.near_misses.items())
        }
    return out


def golden() -> dict:
    return {path.relative_to(ROOT).as_posix(): breaks(path) for path in FILES}


def test_every_break_matches_the_golden_file_without_a_tokenizer():
    assert golden() == json.loads(GOLDEN.read_text())


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_a_tokenizer_names_the_same_breaks(path):
    expected = json.loads(GOLDEN.read_text())[path.relative_to(ROOT).as_posix()]
    assert breaks(path, TokenizerDecoder(TOKENIZER, BUNDLED)) == expected


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


if __name__ == "__main__" and "--regen" in sys.argv:
    GOLDEN.write_text(json.dumps(golden(), indent=2, ensure_ascii=False) + "\n")
    print(GOLDEN)
