"""Re-tokenized replays found from the text (issue 23): the request carries an earlier call's reply
unchanged, the prompt ids diverge inside it. The two reproductions from the issue, chains, the
counts and findings that must not call such calls retries or unfinished attempts, and export."""

from __future__ import annotations

from rollout_graph.analysis.breaks import replay_details
from rollout_graph.analysis.decode import TraceTextDecoder
from rollout_graph.analysis.near_miss import RETOKENIZED, REWRITTEN, describe, replay_chains
from rollout_graph.reports import export
from rollout_graph.reports.explain import explain_text
from tests.support.builders import Turn, rollout_of, vllm_chat

SYSTEM = list(range(100, 110))
USER = [7, 8]
GEN = [1, 5]  # "<|im_start|>assistant\n"
END, NL = 2, 3
LIMIT = [60, 61]  # "<|im_start|>user\nOutput token limit hit. Resume directly<|im_end|>\n"
SYS_MSG = {"role": "system", "content": "You are an agent."}
TASK = {"role": "user", "content": "fix the bug"}


def turn(call_id, prompt, sampled, history, reply, finish="stop"):
    return vllm_chat(Turn(call_id, prompt, sampled, messages=[SYS_MSG, *history], reply=reply, finish=finish))


def discarded_continuer_direction():
    """A -> B -> D, and C replays B's reply re-tokenized (30|31|32 becomes 33|32)."""
    a_prompt = SYSTEM + USER + GEN
    a = turn("A", a_prompt, [20, END], [TASK], "Looking.")
    b_prompt = a_prompt + [20, END, NL, 40, 41, END, NL] + GEN
    history = [TASK, {"role": "assistant", "content": "Looking."}, {"role": "user", "content": "go on"}]
    b = turn("B", b_prompt, [30, 31, 32], history, "run pytest", finish="length")
    d = turn("D", b_prompt + [30, 31, 32] + [50], [51, END], history, "done")
    replay = [*history, {"role": "assistant", "content": "run pytest"}, {"role": "user", "content": "limit hit"}]
    c = turn("C", b_prompt + [33, 32, END, NL] + LIMIT + GEN, [52, END], replay, "ok")
    return [a, b, d, c]


def replay_chain():
    """Three chained replays, each carrying the previous reply's text with other ids."""
    p_prompt = SYSTEM + USER + GEN
    p = turn("P", p_prompt, [20, END], [TASK], "Looking.")
    base = p_prompt + [20, END, NL, 40, 41, END, NL] + GEN
    history = [TASK, {"role": "assistant", "content": "Looking."}, {"role": "user", "content": "go on"}]
    records, prompt = [p], base
    sampled = {"X1": ([30, 31, 32], [33, 32]), "X2": ([34, 35], [36]), "X3": ([37, 38, 39], None)}
    for k, (name, (ids, replayed)) in enumerate(sampled.items()):
        text = f"part {k} of the answer"
        records.append(turn(name, prompt, ids, history, text, finish="length"))
        if replayed is not None:
            history = [*history, {"role": "assistant", "content": text}, {"role": "user", "content": "limit hit"}]
            prompt = prompt + replayed + [END, NL] + LIMIT + GEN
    return records


def test_discarded_continuer_direction_is_a_retokenized_replay_of_the_continued_call():
    r = rollout_of(discarded_continuer_direction())
    b, c = r.index_of("B"), r.index_of("C")
    assert r.topology.discarded == {c: b}  # the graph's flags stay the exact-prefix rules
    miss = r.near_misses[c]
    assert (miss.kind, miss.earlier, miss.later, miss.where) == (RETOKENIZED, b, c, "sampled")
    assert miss.common_prefix == r.calls[b].n_prompt  # the first sampled id already differs
    assert describe(r.calls, miss).startswith("broken replay (re-tokenized): C re-tokenizes B's reply")
    assert "(2 of 3 sampled tokens change ids; ids 30|31 became 33)" in describe(r.calls, miss)
    details = replay_details(r, miss)
    assert details.sampled == [30, 31] and details.replayed == [33]
    assert r.stats["n_discarded_retries"] == 0 and r.stats["n_retokenized"] == 1
    finding = next(f for f in r.findings if f.code == "retokenized_replay")
    assert finding.level == "FATAL"  # 2 of the reply's 3 sampled ids changed: more than a quarter
    assert "2 of the 3 replayed sampled tokens change ids" in finding.detail


