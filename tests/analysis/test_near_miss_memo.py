"""The near-miss pass's shortcuts on messages (graph/analysis/near_miss/texts.py) give exactly what the
plain functions give: a call's texts for the pasted-history check read without writing the history
keys (tool calls as JSON), on random messages with odd roles (None, numbers, NUL inside) and
contents."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rollout_graph.analysis.near_miss import texts as near_miss_texts
from rollout_graph.analysis.near_miss.texts import _history_texts, _inside, _pasted, _user_texts, _with_reply
from rollout_graph.core.records import Call
from rollout_graph.ingest.load.files import load_files
from rollout_graph.pipeline import analyse
from tests.support.builders import examples

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"

CHECKED = settings(max_examples=examples(1500), deadline=None, suppress_health_check=[HealthCheck.too_slow])

_words = st.sampled_from(["", " ", "a", "b c", "\0", "x\0y", " pasted text that is long enough to count ", "\t\n"])
_texts = st.lists(_words, max_size=4).map("".join)
_roles = st.sampled_from(["user", "assistant", "tool", "system", "developer", None, 3, "a\0b", "u\0\0v", ""])
_content = st.one_of(
    _texts, st.none(), st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": _texts}), max_size=2)
)
_tool_calls = st.lists(
    st.fixed_dictionaries({"function": st.fixed_dictionaries({"name": _texts, "arguments": _texts})}), max_size=2
)
_message = st.one_of(
    st.fixed_dictionaries({"role": _roles, "content": _content}, optional={"tool_calls": _tool_calls}),
    st.just("not a dict"),
)


@st.composite
def calls(draw):
    reply = draw(st.one_of(st.none(), st.fixed_dictionaries({"content": _content}, optional={"role": _roles})))
    messages = draw(st.one_of(st.none(), st.lists(_message, max_size=5)))
    return Call("n", "s", "mem", 1, "test", request_messages=messages, response_message=reply)


@CHECKED
@given(calls())
def test_history_texts_are_the_keys_second_fields(call):
    assert _history_texts(call) == [key.split("\0")[1] for key in _with_reply(call)]


def _plain_pasted(earlier: Call, later: Call) -> int:
    users = _user_texts(later)
    if not users:
        return 0
    texts = [key.split("\0")[1] for key in _with_reply(earlier)]
    return sum(
        1
        for t in texts
        if len(t) >= near_miss_texts.PASTED_MIN_CHARS and any(t in u and len(u) > len(t) for u in users)
    )


@CHECKED
@given(calls(), calls())
def test_pasted_is_the_count_from_the_history_keys(earlier, later):
    assert _pasted(earlier, later) == _plain_pasted(earlier, later)


def _near_misses_of_every_sample() -> list:
    found = []
    for path in sorted(SAMPLES.rglob("*.jsonl*")):
        loaded = load_files([str(path)], use_cache=False)
        found += [(path.name, analyse(s).near_misses) for s in loaded.sessions.values()]
    return found


def test_every_sample_with_the_plain_history_keys_finds_the_same(monkeypatch):
    fast = _near_misses_of_every_sample()
    assert sum(len(m) for _, m in fast) > 20  # the samples have near misses of many kinds
    monkeypatch.setattr(near_miss_texts, "_history_texts", lambda call: [k.split("\0")[1] for k in _with_reply(call)])
    assert _near_misses_of_every_sample() == fast


_letters = st.text(st.sampled_from("ab\0é"), max_size=80)


@CHECKED
@given(_letters, _letters, st.integers(0, 6), st.integers(0, 3))
def test_the_pasted_search_is_a_plain_substring_search(needle, haystack, head, tries):
    """Repetitive texts of a few letters: the lead found many times, the fallback after ``tries``."""
    assert _inside(needle, haystack) == (needle in haystack)
    assert _inside(needle, haystack, head, tries) == (needle in haystack)
    inside = haystack[len(haystack) // 3 : len(haystack) // 3 + len(needle)]
    assert _inside(inside, haystack, head, tries)


_long_letters = st.text(st.sampled_from("ab é"), min_size=0, max_size=1500)


@CHECKED
@given(_long_letters, st.data())
def test_the_pasted_search_with_its_long_lead_is_a_plain_substring_search(haystack, data):
    """Needles longer than the default lead (100 characters) in repetitive haystacks of a few
    letters: a cut of the haystack (found), the cut with one letter changed (found or not, as
    ``in`` says), and random text."""
    start = data.draw(st.integers(0, len(haystack)))
    size = data.draw(st.integers(0, 400))
    cut = haystack[start : start + size]
    assert _inside(cut, haystack)
    if cut:
        at = data.draw(st.integers(0, len(cut) - 1))
        changed = cut[:at] + data.draw(st.sampled_from("ab é")) + cut[at + 1 :]
        assert _inside(changed, haystack) == (changed in haystack)
    other = data.draw(_long_letters)
    assert _inside(other, haystack) == (other in haystack)


def test_the_pass_is_set_up_once_per_rollout_and_gives_what_two_set_ups_give(monkeypatch):
    """``analyse`` builds one near-miss pass for both directions (near misses, then the later call
    that replaced each dropped one); what it finds is what a pass built for each gives."""
    from rollout_graph.analysis.near_miss import search

    path = SAMPLES / "harnesses" / "qwen-code-token-limit.jsonl.gz"
    sessions = list(load_files([path]).sessions.values())
    built: list[int] = []
    original = search._Pass.__init__

    def counting(self, *args, **kwargs):
        built.append(1)
        original(self, *args, **kwargs)

    monkeypatch.setattr(search._Pass, "__init__", counting)
    rollouts = [analyse(session) for session in sessions]
    assert len(built) == len(sessions)
    for r in rollouts:
        misses = search.near_misses(r.calls, r.topology)
        assert misses == r.near_misses and misses
        assert search.replacements(r.calls, r.topology, misses) == r.replaced_by
    assert len(built) == 3 * len(sessions)  # (each called alone builds its own)
