"""Pure view builders: the DAG layout and figure, token pages, chat HTML. Every string from a
trace must come out escaped."""

from __future__ import annotations

import html
import json

import pytest

from rollout_graph.analysis.decode import TraceTextDecoder
from rollout_graph.analysis.layout import layout
from rollout_graph.ui.builders.chat import chat_html, pretty_arguments
from rollout_graph.ui.builders.dag import dag_figure, legend_html, line_segments
from rollout_graph.ui.builders.palette import KIND_LABELS, ROLE_LABELS
from rollout_graph.ui.builders.tokens import PAGE_SIZE, node_strip, page_bounds, page_html, sequence_strip
from tests.support.builders import TOOLS, Turn, calls_from_tokens, rollout_of, rollout_of_tokens, vllm_chat


def test_a_chain_is_a_straight_line():
    r = rollout_of_tokens([([1], [2]), ([1, 2, 3], [4]), ([1, 2, 3, 4, 5], [6])])
    lay = layout(r.topology)
    assert lay.x == [0, 1, 2] and lay.y == [0, 0, 0] and lay.n_lanes == 1


def test_fork_children_open_new_lanes_and_the_main_line_stays_straight():
    # n1 is a retry with no children; n2 continues to n3: the main line (n0, n2, n3) stays on lane 0.
    r = rollout_of_tokens([([1], [2]), ([1, 2, 3], [4]), ([1, 2, 3], [5]), ([1, 2, 3, 5, 6], [7])])
    lay = layout(r.topology)
    assert [lay.y[i] for i in (0, 2, 3)] == [0, 0, 0]
    assert lay.y[1] == 1 and lay.x[1] == 1


def test_a_later_root_sits_below_the_call_that_arrived_just_before_it():
    spec = [([1], [2]), ([1, 2, 3], [4]), ([1, 2, 3], [5]), ([1, 2, 3, 5], [6]), ([9], [8]), ([9, 8, 7], [6])]
    r = rollout_of_tokens(spec)
    lay = layout(r.topology)
    assert (lay.x[3], lay.y[3]) == (2, 0)  # the main line: n0 n2 n3 on lane 0, the retry n1 below n2
    assert (lay.x[1], lay.y[1]) == (1, 1)
    assert (lay.x[4], lay.x[5]) == (2, 3) and lay.y[4] == lay.y[5] == 1  # n4's tree starts in n3's column, below it
    positions = {(lay.x[i], lay.y[i]) for i in range(6)}
    assert len(positions) == 6  # no two calls at one place


def test_layout_scales_to_thousands_of_calls():
    spec = [(list(range(k)), [k]) for k in range(1, 3001)]
    r = rollout_of_tokens(spec)
    lay = layout(r.topology)
    assert lay.n_lanes == 1 and max(lay.x) == 2999


def hostile_rollout():
    record = vllm_chat(
        Turn('<img src=x onerror="alert(1)">', [1, 2], [3, 4], tools=TOOLS, reply="<script>alert(2)</script>"),
        token_text=True,
    )
    record["response"]["model"] = "<b>model</b>"
    record["response"]["choices"][0]["logprobs"]["content"][0]["token"] = "<i>tok</i>"
    return rollout_of([record])


def test_dag_figure_is_deterministic_and_escapes_hover_text():
    r = hostile_rollout()
    a, b = dag_figure(r).to_json(), dag_figure(r).to_json()
    assert a == b
    hover = dag_figure(r).data[1].hovertext[0]
    assert "<img" not in hover and html.escape('<img src=x onerror="alert(1)">') in hover


def test_dag_figure_changes_only_with_an_outside_highlight():
    r = rollout_of_tokens([([1], [2]), ([1, 2, 3], [4])])
    plain, lit = dag_figure(r), dag_figure(r, highlight=1)
    # every call stays "unselected" (full opacity): the chosen one is boxed, and ringed by the browser (rings)
    assert list(plain.data[1].selectedpoints) == [] == list(lit.data[1].selectedpoints)
    assert plain.to_json() == dag_figure(r).to_json()  # nothing but the options changes the figure
    assert plain.layout.uirevision != lit.layout.uirevision  # a call chosen outside re-centres the view
    # boxed by the shapes the browser moves when another call is selected (views/panels/dag_client)
    boxed = [sh for sh in lit.layout.shapes if sh.name == "rg-ring-box"]
    assert [sh.label.text for sh in boxed] == ["<b>n1</b>"] and not [
        sh for sh in plain.layout.shapes if sh.name == "rg-ring-box"
    ]
    assert (boxed[0].xanchor, boxed[0].yanchor) == (lit.data[1].x[1], lit.data[1].y[1])
    assert line_segments(plain, "edges") == [((0, 0), (1, 0))]  # one edge: one segment of one path


