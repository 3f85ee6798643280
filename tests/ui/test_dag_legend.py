"""The legends (the DAG's and the token view's): one meaning per chip, colour and ring, in the
glossary's words (docs/semantics.md), no retired word, and the rings the legend explains are the
rings the figure draws."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from rollout_graph.ui.builders import dag, tokens
from rollout_graph.ui.builders.palette import HIGHLIGHT_RING, NEWEST_RING, SELECTED_RING
from tests.support.builders import ROLLOUT, rollout_of, vllm_chat
from tests.ui.test_daily_loop import retired_words


class _Chips(HTMLParser):
    """The text of each chip: a span directly inside a legend row (a div)."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0  # spans open
        self.chips: list[str] = []
        self.labels: list[str] = []  # text inside the chip's first nested span (its swatch or glyph)

    def handle_starttag(self, tag, attrs):
        if tag == "span":
            self.depth += 1
            if self.depth == 1:
                self.chips.append("")
                self.labels.append("")

    def handle_endtag(self, tag):
        if tag == "span":
            self.depth -= 1

    def handle_data(self, data):
        if self.depth >= 1:
            self.chips[-1] += data
        if self.depth == 2:
            self.labels[-1] += data


def chips(html: str) -> _Chips:
    parser = _Chips()
    parser.feed(html)
    return parser


def dag_legend(**kw) -> list[str]:
    return [c.strip() for c in chips(dag.legend_html(**kw)).chips]


def test_the_dag_legend_says_continued_once_and_never_context():
    text = " ".join(dag_legend(newest=True))
    assert len(re.findall(r"\bcontinu", text)) == 1, text  # the near miss: "nearly continued"
    assert "nearly continued" in text
    assert "context" not in text  # context is a token word (the token legend)
    assert retired_words(text) == []


def test_each_dag_chip_has_its_own_word():
    items = dag_legend(newest=True)
    heads = [item.split(":")[0].lstrip("●◉⊗◆■○─- ") for item in items if ":" in item]
    assert len(heads) == len(set(heads)), heads
    for word in ("agent", "auxiliary", "discarded", "root", "fork", "leaf", "inner", "near miss"):
        assert word in heads


def test_the_dag_legend_explains_each_ring_once_and_the_figure_draws_those_rings():
    legend = dag.legend_html(newest=True)
    for colour in (SELECTED_RING, HIGHLIGHT_RING, NEWEST_RING):
        assert legend.count(colour) == 1, colour
    assert NEWEST_RING not in dag.legend_html()  # no growing trace, no newest ring to explain
    from rollout_graph.ui.state.live import mark_newest

    r = rollout_of([vllm_chat(t) for t in ROLLOUT])
    fig, targets = dag.dag_drawing(r, highlighted={1})
    fig = mark_newest(fig, 3)
    assert {t.name: t.marker.color for t in fig.data if t.name == "highlighted"} == {"highlighted": HIGHLIGHT_RING}
    drawn = dag.rings(fig, targets, r, 0, [1])["shapes"]  # what the browser draws over the figure
    colours = {s["name"]: s["line"].get("color") for s in drawn}
    assert colours[dag.RING_SELECTED] == SELECTED_RING and colours[dag.RING_HIT] == HIGHLIGHT_RING
    assert NEWEST_RING in fig.to_json()


@pytest.mark.parametrize("label", [None, "token_tis"])
def test_the_dag_legend_uses_no_retired_word(label):
    assert retired_words(" ".join(dag_legend(shares_label=label, newest=True))) == []


def test_the_token_legend_has_one_chip_per_meaning():
    parsed = chips(tokens.legend_html())
    labels = [label.strip() for label in parsed.labels if label.strip()]
    assert len(labels) == len(set(labels)), labels  # three chips were all called "context"
    assert labels.count("context") == 1
    text = " ".join(parsed.chips)
    assert "context tokens: mask 0" in text and "sampled earlier" in text and "re-inserted" in text
    assert retired_words(text) == []
