"""What the near-miss pass reads back of request messages left in the file, against the plain pass.

``text_replays`` looks for requests that replay an earlier reply as text while their ids break
inside that reply's sampled span. It used to read every request's messages (its last assistant
message); it now reads only the requests whose prompt some earlier call with a reply could be
broken inside (``_Replies.may_replay``), a question the token ids answer. Every replay it finds
must be the one reading every request finds: on random traces with replies that repeat, prompts
that break anywhere in an earlier call's end ids, ids of both widths, prompts that are views of
one arena, arbitrary parents (a rollout document's), and groups small enough to be given up."""

from __future__ import annotations

import contextlib
import gzip
import io
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rollout_graph.analysis.near_miss import NearMiss, common_prefix, search, text_replays
from rollout_graph.analysis.near_miss import ids as near_miss
from rollout_graph.analysis.near_miss.ids import _breaks_inside_reply, _prompt
from rollout_graph.analysis.near_miss.search import REPLY_CANDIDATES, _replay_kind
from rollout_graph.analysis.near_miss.texts import _reply_key
from rollout_graph.cli import main
from rollout_graph.core.records import Call, MessagesInFile, SessionInput
from rollout_graph.pipeline import analyse
from tests.support.builders import examples

CHECKED = settings(max_examples=examples(1500), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def plain_last_assistant(call: Call) -> dict | None:
    for message in reversed(call.request_messages or ()):
        if isinstance(message, dict) and message.get("role") == "assistant":
            return message
    return None


def plain_text_replays(calls, parents, decoder=None) -> dict[int, NearMiss]:
    """text_replays as it was: every request's last assistant message read."""
    by_reply: dict[tuple, list[int]] = {}
    found: dict[int, NearMiss] = {}
    for i, call in enumerate(calls):
        replayed = plain_last_assistant(call) if call.prompt_ids is not None else None
        key = _reply_key(replayed) if replayed is not None else None
        if key is not None and key in by_reply:
            best = None
            for e in by_reply[key][-REPLY_CANDIDATES:]:
                if e == parents[i]:
                    best = None
                    break
                shared = common_prefix(calls[e], _prompt(call))
                if calls[e].n_prompt <= shared < calls[e].n_end and (best is None or shared > best[0]):
                    best = (shared, e)
            if best is not None:
                shared, e = best
                kind, checked, evidence = _replay_kind(calls[e], call, shared, replayed, decoder)
                earlier = calls[e]
                kept = min(1.0, max(0.0, (shared - earlier.n_prompt) / earlier.n_sampled)) if earlier.n_sampled else 0.0
                found[i] = NearMiss(i, e, e, i, shared, kept, "sampled", kind, checked, evidence, "replayed reply",
                                    (("reply_replayed", evidence),))  # fmt: skip
        reply = _reply_key(call.response_message) if call.prompt_ids is not None and call.n_sampled else None
        if reply is not None:
            by_reply.setdefault(reply, []).append(i)
    return found


_ids = st.lists(st.integers(0, 2), min_size=0, max_size=4)
REPLIES = [{"role": "assistant", "content": t} for t in ("yes", "no", "ok")]
REPLIES += [{"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "ls", "arguments": "{}"}}]}]


@st.composite
def replay_traces(draw, max_calls=14):
    """Calls whose requests carry earlier replies (a few texts, so replies repeat) and whose prompts
    continue, cut into or restart earlier end ids; some ids int64, some prompts views of one arena."""
    ends: list[list[int]] = []
    histories: list[list[dict]] = []
    calls: list[Call] = []
    arena = np.array(draw(st.lists(st.integers(0, 2), min_size=40, max_size=40)), dtype=np.int32)
    for k in range(draw(st.integers(1, max_calls))):
        move = draw(st.sampled_from(["continue", "cut", "retry", "root", "arena", "noids"]))
        j = draw(st.integers(0, len(calls) - 1)) if calls else None
        if j is None or move == "root" or calls[j].prompt_ids is None:
            prompt, history = draw(_ids), [{"role": "system", "content": "s"}]
        elif move == "continue":
            prompt, history = ends[j] + draw(_ids), histories[j]
        elif move == "cut":
            cut = draw(st.integers(0, len(ends[j])))
            prompt, history = ends[j][:cut] + draw(_ids), histories[j]
        else:
            prompt, history = list(calls[j].prompt_ids), histories[j][:-1] or histories[j]
        sampled = draw(_ids)
        reply = draw(st.sampled_from([*REPLIES, None]))
        replayed = draw(st.sampled_from([*REPLIES, None]))  # what the request carries as the last reply
        messages = history + ([replayed] if replayed is not None else []) + [{"role": "user", "content": "go"}]
        dtype = draw(st.sampled_from([np.int32, np.int64]))
        if move == "arena":
            ids = arena[: draw(st.integers(0, 40))]
        else:
            ids = np.array(prompt, dtype=dtype)
        call = Call(f"c{k}", "s", "t.jsonl", k + 1, "chat", prompt_ids=None if move == "noids" else ids,
                    sampled_ids=np.array(sampled, dtype=dtype), request_messages=messages,
                    response_message=dict(reply) if reply is not None else None)  # fmt: skip
        calls.append(call)
        ends.append([] if call.prompt_ids is None else call.prompt_ids.tolist() + sampled)
        histories.append(messages + ([dict(reply)] if reply is not None else []))
    parents = [draw(st.sampled_from([None, *range(i)])) for i in range(len(calls))]
    return calls, parents


@CHECKED
@given(replay_traces(), st.sampled_from([(16, 32), (1, 2), (2, 0), (3, 5)]))
def test_reading_only_requests_that_may_replay_finds_every_replay(trace, sizes):
    calls, parents = trace
    expected = plain_text_replays(calls, parents)
    lead, most = sizes
    saved = near_miss._Replies.LEAD, near_miss._Replies.MOST
    near_miss._Replies.LEAD, near_miss._Replies.MOST = lead, most
    try:
        assert text_replays(calls, parents) == expected
    finally:
        near_miss._Replies.LEAD, near_miss._Replies.MOST = saved


@CHECKED
@given(_ids, _ids, _ids, st.data())
def test_breaks_inside_reply_is_the_common_prefix_test(earlier_prompt, sampled, later, data):
    dtype_a, dtype_b = (
        data.draw(st.sampled_from([np.int32, np.int64])),
        data.draw(st.sampled_from([np.int32, np.int64])),
    )
    arena = np.array(earlier_prompt + later, dtype=dtype_a)
    if data.draw(st.booleans()):  # both views of one arena from the same start
        mine, prompt = arena[: len(earlier_prompt)], arena[: data.draw(st.integers(0, len(arena)))]
    else:
        mine = np.array(earlier_prompt, dtype=dtype_a)
        prompt = np.array(data.draw(st.sampled_from([later, earlier_prompt + later, earlier_prompt + sampled + later,
                                                     (earlier_prompt + sampled)[: data.draw(st.integers(0, 9))]])),
                          dtype=dtype_b)  # fmt: skip
    earlier = Call("e", "s", "t", 1, "chat", prompt_ids=mine, sampled_ids=np.array(sampled, dtype=dtype_b))
    shared = common_prefix(earlier, prompt)
    assert _breaks_inside_reply(earlier, prompt) == (earlier.n_prompt <= shared < earlier.n_end)


def test_a_conversation_that_continues_its_replies_reads_no_request(monkeypatch):
    """Each call continues the one before exactly: no request is read back for its replayed reply."""
    reads = []
    monkeypatch.setattr(search, "_last_assistant", lambda call: reads.append(call) or None)
    calls, end, history = [], [1, 2, 3], [{"role": "system", "content": "s"}]
    for k in range(6):
        sampled = [10 + k, 11 + k]
        reply = {"role": "assistant", "content": f"reply {k}"}
        calls.append(Call(f"c{k}", "s", "t", k + 1, "chat", prompt_ids=np.array(end, dtype=np.int32),
                          sampled_ids=np.array(sampled, dtype=np.int32), request_messages=list(history),
                          response_message=reply))  # fmt: skip
        end = end + sampled + [7]
        history = history + [dict(reply), {"role": "user", "content": "go"}]
    rollout = analyse(SessionInput("s", calls))
    assert reads == [] and rollout.near_misses == {}
    # one retry of a reply the next request breaks inside: that request is read, and replays it
    calls.insert(3, Call("r", "s", "t", 9, "chat", prompt_ids=calls[2].prompt_ids, sampled_ids=np.array([5, 5], dtype=np.int32),
                         response_message={"role": "assistant", "content": "reply 2"}))  # fmt: skip
    reads.clear()
    text_replays(calls, [None] * len(calls))
    assert calls[4] in reads


def plain_common_prefix(end: list[int], prompt: list[int]) -> int:
    n = 0
    while n < min(len(end), len(prompt)) and end[n] == prompt[n]:
        n += 1
    return n


@CHECKED
@given(_ids, _ids, st.lists(st.integers(0, 2), max_size=12), st.data())
def test_common_prefix_is_the_plain_walk(earlier_prompt, sampled, prompt, data):
    """The first difference found by ``argmax`` is the one the plain walk over the end ids finds."""
    widths = [data.draw(st.sampled_from([np.int32, np.int64])) for _ in range(3)]
    earlier = Call("e", "s", "t", 1, "chat", prompt_ids=np.array(earlier_prompt, dtype=widths[0]),
                   sampled_ids=np.array(sampled, dtype=widths[1]))  # fmt: skip
    if data.draw(st.booleans()):
        prompt = (earlier_prompt + sampled)[: data.draw(st.integers(0, 8))] + prompt
    assert common_prefix(earlier, np.array(prompt, dtype=widths[2])) == plain_common_prefix(
        earlier_prompt + sampled, prompt
    )


SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


def _inspect(path: Path) -> str:
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8", write_through=True)
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["inspect", "--json", "--no-cache", str(path)])
    return f"{code}\n{raw.getvalue().decode()}"


def test_every_sample_inspects_the_same_when_every_request_is_read(monkeypatch, tmp_path):
    """``inspect --json --no-cache``, as the console runs it, prints the same JSON whether the token
    test turns requests away or every request is read, on every bundled trace and one of them
    unzipped (a plain file; a re-tokenized replay among them)."""
    paths = sorted(p for p in SAMPLES.rglob("*.jsonl*"))
    plain = tmp_path / "claude-code-continue.jsonl"
    plain.write_bytes(gzip.decompress((SAMPLES / "harnesses" / "claude-code-continue.jsonl.gz").read_bytes()))
    paths.append(plain)
    fast = [_inspect(p) for p in paths]
    assert any('"kind": "retokenized"' in out or '"retokenized"' in out for out in fast)
    monkeypatch.setattr(near_miss._Replies, "may_replay", lambda self, i: True)
    MessagesInFile.forget()
    assert [_inspect(p) for p in paths] == fast


@CHECKED
@given(replay_traces())
def test_leads_that_share_a_hash_only_compare_more_calls(trace):
    """Every call in one group (as if every lead hashed alike): the same replays are found."""
    calls, parents = trace
    expected = plain_text_replays(calls, parents)
    saved = near_miss._Replies._lead, near_miss._Replies.MOST
    near_miss._Replies._lead, near_miss._Replies.MOST = (lambda self, i: 0), 1000  # type: ignore[method-assign]
    try:
        assert text_replays(calls, parents) == expected
    finally:
        near_miss._Replies._lead, near_miss._Replies.MOST = saved  # type: ignore[method-assign]
