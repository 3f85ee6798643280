"""Audit tools on hand-built graphs whose answers are known, and on the bundled samples: where the
tokens went, fork and retry diffs, why a rollout split, context origin, retokenization, and the
`explain` command."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from tokenizers import Tokenizer

from rollout_graph.analysis.breaks import REASONS, prefix_breaks
from rollout_graph.analysis.decode import BUNDLED, SAMPLES, TokenizerDecoder
from rollout_graph.analysis.forks import fork_diffs
from rollout_graph.analysis.near_miss import COMPACTION, NEW_CONVERSATION, RETRY, SUBAGENT
from rollout_graph.analysis.origin import HARNESS, context_origin
from rollout_graph.analysis.retokenize import retokenize
from rollout_graph.analysis.token_flow import inherited_share, logprobs_by_role, lowest_tokens, token_flows
from rollout_graph.ingest.load.files import load_paths
from rollout_graph.pipeline import analyse
from tests.support.builders import TOOLS, Turn, rollout_of, rollout_of_tokens, vllm_chat

TOKENIZER = SAMPLES / "SmolLM2-135M-Instruct" / "tokenizer.json"


@pytest.fixture(scope="module")
def samples():
    return analyse(load_paths([SAMPLES / "vllm"]).sessions["fix-config-bug"])


def retry_rollout():
    # n0 -> (n1 retry discarded, n2 continued) -> n3
    return rollout_of_tokens(
        [([1, 2], [3]), ([1, 2, 3, 4], [5, 6]), ([1, 2, 3, 4], [5, 7, 8]), ([1, 2, 3, 4, 5, 7, 8, 9], [10])]
    )


def test_where_the_tokens_went():
    r = retry_rollout()
    whole, root = token_flows(r)
    assert (whole.n_calls, whole.sampled, whole.sampled_trained, whole.sampled_discarded) == (4, 7, 7, 2)
    assert (whole.context, whole.inherited) == (2 + 1 + 1 + 1, 0 + 3 + 3 + 7)
    assert root.label == "root n0" and root.sampled == whole.sampled
    assert inherited_share(r, 3) == 7 / 8 and inherited_share(r, 0) == 0.0
    by_role = logprobs_by_role(r)
    assert {k: v.shape[0] for k, v in by_role.items()} == {"agent": 5, "discarded": 2}
    r.calls[2].sampled_logprobs = np.array([-0.1, -9.0, -0.2])
    low = lowest_tokens(r, 2)
    assert (low[0].node, low[0].position, low[0].logprob) == (2, 1, -9.0)


def test_untrainable_tokens_are_counted():
    r = rollout_of_tokens([([1, 2], [3, 4])], logprobs=False)
    assert token_flows(r)[0].sampled_untrainable == 2


def test_fork_diff_names_the_divergence_and_top_k():
    records = [
        vllm_chat(Turn("p", [1, 2], [3], tools=TOOLS)),
        vllm_chat(Turn("a", [1, 2, 3, 4], [5, 6], logprobs=[-0.5, -1.0], tools=TOOLS)),
        vllm_chat(Turn("b", [1, 2, 3, 4], [5, 7], logprobs=[-0.5, -2.0], tools=TOOLS)),  # 7 = 6 + 1: in a's top-2
        vllm_chat(Turn("c", [1, 2, 3, 4], [9], logprobs=[-3.0], tools=TOOLS)),  # 9 not in a's top-2 at 0
        vllm_chat(Turn("d", [1, 2, 3, 4, 5, 7, 8], [1], tools=TOOLS)),
    ]
    r = rollout_of(records)
    diffs = {r.calls[d.other].node_id: d for d in fork_diffs(r, 0)}
    b, c = diffs["b"], diffs["c"]
    assert (b.divergence, b.original_token, b.other_token, b.original_logprob, b.other_logprob) == (1, 6, 7, -1.0, -2.0)
    assert b.other_in_original_top_k is True and b.same_prompt and r.calls[b.continued].node_id == "b"
    assert (c.divergence, c.other_in_original_top_k) == (0, False)


def test_why_it_split_on_the_samples(samples):
    reasons = {samples.calls[b.root].node_id: b.reason for b in prefix_breaks(samples)}
    assert reasons == {  # every root after the first (c02, the title call), each against an earlier call
        "c01": REASONS[NEW_CONVERSATION],  # the main conversation's first attempt, after the title call
        "c03": REASONS[RETRY],  # re-sends c01's prompt
        "c08": REASONS[SUBAGENT],
        "c18": REASONS[COMPACTION],
        "c19": REASONS[RETRY],  # re-sends c18's prompt
    }


def test_context_origin_of_a_child_and_of_a_rewritten_root():
    r = retry_rollout()
    source, logprob = context_origin(r, 3)  # prompt [1 2 | 3 | 4 | 5 7 8 | 9]
    assert source.tolist() == [HARNESS, HARNESS, 0, HARNESS, 2, 2, 2, HARNESS]
    assert np.isnan(logprob[0]) and logprob[2] == -0.5
    cut = rollout_of_tokens([([1, 2], [3, 4, 99]), ([1, 2, 3, 4, 98, 5], [6])])  # the harness cut token 99
    source, _ = context_origin(cut, 1)
    assert source.tolist() == [HARNESS, HARNESS, 0, 0, HARNESS, HARNESS]


def test_retokenization_finds_a_non_canonical_run():
    hf = Tokenizer.from_file(str(TOKENIZER))
    canonical = hf.encode("run pytest now").ids
    split = (
        hf.encode("run py").ids + hf.encode("test").ids + hf.encode(" now").ids
    )  # "py"+"test": never what encode gives
    assert split != canonical
    r = rollout_of_tokens([(canonical, [1]), (split, [2])])
    found = retokenize(r, TokenizerDecoder(TOKENIZER, BUNDLED))
    assert [m.node for m in found] == [1]
    assert found[0].position == len(hf.encode("run py").ids) - 1


def test_explain_command(samples):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "rollout_graph", "explain", str(SAMPLES / "vllm"), "--session", "fix-config-bug", *args],
                              capture_output=True, text=True)  # fmt: skip

    out = run()
    assert out.returncode == 0, out.stderr
    for heading in ("where the tokens went", "why it split", "forks and retries", "least likely sampled tokens"):
        assert heading in out.stdout
    assert f"c18: {REASONS[COMPACTION]}; nearly continued c16" in out.stdout
    assert "retries (discarded calls the harness re-sent with the same prompt): 6" in out.stdout
    assert "retokenization: every prompt survives decode -> encode" in out.stdout
    origin = run("--origin", "c11").stdout
    assert origin.startswith("origin of c11's prompt (682 tokens): 384 sampled earlier by the policy (c03 ")


def test_app_audit_panel_runs_the_retokenization_check(monkeypatch):
    from tests.support.apptest import app, no_errors

    at = app(monkeypatch)
    at = next(t for t in at.toggle if t.label.startswith("Audit")).set_value(True).run()
    button = next(b for b in at.button if b.label == "Decode and re-encode every prompt")
    button.click().run()
    no_errors(at)
    assert any("Every prompt survives decode -> encode" in s.value for s in at.success)


def test_origin_view_in_the_app(monkeypatch):
    from tests.support.apptest import app, html_of, no_errors

    at = app(monkeypatch, session="fix-config-bug", node="c11")
    next(t for t in at.toggle if t.label == "Whole prompt, coloured by origin").set_value(True).run()
    no_errors(at)
    page = html_of(at)
    assert "rg-o" in page and "sampled earlier by the policy: c03" in page


def test_fork_children_side_by_side_escaped():
    from rollout_graph.analysis.decode import TraceTextDecoder
    from rollout_graph.ui.panels.near_miss import fork_html

    r = retry_rollout()
    page = fork_html(r, 0, TraceTextDecoder({5: "<a>", 6: "six", 7: "seven"})).split("</style>", 1)[1]
    assert "n1 · discarded" in page and "n2 · continued · diverges at token 1" in page
    assert "&lt;a&gt;" in page and "<a>" not in page
    assert '<span class="rg-del">six' in page and '<span class="rg-ins">seven' in page


def test_fork_panel_in_the_app(monkeypatch):
    from tests.support.apptest import app, html_of, no_errors

    at = app(monkeypatch, session="fix-config-bug", node="c05")
    no_errors(at)
    assert any(e.label == "Fork: its 2 children, where each departs" for e in at.expander)
    assert '<b>c07</b> · <span class="went">went on</span>' in html_of(at)
