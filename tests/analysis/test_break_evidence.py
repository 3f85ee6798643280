"""The break, readable (graph/analysis/breaks.py data, views/builders/breaks.py HTML): tokens as
boxes with their ids, whitespace made visible, the first differing id marked; a text diff that
never marks identical text as changed (a property test on random texts); every trace string
escaped."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rollout_graph.analysis.breaks import (
    DELETED,
    INSERTED,
    SAME,
    UNSEEN,
    boundary_tokens,
    break_diff,
    break_tokens,
    text_diff,
    visible,
    word_head,
)
from rollout_graph.analysis.decode import BUNDLED, SAMPLES, TokenizerDecoder, TraceTextDecoder
from rollout_graph.ui.builders.breaks import break_html, token_boxes
from tests.analysis.test_near_miss import END, GEN, NL, SYSTEM, TOOL, USER, rollout
from tests.analysis.test_near_miss_kinds import build, retokenized_spec
from tests.support.builders import examples

CHECKED = settings(max_examples=examples(2000), deadline=None, suppress_health_check=[HealthCheck.too_slow])
TOKENIZER = SAMPLES / "SmolLM2-135M-Instruct" / "tokenizer.json"
_chars = st.sampled_from(list("ab \n\tcd.é<>&") + ["word", "loader", " the", "\u202e", "<script>"])
_texts = st.lists(_chars, max_size=30).map("".join)


def _common_head(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


@CHECKED
@given(a=_texts, b=_texts, a_cut=st.booleans(), b_cut=st.booleans())
def test_the_text_diff_never_marks_identical_text_as_changed(a, b, a_cut, b_cut):
    parts = text_diff(a, b, a_cut, b_cut)
    ops = [op for op, _ in parts]
    assert all(text for _, text in parts) and all(x != y for x, y in zip(ops, ops[1:], strict=False))
    # each side is rebuilt from the same parts and its own changes
    side_a = "".join(
        t for op, t in parts if op == SAME or op == DELETED or (op == UNSEEN and _unseen_from(a, b, parts) == "a")
    )
    side_b = "".join(
        t for op, t in parts if op == SAME or op == INSERTED or (op == UNSEEN and _unseen_from(a, b, parts) == "b")
    )
    assert (side_a, side_b) == (a, b)
    if a == b:
        assert parts == ([(SAME, a)] if a else [])
    head = word_head(a, b)  # the shared head, to a word's edge, is never marked
    assert head <= _common_head(a, b) and (not head or (parts[0][0] == SAME and len(parts[0][1]) >= head))
    tail = word_head(a[head:][::-1], b[head:][::-1])
    if tail and not (a_cut or b_cut):
        assert parts[-1][0] == SAME and len(parts[-1][1]) >= tail
    for (op1, t1), (op2, t2) in zip(parts, parts[1:], strict=False):
        assert not (op1 == DELETED and op2 == INSERTED and t1 == t2)  # a replacement is never the same text
    assert all(op != UNSEEN for op, _ in parts[:-1])  # only what a window cut off, at the end


def _unseen_from(a: str, b: str, parts) -> str | None:
    """Which side an ``unseen`` tail came from: the side whose text it completes."""
    if not parts or parts[-1][0] != UNSEEN:
        return None
    rest = "".join(t for op, t in parts[:-1] if op in (SAME, DELETED))
    return "a" if rest + parts[-1][1] == a else "b"


def test_a_window_that_cut_the_other_side_is_not_a_change():
    assert text_diff("the loader reads x", "the loader reads", b_cut=True) == [
        (SAME, "the loader reads"),
        (UNSEEN, " x"),
    ]
    assert text_diff("the loader reads x", "the loader reads") == [(SAME, "the loader reads"), (DELETED, " x")]


def test_whitespace_is_made_visible():
    assert visible("a b\n\tc\r") == "a·b↵→c␍"


def test_a_re_tokenized_replay_shows_both_cuttings_as_boxes_with_ids():
    from tokenizers import Tokenizer

    hf = Tokenizer.from_file(str(TOKENIZER))
    decoder = TokenizerDecoder(TOKENIZER, BUNDLED)
    r = build(retokenized_spec(hf), decoder=decoder)
    miss = r.near_misses[1]
    sampled, replayed = boundary_tokens(r, miss, decoder)
    assert "".join(t.text for t in sampled) == "".join(t.text for t in replayed) and sampled != replayed
    assert [t.id for t in sampled] != [t.id for t in replayed] and all(isinstance(t.id, int) for t in sampled)
    page = token_boxes(sampled, 0)
    for t in sampled:  # every token's id is shown, and its text (never a bare bar or an empty box)
        assert f'<span class="i">{t.id}</span>' in page
    assert page.count('class="rg-box first"') == 1
    tokens = break_tokens(r, miss, decoder)
    diff = break_diff(r, miss, decoder, tokens)
    # the reply is the same text on both sides: nothing of it is struck or inserted; what follows it
    # in the later prompt (the tool result the harness added) is the only insertion
    assert not [t for op, t in diff if op == DELETED]
    assert [t for op, t in diff if op == INSERTED] == [
        "\n<|im_start|>tool\n3 passed<|im_end|>\n<|im_start|>assistant\n"
    ]
    assert (
        tokens.earlier.tokens[tokens.earlier.first_difference].id
        != tokens.later.tokens[tokens.later.first_difference].id
    )


def test_a_stop_string_cut_marks_the_first_differing_id_and_escapes_the_trace():
    first = SYSTEM + USER + GEN
    r = rollout([(first, [50, 51, 52, 99]), (first + [50, 51, 52, 98, END, NL] + TOOL + [60, END, NL] + GEN, [70])])
    miss = r.near_misses[1]
    decoder = TraceTextDecoder({99: "<stop>\n", 98: "</tool> ", 50: "ls", 51: " -", 52: "la"})
    tokens = break_tokens(r, miss, decoder)
    assert [t.id for t in tokens.earlier.tokens][tokens.earlier.first_difference] == 99
    assert [t.id for t in tokens.later.tokens][tokens.later.first_difference] == 98
    page = break_html(tokens, break_diff(r, miss, decoder, tokens))
    assert "<stop>" not in page and "</tool>" not in page.replace("&lt;/tool&gt;", "")
    assert "&lt;stop&gt;↵" in page and "&lt;/tool&gt;·" in page  # whitespace shown, markup escaped
    assert re.search(r'class="rg-box first"[^>]*><span class="t">&lt;stop&gt;↵</span><span class="i">99</span>', page)
    plain = break_html(tokens, break_diff(r, miss, decoder, tokens), whitespace=False)
    assert "↵" not in plain.split("</div>", 1)[1] or "&lt;stop&gt;\n" in plain
    shared = "".join(t.text for t in tokens.earlier.tokens[: tokens.earlier.first_difference])
    diff = break_diff(r, miss, decoder, tokens)
    assert diff[0][0] == SAME and diff[0][1].startswith(shared)  # the shared head is plain text