def _label_boxes(figure):
    """Approximate px boxes of the visible labels in the default view (same geometry as views/builders/dag/geometry.py)."""
    from rollout_graph.ui.builders.dag import CHAR_PX, LABELS, PLOT_WIDTH

    xr, yr = figure.layout.xaxis.range, figure.layout.yaxis.range
    sx, sy = PLOT_WIDTH / (xr[1] - xr[0]), (figure.layout.height - 120) / (yr[1] - yr[0])
    trace = figure.data[LABELS]
    boxes = []
    for x, y, text, side in zip(trace.x, trace.y, trace.text, trace.textposition, strict=True):
        if not (xr[0] <= x <= xr[1] and yr[0] <= y <= yr[1]):
            continue
        lines = text.split("<br>")
        w, h = CHAR_PX * max(map(len, lines)), 12 * len(lines)
        cx, cy = (x - xr[0]) * sx, (yr[1] - y) * sy
        x0 = cx - w / 2 if side != "middle right" else cx + 7
        y0 = {"top center": cy - 7 - h, "bottom center": cy + 7, "middle right": cy - h / 2}[side]
        boxes.append((x0, y0, x0 + w, y0 + h, text))
    return boxes


@pytest.fixture(scope="module")
def samples():
    from rollout_graph.ingest.load.files import load_paths
    from rollout_graph.pipeline import analyse
    from rollout_graph.resources import SAMPLES

    return {sid: analyse(session) for sid, session in load_paths([SAMPLES]).sessions.items()}


def test_labels_never_overlap_on_the_samples(samples):
    for rollout in samples.values():
        boxes = _label_boxes(dag_figure(rollout, near_misses=True))
        assert boxes
        for i, (a0, b0, a1, b1, ta) in enumerate(boxes):
            for c0, d0, c1, d1, tb in boxes[i + 1 :]:
                assert not (a0 < c1 - 1 and c0 < a1 - 1 and b0 < d1 - 1 and d0 < b1 - 1), (ta, tb)
    roots = [samples["fix-config-bug"].calls[i].node_id for i in samples["fix-config-bug"].topology.roots]
    labelled = {t for *_, t in _label_boxes(dag_figure(samples["fix-config-bug"], near_misses=True))}
    assert {"c01", "c03", "c08"} <= set(roots) and {"c03", "c08"} <= labelled


def test_collapsed_chains_are_drawn_as_clickable_segments():
    from rollout_graph.ui.builders.dag import CALLS, CHAINS, LABELS

    spec = [(list(range(k)), [k]) for k in range(1, 11)]  # one conversation of 10 calls
    r = rollout_of_tokens(spec)
    figure = dag_figure(r)
    assert list(figure.data[CALLS].customdata) == [0, 9]  # the root and the leaf
    assert list(figure.data[CHAINS].customdata) == [1]  # one chain, keyed by its first call
    assert "8 calls<br>+" in " ".join(figure.data[LABELS].text)
    assert list(dag_figure(r, expanded={1}).data[CALLS].customdata) == list(range(10))
    assert list(dag_figure(r, collapse=False).data[CALLS].customdata) == list(range(10))
    # a call chosen outside the chart is never hidden: its chain splits around it
    assert 4 in dag_figure(r, highlight=4).data[CALLS].customdata
    # focus: only the subtree of call 6 (which stays a node)
    assert list(dag_figure(r, focus=6).data[CALLS].customdata) == [6, 9]


def test_a_5000_call_figure_is_small():
    from tests.support.builders import agent_records

    r = rollout_of(agent_records(5000))
    figure = dag_figure(r, near_misses=True)
    assert len(figure.to_json()) < 1_000_000
    assert len(figure.data[1].x) < 1000 and figure.layout.xaxis.rangeslider.visible


def test_legend_explains_every_colour_and_symbol():
    legend = legend_html()
    for text in [*ROLE_LABELS.values(), *KIND_LABELS.values()]:
        assert html.escape(text) in legend


def test_token_page_escapes_text_and_tooltips():
    r = hostile_rollout()
    decoder = TraceTextDecoder({3: "<i>tok</i>", 4: 'say "hi" & <b>'})
    strip = node_strip(r, 0)
    page = page_html(strip, 0, len(strip), decoder)
    assert "<i>tok</i>" not in page and "&lt;i&gt;tok&lt;/i&gt;" in page
    assert "&lt;b&gt;" in page and 'say "hi"' not in page
    assert page.count('<span class="rg-t') == 4


def test_token_classes_context_sampled_and_untrained():
    r = rollout_of_tokens([([1, 2], [3, 4])])
    r_untrained = rollout_of_tokens([([1, 2], [3, 4])], logprobs=False)
    decoder = TraceTextDecoder({})
    trained = page_html(node_strip(r, 0), 0, 4, decoder)
    untrained = page_html(node_strip(r_untrained, 0), 0, 4, decoder)
    assert trained.count('rg-c"') == 2 and trained.count(" rg-b") == 2
    assert untrained.count(' rg-u"') == 2 and "NOT trained" in untrained


def test_whitespace_is_visible_and_special_tokens_marked():
    class Special(TraceTextDecoder):
        def is_special(self, token_id: int) -> bool:
            return token_id == 1

    r = rollout_of_tokens([([1, 2], [3])])
    page = page_html(node_strip(r, 0), 0, 3, Special({1: "<|im_start|>", 2: " a\tb\n", 3: "x"}))
    assert "·a→b↵" in page
    assert page.count(" rg-s") == 1  # only the special token carries the class


