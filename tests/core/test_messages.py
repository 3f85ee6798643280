"""Message fallback (docs/semantics.md, "Message fallback"): linking calls from eval endpoints that return no token ids."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from rollout_graph.core.linking import message_parents
from rollout_graph.core.messages import MAX_DISPLAY_DEPTH, canonical, display_text
from tests.support.builders import Turn, examples, message_only, rollout_of
from tests.support.reference import reference_message_parents

SYSTEM = {"role": "system", "content": "You are an agent."}
USER = {"role": "user", "content": "list the files"}


def tool_call(arguments, call_id="call_1"):
    return {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": arguments}}


def assistant(arguments, **extra):
    return {"role": "assistant", "content": None, "tool_calls": [tool_call(arguments)], **extra}


def two_turns(first_reply: dict, replayed: dict, system_again: dict = SYSTEM):
    first = message_only(Turn("c0", None, [], messages=[SYSTEM, USER]))
    first["response"]["choices"][0]["message"] = first_reply
    second = message_only(
        Turn(
            "c1",
            None,
            [],
            messages=[system_again, USER, replayed, {"role": "tool", "tool_call_id": "x", "content": "a.txt"}],
        )
    )
    return rollout_of([first, second])


def parent_of_second(rollout):
    return rollout.topology.parents[1]


def test_provider_whitespace_in_arguments_is_the_same_turn():
    r = two_turns(assistant('{"command": "ls"}'), assistant('{"command":"ls"}'))
    assert parent_of_second(r) == 0
    assert r.linked_by[1] == "messages"


def test_reordered_argument_keys_are_the_same_turn():
    r = two_turns(assistant('{"a": 1, "b": 2}'), assistant('{"b":2,"a":1}'))
    assert parent_of_second(r) == 0


def test_provider_noise_and_tool_call_ids_are_ignored():
    noisy = assistant('{"command": "ls"}', refusal=None, annotations=[], audio=None)
    replay = {"role": "assistant", "content": "", "tool_calls": [tool_call('{"command":"ls"}', call_id="other")]}
    assert parent_of_second(two_turns(noisy, replay)) == 0


def test_different_malformed_arguments_stay_different():
    r = two_turns(assistant('{"command": "ls"'), assistant('{"command": "pwd"'))
    assert parent_of_second(r) is None


def test_same_malformed_arguments_match_when_stripped():
    r = two_turns(assistant(' {"command": "ls" '), assistant('{"command": "ls"'))
    assert parent_of_second(r) == 0


def test_re_rendered_system_prompt_does_not_break_the_chain():
    rendered_again = {"role": "system", "content": "You are an agent. Today is Tuesday."}
    r = two_turns(assistant('{"command": "ls"}'), assistant('{"command": "ls"}'), system_again=rendered_again)
    assert parent_of_second(r) == 0


def test_list_content_is_reduced_to_its_text_parts():
    a = {"role": "user", "content": [{"type": "text", "text": "hello "}, {"type": "image_url", "image_url": {}}]}
    b = {"role": "user", "content": "hello"}
    assert canonical(a) == canonical(b)
    assert canonical({"role": "assistant", "content": None}) == canonical({"role": "assistant", "content": ""})


def test_a_rollout_of_message_only_calls_is_one_chain():
    history = [SYSTEM, USER]
    records = []
    for i in range(5):
        reply = assistant(json.dumps({"step": i}))
        rec = message_only(Turn(f"c{i}", None, [], messages=list(history)))
        rec["response"]["choices"][0]["message"] = reply
        records.append(rec)
        history += [assistant(json.dumps({"step": i}, separators=(",", ":"))), {"role": "tool", "content": f"out {i}"}]
    r = rollout_of(records)
    assert r.topology.roots == [0]
    assert r.topology.parents == [None, 0, 1, 2, 3]


messages = st.lists(
    st.sampled_from(
        [SYSTEM, USER, {"role": "user", "content": "again"}, assistant('{"a":1}'), {"role": "tool", "content": "x"}]
    ),
    max_size=5,
)


@settings(max_examples=examples(500), deadline=None)
@given(st.lists(st.tuples(messages, st.sampled_from(["ok", "no"])), min_size=1, max_size=8))
def test_message_fallback_matches_the_naive_reference(spec):
    records = []
    for i, (msgs, reply) in enumerate(spec):
        rec = message_only(Turn(f"c{i}", None, [], messages=msgs, reply=reply))
        records.append(rec)
    r = rollout_of(records)
    assert message_parents(r.calls) == reference_message_parents(r.calls)


def test_display_text_survives_hostile_nesting():
    """The chat transcript and the HTML bundle read message text through display_text: nesting a
    Python stack cannot hold is named, never a RecursionError."""
    nested: object = "bottom"
    for _ in range(100_000):
        nested = [{"type": "tool_result", "tool_use_id": "t", "content": nested}]
    text = display_text(nested)
    assert text.count("[tool_result t]") == MAX_DISPLAY_DEPTH + 1
    assert text.endswith(f"(not shown: tool results nested more than {MAX_DISPLAY_DEPTH} deep)")
    deep: object = "bottom"
    for _ in range(100_000):
        deep = {"k": deep}
    assert display_text(deep) == "(not shown: nested deeper than the JSON encoder can walk)"
    arguments = "[" * 100_000 + "]" * 100_000
    shown = display_text([{"type": "tool_use", "name": "ls", "input": arguments}])
    assert shown.startswith("[tool_use ls] [[[") and shown.endswith(
        "(not pretty-printed: nested deeper than the JSON decoder can walk)"
    )
    # ordinary content is unchanged
    assert display_text([{"type": "text", "text": "a"}, {"type": "image_url"}]) == "a\n[image_url]"
    assert display_text({"a": 1}) == '{\n  "a": 1\n}'