def test_replay_chain_is_one_conversation_not_unfinished_attempts():
    r = rollout_of(replay_chain())
    x1, x2, x3 = (r.index_of(n) for n in ("X1", "X2", "X3"))
    assert r.topology.unfinished == [[x1, x2, x3]]  # exact graph: three sibling leaves of P
    assert [(m.earlier, m.later, m.kind) for m in (r.near_misses[x2], r.near_misses[x3])] == [
        (x1, x2, RETOKENIZED),
        (x2, x3, RETOKENIZED),
    ]
    assert replay_chains(r.calls, r.near_misses) == [[x1, x2, x3]]
    assert "unfinished_attempts" not in {f.code for f in r.findings}
    assert r.stats["n_unfinished"] == 0
    text = explain_text(r, TraceTextDecoder({}))
    assert "X1 -> X2 -> X3: one conversation" in text
    assert "sampled ids [30, 31] vs replayed ids [33] (no tokenizer" in text  # both cuttings, as ids
    assert "unfinished attempt" not in text.split("forks and retries")[1].split("least likely")[0]


def test_export_says_which_rows_carry_retokenized_history():
    r = rollout_of(replay_chain())
    rows = {row["leaf_id"]: row for row in export.training_rows(r)}
    assert rows["X1"]["retokenized_history"] == []
    assert rows["X2"]["retokenized_history"] == ["X1"]
    assert rows["X3"]["retokenized_history"] == ["X2"]


def test_an_edited_reply_found_from_the_text_is_a_rewrite():
    """The tool-call arguments come back re-serialised: a rewrite, not a re-tokenization."""
    prompt = SYSTEM + USER + GEN
    call = {"id": "t1", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "ls"}'}}
    first = vllm_chat(Turn("A", prompt, [30, 31, 32, END], messages=[SYS_MSG, TASK], reply=""))
    first["response"]["choices"][0]["message"]["tool_calls"] = [call]
    again = {**call, "function": {"name": "bash", "arguments": '{"cmd":"ls"}'}}
    replay = [SYS_MSG, TASK, {"role": "assistant", "content": "", "tool_calls": [again]}]
    second = vllm_chat(Turn("B", prompt + [30, 39, 32, END, NL] + GEN, [50], messages=replay))
    r = rollout_of([first, second])
    miss = r.near_misses[1]
    assert (miss.kind, miss.earlier) == (REWRITTEN, 0)
    assert "re-serialised" in miss.evidence


def test_a_replay_chain_the_harness_went_on_from_names_each_discarded_call_from_the_later_side():
    """The chain, then X4 continues X3 exactly: X1 and X2 are discarded (X3 continued), each because
    the next call replays its reply re-tokenized (its ``replaced_by``); none is a retry, and each
    near miss names the call before it."""
    records = replay_chain()
    last = records[-1]
    prompt = last["response"]["prompt_token_ids"] + last["response"]["choices"][0]["token_ids"] + [END, NL] + GEN
    history = [*last["request"]["messages"], {"role": "assistant", "content": "part 2 of the answer"}]
    records.append(turn("X4", prompt, [70, END], history + [{"role": "user", "content": "go on"}], "done"))
    r = rollout_of(records)
    x1, x2, x3 = (r.index_of(n) for n in ("X1", "X2", "X3"))
    assert r.topology.discarded == {x1: x3, x2: x3}
    assert [(m.earlier, m.later, m.kind) for m in (r.near_misses[x2], r.near_misses[x3])] == [
        (x1, x2, RETOKENIZED),
        (x2, x3, RETOKENIZED),
    ]
    assert [(m.node, m.later, m.kind) for m in (r.replaced_by[x1], r.replaced_by[x2])] == [
        (x1, x2, RETOKENIZED),
        (x2, x3, RETOKENIZED),
    ]
    assert x1 not in r.near_misses
    assert replay_chains(r.calls, r.near_misses) == [[x1, x2, x3]]
    assert r.stats["n_discarded_retries"] == 0 and r.stats["n_unfinished"] == 0
    text = explain_text(r, TraceTextDecoder({}))
    assert "discarded calls (a sibling continued): 2 (0 retries, 2 retokenized)" in text
