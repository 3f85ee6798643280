"""Off-policy corrections (graph/signals/corrections.py, docs/corrections.md): the spec parser,
hand-computed rows for each correction at its band edges and with NaN/inf, the k1/k2/k3/ESS
figures, properties against the naive reference in tests/support/reference.py, and the join's keys."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rollout_graph.reports.contract import session_json
from rollout_graph.signals.corrections import (
    KINDS,
    LOG_BOUND,
    CorrectionError,
    apply,
    combine,
    default,
    divergence,
    evaluate,
    parse_correction,
    parse_corrections,
)
from rollout_graph.signals.join import attach, join_rollout, row_columns
from rollout_graph.signals.reading import parse_row
from tests.support.builders import Turn, rollout_of, vllm_chat
from tests.support.reference import reference_correction

NAN, INF = float("nan"), float("inf")
E20 = math.exp(LOG_BOUND)


def c(text: str):
    return parse_correction(text)


# --- the spec parser ---------------------------------------------------------------------------


def test_defaults_and_labels():
    assert c("token_tis").label == "token_tis:cap=2"
    assert c("token_mask").label == "token_mask:low=0.5,high=5"
    assert c("seq_tis").label == "seq_tis:cap=2"
    assert c("seq_mask").label == "seq_mask:low=0,high=3"
    assert c("geo_mask").label == "geo_mask:low=0.999,high=1.001"
    assert c(" token_mask : high=8 , low=0.125 ").params == (("low", 0.125), ("high", 8.0))  # prime-rl's band
    assert c("token_mask:high=8").as_dict() == {
        "name": "token_mask", "params": {"low": 0.5, "high": 8.0}, "label": "token_mask:low=0.5,high=8",
    }  # fmt: skip
    assert set(KINDS) == {"token_tis", "token_mask", "seq_tis", "seq_mask", "geo_mask"}
    # the same correction twice counts once, the order given is kept
    assert [x.label for x in parse_corrections(["seq_tis", "token_tis:cap=2", "token_tis"])] == [
        "seq_tis:cap=2", "token_tis:cap=2",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ("bogus", "unknown correction 'bogus'"),
        ("TIS:cap=2", "unknown correction 'TIS'"),
        ("token_tis:cup=2", "token_tis has no parameter 'cup' (its parameters: cap)"),
        ("token_tis:cap", "'cap' is not key=value"),
        ("token_tis:cap=two", "cap='two' is not a number"),
        ("token_tis:cap=nan", "cap must be a finite number >= 0"),
        ("token_tis:cap=inf", "cap must be a finite number >= 0"),
        ("token_mask:low=-1", "low must be a finite number >= 0"),
        ("token_tis:cap=0", "cap must be > 0"),
        ("token_tis:cap=1,cap=2", "cap is given twice"),
        ("geo_mask:low=2,high=1", "low 2 is above high 1"),
    ],
)
def test_a_bad_spec_says_what_is_wrong(spec, why):
    with pytest.raises(CorrectionError) as err:
        parse_correction(spec)
    assert why in str(err.value)
    assert spec in str(err.value)
    if "unknown correction" in why:  # lists what is known
        assert "token_tis:cap=2" in str(err.value) and "geo_mask:low=0.999,high=1.001" in str(err.value)


# --- hand-computed rows ------------------------------------------------------------------------


def test_token_tis_by_hand_with_the_edge_kept():
    # r = 3, 1, 0.5; position 3 not compared
    out = apply(c("token_tis:cap=2"), np.array([math.log(3), 0.0, math.log(0.5), NAN]))
    np.testing.assert_allclose(out.weights[:3], [2.0, 1.0, 0.5])
    assert math.isnan(out.weights[3])
    assert out.affected.tolist() == [True, False, False, False] and not out.masked.any()
    assert out.n_tokens == 3 and out.weight_lost == pytest.approx(1.0)
    # r == cap exactly (d = 0, cap 1) is not clipped: only r > cap is
    edge = apply(c("token_tis:cap=1"), np.array([0.0, 0.5, -0.5]))
    assert edge.affected.tolist() == [False, True, False]
    assert edge.weight_lost == pytest.approx(math.exp(0.5) - 1)


def test_token_mask_by_hand_with_the_edges_kept():
    out = apply(c("token_mask:low=0.5,high=2"), np.array([math.log(3), 0.0, math.log(0.25), NAN]))
    assert out.masked.tolist() == [True, False, True, False] == out.affected.tolist()
    np.testing.assert_allclose(out.weights[:3], [0.0, 1.0, 0.0])  # kept tokens keep their ratio (icepop)
    assert out.weight_lost == pytest.approx(3.25)
    # both edges kept: r == low == high == 1 stays
    edge = apply(c("token_mask:low=1,high=1"), np.array([0.0, 0.1, -0.1]))
    assert edge.masked.tolist() == [False, True, True]


def test_sequence_corrections_by_hand():
    d = np.array([math.log(2), math.log(2), NAN])  # R = 4, G = 2
    tis = apply(c("seq_tis:cap=2"), d)
    np.testing.assert_allclose(tis.weights[:2], [2.0, 2.0])
    assert tis.affected.tolist() == [True, True, False] and tis.row_ratio == pytest.approx(4.0)
    assert tis.weight_lost == pytest.approx(2.0)  # once per row: R - min(R, C)
    mask = apply(c("seq_mask:high=3"), d)
    assert mask.masked.tolist() == [True, True, False] and mask.weight_lost == pytest.approx(4.0)
    assert apply(c("seq_mask:high=5"), d).tokens_affected == 0
    assert apply(c("seq_mask:low=5,high=9"), d).tokens_affected == 2  # R below low
    geo = apply(c("geo_mask:low=0.9,high=1.1"), d)
    assert geo.row_ratio == pytest.approx(2.0) and geo.tokens_affected == 2 and geo.weight_lost == pytest.approx(2.0)
    assert apply(c("geo_mask:low=0.9,high=2.5"), d).tokens_affected == 0
    # the edges are kept: sum d = 0 exactly, so R = G = 1
    flat = np.array([0.25, -0.25])
    assert apply(c("seq_tis:cap=1"), flat).tokens_affected == 0
    assert apply(c("seq_mask:low=1,high=1"), flat).tokens_affected == 0
    assert apply(c("geo_mask:low=1,high=1"), flat).tokens_affected == 0


def test_infinities_are_bounded_and_nan_is_not_compared():
    d = np.array([INF, -INF, 0.0, NAN])
    tis = apply(c("token_tis:cap=2"), d)
    assert tis.affected.tolist() == [True, False, False, False]
    assert tis.weight_lost == pytest.approx(E20 - 2) and math.isfinite(tis.weight_lost)
    mask = apply(c("token_mask:low=0.5,high=2"), d)
    assert mask.masked.tolist() == [True, True, False, False]
    assert mask.weight_lost == pytest.approx(E20 + math.exp(-LOG_BOUND))
    # in a row's sum, +inf and -inf count as +20 and -20: R = exp(0) = 1
    assert apply(c("seq_mask:high=1.5"), d).row_ratio == pytest.approx(1.0)
    assert apply(c("seq_mask:high=3"), np.array([INF, 0.0])).weight_lost == pytest.approx(E20)
    # nothing compared: nothing affected, no ratio, no weight
    for name in KINDS:
        none = apply(default(name), np.array([NAN, NAN]))
        assert none.n_tokens == 0 and not none.affected.any() and none.weight_lost == 0.0
        assert np.isnan(none.weights).all()


def test_totals_and_divergence_by_hand():
    ev = evaluate([c("token_tis:cap=2")], [("a", np.array([math.log(3), 0.0, math.log(0.5)])), ("b", np.array([NAN]))])
    t = ev.as_list()[0]
    assert (t["n_tokens"], t["n_sequences"], t["tokens_affected"], t["sequences_affected"]) == (3, 1, 1, 1)
    assert t["share_tokens"] == pytest.approx(1 / 3) and t["weight_lost"] == pytest.approx(1.0)
    assert t["ess"] == pytest.approx(3.5**2 / (3 * 5.25))  # weights 2, 1, 0.5
    d = np.array([0.1, -0.5, 0.0, NAN])
    m = divergence(d)
    assert m["k1"] == pytest.approx(0.4 / 3)
    assert m["k2"] == pytest.approx((0.01 + 0.25) / 2 / 3)
    assert m["k3"] == pytest.approx(((math.exp(0.1) - 1.1) + (math.exp(-0.5) - 0.5)) / 3)
    r = np.exp([0.1, -0.5, 0.0])
    assert m["ess"] == pytest.approx(r.sum() ** 2 / (3 * (r * r).sum()))
    assert divergence(np.array([NAN])) == {"k1": None, "k2": None, "k3": None, "ess": None}
    # every weight masked: no ESS
    assert evaluate([c("seq_mask:high=0.5")], [("a", np.array([1.0]))]).as_list()[0]["ess"] is None


def test_where_two_corrections_disagree():
    d = np.array([math.log(3), math.log(0.25), 0.0])
    ev = evaluate([c("token_tis:cap=2"), c("token_mask:low=0.5,high=2")], [("row", d)])
    (pair,) = ev.disagreements()
    # tis clips token 0 (mask masks it too); the mask also masks token 1, which tis keeps untouched
    assert pair == {
        "a": "token_tis:cap=2", "b": "token_mask:low=0.5,high=2",
        "only_a": 0, "only_b": 1, "both": 1, "a_masks_b_keeps": 0, "b_masks_a_keeps": 1,
    }  # fmt: skip


# --- properties against the naive reference -----------------------------------------------------

values = st.one_of(
    st.floats(-3, 3, allow_nan=False),
    st.sampled_from([NAN, INF, -INF, 0.0, math.log(2), -math.log(2)]),
)
rows_strategy = st.lists(st.lists(values, min_size=0, max_size=12), min_size=0, max_size=6)
specs = st.sampled_from(
    ["token_tis", "token_tis:cap=1.2", "token_mask", "token_mask:low=0.8,high=1.25", "seq_tis", "seq_tis:cap=1.5",
     "seq_mask", "seq_mask:low=0.5,high=2", "geo_mask", "geo_mask:low=0.9,high=1.1"]
)  # fmt: skip


def _as_reference(rows):
    return [[None if math.isnan(x) else x for x in row] for row in rows]


@given(rows_strategy, specs)
def test_agrees_with_the_naive_reference(rows, spec):
    correction = c(spec)
    got = evaluate([correction], [(i, np.array(r, dtype=float)) for i, r in enumerate(rows)]).as_list()[0]
    want = reference_correction(correction.name, dict(correction.params), _as_reference(rows))
    for key in ("n_tokens", "n_sequences", "tokens_affected", "sequences_affected"):
        assert got[key] == want[key], key
    for key in ("share_tokens", "weight_lost", "ess"):
        assert (got[key] is None) == (want[key] is None), key
        if got[key] is not None:
            assert got[key] == pytest.approx(want[key], rel=1e-9, abs=1e-12), key


@given(rows_strategy)
def test_token_tis_with_a_cap_above_every_ratio_changes_nothing(rows):
    compared = [max(-LOG_BOUND, min(LOG_BOUND, x)) for r in rows for x in r if not math.isnan(x)]
    cap = math.exp(max(compared, default=0.0)) * 1.01
    for r in rows:
        d = np.array(r, dtype=float)
        out = apply(c(f"token_tis:cap={cap!r}"), d)
        compared = ~np.isnan(d)
        np.testing.assert_array_equal(out.weights[compared], np.exp(np.clip(d[compared], -LOG_BOUND, LOG_BOUND)))
        assert not out.affected.any() and out.weight_lost == 0.0


@given(rows_strategy, specs)
def test_never_more_tokens_affected_than_the_row_has_trainable(rows, spec):
    correction = c(spec)
    for r in rows:
        d = np.array(r, dtype=float)
        out = apply(correction, d)
        compared = int(np.count_nonzero(~np.isnan(d)))
        assert out.tokens_affected <= compared == out.n_tokens
        assert int(np.count_nonzero(out.masked)) <= out.tokens_affected
        assert not (out.affected & np.isnan(d)).any()  # never a position that was not compared
        assert out.weight_lost >= 0.0


@given(rows_strategy, st.randoms(use_true_random=False))
def test_a_permutation_of_rows_changes_no_total(rows, rnd):
    corrections = [c(s) for s in ("token_tis", "token_mask", "seq_tis", "seq_mask", "geo_mask")]
    keyed = [(i, np.array(r, dtype=float)) for i, r in enumerate(rows)]
    shuffled = list(keyed)
    rnd.shuffle(shuffled)
    a, b = evaluate(corrections, keyed), evaluate(corrections, shuffled)
    for x, y in zip(a.as_list(), b.as_list(), strict=True):
        assert {k: x[k] for k in ("n_tokens", "n_sequences", "tokens_affected", "sequences_affected")} == {
            k: y[k] for k in ("n_tokens", "n_sequences", "tokens_affected", "sequences_affected")
        }
        assert x["weight_lost"] == pytest.approx(y["weight_lost"], rel=1e-12)
        assert (x["ess"] is None) == (y["ess"] is None)
        if x["ess"] is not None:
            assert x["ess"] == pytest.approx(y["ess"], rel=1e-9)
    assert a.disagreements() == b.disagreements()


# --- through the join ----------------------------------------------------------------------------

# c0: prompt [1 2 3] samples [4 5]; c1 continues it (prompt [1..6]) and samples [7]. The one row
# (leaf c1) has trained positions 3, 4, 6 where d = +0.1, -0.5, 0.0 (as in tests/signals/test_signals.py).
CHAIN = [Turn("c0", [1, 2, 3], [4, 5], [-0.5, -1.0]), Turn("c1", [1, 2, 3, 4, 5, 6], [7], [-0.2])]
TRAINER = [None, 0.0, 0.0, -0.4, -1.5, 0.0, -0.2]


def test_the_join_reports_corrections_and_export_weights():
    rollout = rollout_of([vllm_chat(t) for t in CHAIN])
    row = parse_row({"session_id": "s1", "leaf_id": "c1", "trainer_logprobs": TRAINER}, 1)
    chosen = [c("token_mask:low=0.8,high=1.25"), c("seq_tis:cap=1")]
    joined = join_rollout(rollout, [row], 1.0, chosen)
    s = joined.summary()
    assert s["k1"] == pytest.approx(0.4 / 3) and s["k3"] == pytest.approx(s["kl_k3"])
    mask, tis = s["corrections"]
    assert (mask["label"], mask["tokens_affected"], mask["sequences_affected"]) == (
        "token_mask:low=0.8,high=1.25",
        1,
        1,
    )
    assert mask["share_tokens"] == pytest.approx(1 / 3) and mask["weight_lost"] == pytest.approx(math.exp(-0.5))
    # sum d = -0.4: R = 0.67 is under the cap: nothing clipped
    assert (tis["tokens_affected"], tis["sequences_affected"], tis["weight_lost"]) == (0, 0, 0.0)
    assert s["worst_tokens"][0] == {
        "leaf_id": "c1", "position": 4, "node_id": "c0", "d": pytest.approx(-0.5),
        "inference_logprob": -1.0, "trainer_logprob": pytest.approx(-1.5),
    }  # fmt: skip
    cols = row_columns(joined, 0)
    assert cols["correction_labels"] == ["token_mask:low=0.8,high=1.25", "seq_tis:cap=1"]
    weights = cols["correction_weights"][0]
    assert weights[:3] == [None, None, None] and weights[5] is None
    assert weights[3] == pytest.approx(math.exp(0.1)) and weights[4] == 0.0 and weights[6] == pytest.approx(1.0)
    assert cols["correction_weights"][1][3] == pytest.approx(math.exp(-0.4))  # the row's R on every token
    doc = session_json(attach(rollout, joined), with_tokens=False)
    assert [e["label"] for e in doc["signals"]["corrections"]] == cols["correction_labels"]
    # the per-call span: c0 covers row positions 3 and 4
    assert (joined.calls[0].sequence, joined.calls[0].begin) == (0, 3)
    # without corrections the keys are absent, the divergences still there
    plain = join_rollout(rollout, [row], 1.0).summary()
    assert "corrections" not in plain and plain["k2"] == pytest.approx((0.01 + 0.25) / 2 / 3)


@given(rows_strategy, st.integers(0, 6))
def test_totals_of_many_rollouts_combine_exactly(rows, cut):
    corrections = [c(s) for s in ("token_tis:cap=1.2", "token_mask", "seq_mask", "geo_mask")]
    keyed = [(i, np.array(r, dtype=float)) for i, r in enumerate(rows)]
    whole = evaluate(corrections, keyed).as_list()
    parts = [evaluate(corrections, keyed[:cut]).as_list(), evaluate(corrections, keyed[cut:]).as_list()]
    for w, t in zip(whole, combine(parts), strict=True):
        assert w["label"] == t["label"]
        for key in ("n_tokens", "n_sequences", "tokens_affected", "sequences_affected"):
            assert w[key] == t[key]
        for key in ("share_tokens", "ess", "weight_lost"):
            assert (w[key] is None) == (t[key] is None)
            if w[key] is not None:
                assert t[key] == pytest.approx(w[key], rel=1e-9)


def test_the_builders_flag_each_calls_tokens_and_draw_the_bands():
    from dataclasses import replace

    from rollout_graph.ui.builders import mismatch, overlays

    rollout = rollout_of([vllm_chat(t) for t in CHAIN])
    row = parse_row({"session_id": "s1", "leaf_id": "c1", "trainer_logprobs": TRAINER}, 1)
    joined = join_rollout(rollout, [row], 1.0)
    rollout = replace(rollout, signals=joined)
    chosen = [c("token_mask:low=0.8,high=1.25"), c("token_tis:cap=1.05"), c("geo_mask:low=0.99,high=1.01")]
    ev = joined.evaluate(chosen)
    assert joined.evaluate(chosen) is ev  # memoised
    flags = mismatch.call_flags(rollout, ev, 0)  # c0 samples row positions 3, 4 (d = +0.1, -0.5)
    assert flags["token_mask:low=0.8,high=1.25"].tolist() == [mismatch.NONE, mismatch.MASKED]
    assert flags["token_tis:cap=1.05"].tolist() == [mismatch.CLIPPED, mismatch.NONE]
    # G = exp(-0.4 / 3) = 0.875: the whole row is masked, c1's token too
    assert mismatch.call_flags(rollout, ev, 1)["geo_mask:low=0.99,high=1.01"].tolist() == [mismatch.MASKED]
    assert mismatch.call_shares(rollout, ev, "token_mask:low=0.8,high=1.25") == {0: 0.5, 1: 0.0}
    colours = mismatch.share_colours({0: 0.5, 1: 0.0, 2: 1.0})
    assert set(colours) == {0, 1, 2} and len({colours[0], colours[1], colours[2]}) == 3
    table = mismatch.comparison_frame(ev)
    assert table["tokens affected"].tolist() == [1, 1, 3] and table["rows affected"].tolist() == [1, 1, 1]
    pairs = mismatch.disagreement_frame(ev)
    assert len(pairs) == 3 and pairs.iloc[0][["only A", "only B", "both"]].tolist() == [1, 1, 0]
    fig = mismatch.ratio_histogram(mismatch.row_points(rollout), chosen)
    rects = [(s.x0, s.x1) for s in fig.layout.shapes if s.type == "rect"]
    assert rects == [(0.8, 1.25)]  # the token band; the cap is a dashed line
    assert fig.layout.xaxis.type == "log"
    assert any(s.type == "line" and s.x0 == 1.05 and s.line.dash == "dash" for s in fig.layout.shapes)
    rows_fig = mismatch.row_ratio_figure(rollout, chosen)
    assert [(s.x0, s.x1) for s in rows_fig.layout.shapes if s.type == "rect"] == [(0.99, 1.01)]
    # the token view overlay marks the same tokens, for the labels the toggle holds
    overlay = overlays.build(rollout, [(0, 0), (1, 5)])  # c0 from its root, then c1's context [6] and [7]
    overlay.show_corrections(["token_mask:low=0.8,high=1.25", "not a spec"])
    assert [overlay.mark_class(p) for p in range(overlay.inference.shape[0])] == [
        "", "", "", "", " rg-km", "", "",
    ]  # fmt: skip
    assert "token_mask:low=0.8,high=1.25: masks this token" in overlay.tooltip_lines(4)
    overlay.show_corrections([])
    assert overlay.mark_class(4) == "" and overlays.marks_legend(overlay) == ""


def test_the_app_starts_with_view_corrections_or_four_common_ones(monkeypatch):
    from rollout_graph.signals.corrections import CORRECTIONS_ENV
    from rollout_graph.ui.panels import corrections as panel

    monkeypatch.delenv(CORRECTIONS_ENV, raising=False)
    assert panel.starting_labels() == [
        "token_tis:cap=2", "token_mask:low=0.5,high=5", "seq_mask:low=0,high=3", "geo_mask:low=0.999,high=1.001",
    ]  # fmt: skip
    monkeypatch.setenv(CORRECTIONS_ENV, "token_tis:cap=3;nonsense;seq_tis")
    assert panel.starting_labels() == ["token_tis:cap=3", "seq_tis:cap=2"]