def test_pages_keep_multibyte_characters_whole_at_the_edge():
    from tokenizers import Tokenizer

    from rollout_graph.analysis.decode import SAMPLES, TokenizerDecoder

    path = SAMPLES / "SmolLM2-135M-Instruct" / "tokenizer.json"
    ids = Tokenizer.from_file(str(path)).encode("ab 🚀🚀🚀").ids
    r = rollout_of_tokens([(ids, [])])
    strip = node_strip(r, 0)
    decoder = TokenizerDecoder(path, "test")
    cut = next(i for i in range(1, len(ids)) if decoder.pieces(ids)[i - 1] == "")  # inside a rocket
    second = page_html(strip, cut, len(ids), decoder)
    assert "\ufffd" not in second


def test_page_bounds_and_sequence_turn_labels():
    spec = [(list(range(1000)), [5] * 10), (list(range(1000)) + [5] * 10 + [7] * 900, [6])]
    r = rollout_of_tokens(spec)
    strip = sequence_strip(r, r.sequences[0])
    assert len(strip) == 1911 and strip.boundaries == {0: "n0", 1010: "n1"}
    assert page_bounds(strip, 2) == (2 * PAGE_SIZE, 1911)
    assert strip.first_sampled() == 1000


def test_chat_html_escapes_and_pretty_prints_tool_calls():
    record = vllm_chat(Turn("c", [1], [2], messages=[{"role": "user", "content": "<script>x</script>"}]))
    r = rollout_of([record])
    call = r.calls[0]
    call.response_message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"function": {"name": "<b>bash</b>", "arguments": json.dumps({"cmd": "<img src=x>"})}}],
    }
    page = chat_html(call)
    assert "<script>" not in page.split("</style>", 1)[1] and "&lt;script&gt;x&lt;/script&gt;" in page
    assert "&lt;b&gt;bash&lt;/b&gt;" in page and "&quot;cmd&quot;: &quot;&lt;img src=x&gt;&quot;" in page
    assert pretty_arguments('{"a":1}') == '{\n  "a": 1\n}'
    assert pretty_arguments("{oops").endswith("(not valid JSON)")


@pytest.mark.parametrize("n", [0, 1])
def test_empty_spans_render(n):
    r = rollout_of_tokens([([1] * n, [])]) if n else None
    if r is None:
        calls = calls_from_tokens([(None, [])])
        from rollout_graph.core.records import SessionInput
        from rollout_graph.pipeline import analyse

        r = analyse(SessionInput("s", calls))
    strip = node_strip(r, 0)
    assert len(strip) == n
    assert page_html(strip, 0, len(strip), TraceTextDecoder({})).endswith("</div>")
    assert [int(i) for i in strip.ids] == [1] * n


def _forks_later(n_chain: int = 60, fork_at: int = 50, n_forks: int = 9):
    """One long line of calls (one lane) and, far to the right of the first window, a call re-sent
    ``n_forks`` times (each a lane of its own)."""
    spec = [(list(range(k)), [k]) for k in range(1, n_chain + 1)]
    spec += [(list(range(fork_at + 1)), [1000 + j]) for j in range(n_forks)]
    return rollout_of_tokens(spec)


def _drawn(figure):
    calls = figure.data[1]
    return list(zip(calls.x, calls.y, strict=True))


def test_the_default_view_is_as_tall_as_the_lanes_its_window_draws_not_the_whole_rollouts():
    # lanes used only further along left an empty band under the first rows (a 5,000-call trace)
    r = _forks_later()
    figure = dag_figure(r, collapse=False)
    xr, yr = figure.layout.xaxis.range, figure.layout.yaxis.range
    in_window = [(x, y) for x, y in _drawn(figure) if xr[0] <= x <= xr[1]]
    assert in_window and all(y == 0 for _, y in in_window)  # the first window: one lane
    assert min(y for _, y in _drawn(figure)) <= -8  # the forks further along: many lanes
    assert figure.layout.height == 240  # the least height, not the 370 px of all 10 lanes
    assert yr[0] >= -5 and yr[1] >= 0  # no band of empty lanes under the line
    everything = dag_figure(r, collapse=False, fit_all=True)  # Fit all: every lane, as before
    assert everything.layout.height > 240 and everything.layout.yaxis.range[0] < -8


def test_a_call_chosen_in_a_deep_lane_is_inside_the_view_it_is_centred_in():
    r = _forks_later()
    deep = len(r.calls) - 1  # the last re-sent call: the deepest lane
    figure = dag_figure(r, highlight=deep, collapse=False)
    x, y = next((x, y) for (x, y), c in zip(_drawn(figure), figure.data[1].customdata, strict=True) if c == deep)
    xr, yr = figure.layout.xaxis.range, figure.layout.yaxis.range
    assert y <= -8 and xr[0] <= x <= xr[1] and yr[0] <= y <= yr[1]
    in_window = [y for x, y in _drawn(figure) if xr[0] <= x <= xr[1]]
    assert all(yr[0] <= v <= yr[1] for v in in_window)  # every lane of its window in view
