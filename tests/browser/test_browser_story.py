"""Issue 42 in headless Chromium at 1440x900, as a user meets it: the first screen that explains
itself, the full-height split with its divider (dragged, remembered, stacked on a narrow window),
the story view linked to the graph both ways, and the rough edges only a browser shows (search hits
above the fold, a hit pinning its token, an upload cut mid-record, a bad upload's URL, every
correction chip, the Sequence tab's numbers, the boxed id of a top-lane call, a "/" pressed before
the keyboard bridge listens, the bundle's keys and ring). AppTest covers the rest
(tests/ui/test_story_view.py, tests/ui/test_rough_edges.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.browser import (
    DAG_JS,
    ROOT,
    browser_page,
    painted,
    require_chromium,
    running_app,
    screenshot,
    settle,
    wait_ready,
    wait_rings,
    wait_url,
)
from tests.support.builders import Turn, agent_records, jsonl, vllm_chat, write

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives the app in Chromium

WIDTH, HEIGHT = 1440, 900
VLLM = ROOT / "sample_traces" / "vllm" / "agent-rollouts.jsonl"
PANES = ".st-key-rg-split > [data-testid=stLayoutWrapper] > [data-testid=stHorizontalBlock] > [data-testid=stColumn]"


@pytest.fixture(scope="module")
def samples_app():
    require_chromium()
    with running_app() as url:
        yield url


def box(page, selector: str) -> dict:
    return page.locator(selector).first.bounding_box()


def panes(page) -> list[dict]:
    return page.evaluate(
        f"() => Array.from(document.querySelectorAll('{PANES}')).map(c => {{ const b = c.getBoundingClientRect();"
        " return {x: b.x, y: b.y, width: b.width, height: b.height}; })"
    )


def title(page) -> str:
    return page.locator(".rg-node-title").first.inner_text().split()[0]


def test_the_first_screen_says_what_this_is_and_where_to_click(samples_app):
    with browser_page(WIDTH, HEIGHT) as page:
        page.goto(samples_app)
        wait_ready(page, timeout=180_000)
        settle(page)
        screenshot(page, "first-screen", docs=True)
        intro = box(page, ".rg-intro")
        assert intro["y"] + intro["height"] < 120  # what this is, in one line at the top
        numbers = page.locator(".rg-numbers").inner_text()
        for words in ("25", "model calls", "4", "conversations", "1,982", "tokens to train on"):
            assert words in numbers
        # each number's (?) says what it means, in one line
        meanings = page.eval_on_selector_all(".rg-numbers .rg-q", "qs => qs.map(q => q.title)")
        assert len(meanings) >= 3 and all(meanings)
        assert page.locator(".rg-strip").is_visible()  # the picture: the conversations in one bar
        tour = page.get_by_role("button", name="Take the tour").first.bounding_box()
        assert tour["y"] + tour["height"] < HEIGHT  # the tour, without scrolling
        dag = page.evaluate(DAG_JS + "() => { const b = dag().getBoundingClientRect(); return [b.top, b.bottom]; }")
        assert dag[0] < HEIGHT - 200  # the graph starts on the first screen
        page.get_by_role("button", name="Take the tour").first.click()
        page.get_by_role("button", name="a subagent: c08").wait_for(timeout=30_000)
        page.get_by_role("button", name="a subagent: c08").click()
        page.wait_for_selector(".rg-node-title:has-text('c08 ')", timeout=60_000)


def test_the_split_is_the_windows_height_resizable_remembered_and_stacks_when_narrow(samples_app):
    with browser_page(WIDTH, HEIGHT) as page:
        page.goto(f"{samples_app}/?session=fix-config-bug&node=c05")
        wait_ready(page, timeout=180_000)
        page.evaluate("() => document.querySelector('.st-key-rg-split').scrollIntoView({block: 'start'})")
        settle(page)
        left, right = panes(page)
        assert abs(left["height"] - (HEIGHT - 12)) <= 2 and abs(right["height"] - (HEIGHT - 12)) <= 2
        assert right["x"] > left["x"] + left["width"] - 1  # side by side
        screenshot(page, "split", docs=True)
        bar = box(page, ".rg-divider")
        start = left["width"]
        page.mouse.move(bar["x"] + 3, bar["y"] + 200)
        page.mouse.down()
        page.mouse.move(bar["x"] - 220, bar["y"] + 200, steps=6)
        page.mouse.up()
        page.wait_for_function(f"() => document.querySelector('{PANES}').getBoundingClientRect().width < {start - 150}")
        narrower = panes(page)[0]["width"]
        saved = page.evaluate("() => localStorage.getItem('rg-split')")
        assert saved is not None and float(saved) < 0.5
        page.reload()
        wait_ready(page, timeout=180_000)
        page.wait_for_function(
            f"() => Math.abs(document.querySelector('{PANES}').getBoundingClientRect().width - {narrower}) < 4",
            timeout=30_000,
        )  # the width is remembered
        page.set_viewport_size({"width": 1000, "height": HEIGHT})
        page.wait_for_function(
            f"() => {{ const [a, b] = document.querySelectorAll('{PANES}');"
            " return b.getBoundingClientRect().top >= a.getBoundingClientRect().bottom - 2; }",
            timeout=30_000,
        )  # stacked on a narrow window
        assert not page.locator(".rg-divider").is_visible()
        page.evaluate("() => localStorage.removeItem('rg-split')")


def test_the_story_and_the_graph_link_both_ways(samples_app):
    with browser_page(WIDTH, HEIGHT) as page:
        page.goto(f"{samples_app}/?session=fix-config-bug")
        wait_ready(page, timeout=180_000)
        page.get_by_text("☰ Story: what the agent did").click()
        page.wait_for_selector(".rg-ch[data-node='c03']", timeout=60_000)
        settle(page)
        screenshot(page, "story", docs=True)
        assert page.locator(".rg-ch").count() == 11  # the agent's first conversation, one page
        page.get_by_role("button", name="Open c05").click()
        page.wait_for_selector(".rg-node-title:has-text('c05 ')", timeout=60_000)
        page.wait_for_selector(".rg-ch.rg-sel[data-node='c05']", timeout=60_000)
        wait_url(page, "node=c05")
        page.get_by_role("button", name="◆ Show it in the graph").click()
        wait_ready(page, timeout=60_000)
        wait_rings(page, [4])  # c05 ringed in the graph
        page.get_by_role("button", name="☰ Read it in the story").click()
        page.wait_for_selector(".rg-ch.rg-sel[data-node='c05']", timeout=60_000)
        settle(page)
        sel = box(page, ".rg-ch.rg-sel")
        assert 0 <= sel["y"] < HEIGHT  # scrolled to it in its pane


def test_search_hits_keep_the_graph_on_screen_and_a_token_hit_pins_its_token(samples_app):
    with browser_page(WIDTH, HEIGHT) as page:
        page.goto(f"{samples_app}/?session=fix-config-bug")
        wait_ready(page, timeout=180_000)
        search = page.get_by_role("searchbox", name="Search this rollout")
        search.fill("pip")
        search.press("Enter")
        page.wait_for_selector(".st-key-rg-search-hits button", timeout=60_000)
        wait_ready(page, timeout=60_000)
        hits = box(page, ".st-key-rg-search-hits")
        assert hits["height"] <= 140  # four rows at most: the graph stays in its pane's first screen
        dag = page.evaluate(DAG_JS + "() => dag().getBoundingClientRect().top")
        assert dag < HEIGHT - 150
        screenshot(page, "search-rows", docs=True)
        token = page.locator(".st-key-rg-search-hits button", has_text="token").first
        token.click()
        page.wait_for_selector("[class*='st-key-rg-inspector'] code", timeout=60_000)  # pinned in the inspector


def upload(page, url: str, path) -> None:
    page.get_by_test_id("stRadio").get_by_text("Upload", exact=True).click()  # the source radio, not the dropzone
    page.get_by_test_id("stSidebar").locator('input[type="file"]').first.set_input_files(str(path))


VERIFIERS = ROOT / "tests" / "fixtures" / "writers" / "verifiers" / "traces.jsonl"  # written by verifiers' own code


def test_the_story_of_an_uploaded_framework_dump(samples_app):
    with browser_page(WIDTH, HEIGHT) as page:
        page.goto(samples_app)
        wait_ready(page, timeout=180_000)
        upload(page, samples_app, VERIFIERS)
        page.wait_for_selector("text=1 uploaded file(s)", timeout=120_000)
        wait_ready(page, timeout=120_000)
        numbers = page.eval_on_selector_all(".rg-numbers > span:not(.rg-title)", "ss => ss.map(s => s.textContent)")
        assert "2conversations?" in numbers
        page.get_by_text("☰ Story: what the agent did").click()
        page.wait_for_selector(".rg-ch[data-node='n2']", timeout=60_000)
        settle(page)
        story = page.locator(".st-key-rg-split").inner_text()
        assert "The agent's conversation" in story
        assert "1 discarded attempt (n7): the same prompt sent again (a retry); n8 continued" in story
        assert "n14: the history was compacted" in story  # the other branch, one line
        first = page.locator(".rg-ch[data-node='n2']")
        assert "bash" in first.inner_text() and "pytest -q" in first.inner_text()  # its tool call, with its command
        page.get_by_test_id("stSelectbox").filter(has_text="Conversation").click()
        page.get_by_role("option", name="Subagent · 1 call").click()
        page.wait_for_selector(".rg-break", timeout=60_000)
        settle(page)
        brk = page.locator(".rg-break").inner_text()
        assert "a subagent started (after n2)" in brk and brk.count("its own system prompt") == 1  # evidence once
        page.get_by_role("button", name="Open n5").click()
        page.wait_for_selector(".rg-node-title:has-text('n5 ')", timeout=60_000)
        page.wait_for_selector(".rg-ch.rg-sel[data-node='n5']", timeout=60_000)


def test_an_upload_cut_mid_record_says_so(samples_app, tmp_path):
    data = jsonl([vllm_chat(Turn(f"c{k}", [1, 2, 3][: k + 1], [7 + k])) for k in range(3)])
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(data[: len(data) - 30])
    with browser_page(WIDTH, HEIGHT) as page:
        page.goto(samples_app)
        wait_ready(page, timeout=180_000)
        upload(page, samples_app, cut)
        page.wait_for_selector("text=The last line is cut mid-record", timeout=120_000)
        assert "all loaded" not in page.inner_text('[data-testid="stMain"]')


def test_a_bad_upload_drops_the_link_of_the_rollout_opened_before(samples_app, tmp_path):
    junk = tmp_path / "junk.jsonl"
    junk.write_text("not json\n{}\n")
    with browser_page(WIDTH, HEIGHT) as page:
        page.goto(f"{samples_app}/?session=fix-config-bug&node=c05")
        wait_ready(page, timeout=180_000)
        upload(page, samples_app, junk)
        page.wait_for_selector("text=No rollouts in this source", timeout=120_000)
        page.wait_for_function("() => !location.search.includes('session=')", timeout=30_000)
        assert "node=" not in page.url


def test_every_chosen_correction_shows_its_chip(samples_app):
    with browser_page(WIDTH, HEIGHT) as page:
        page.goto(f"{samples_app}/?session=fix-config-bug")
        wait_ready(page, timeout=180_000)
        page.get_by_text("Off-policy corrections: what each would do to these tokens").click()
        tags = page.locator(".st-key-rg-corrections-chosen [data-testid=stMultiSelectTagsContainer]")
        tags.wait_for(timeout=60_000)
        tags.scroll_into_view_if_needed()
        settle(page)
        field = tags.bounding_box()
        for label in (
            "token_tis:cap=2",
            "token_mask:low=0.5,high=5",
            "seq_mask:low=0,high=3",
            "geo_mask:low=0.999,high=1.001",
        ):
            chip = tags.get_by_text(label, exact=True).bounding_box()
            assert chip and chip["x"] + chip["width"] <= field["x"] + field["width"] + 1, label  # shown whole
            assert field["y"] - 1 <= chip["y"] and chip["y"] + chip["height"] <= field["y"] + field["height"] + 1, label


def test_the_sequence_numbers_and_the_top_lane_box_are_whole(samples_app):
    with browser_page(WIDTH, HEIGHT) as page:
        page.goto(f"{samples_app}/?session=fix-config-bug&node=c02")  # c02 (the first call to arrive): the top lane
        wait_ready(page, timeout=180_000)
        wait_rings(page, [0])
        inside = page.evaluate(
            DAG_JS
            + """() => { const gd = dag(), plot = gd.querySelector('.nsewdrag').getBoundingClientRect();
            const boxes = Array.from(gd.querySelectorAll('.shapelayer path')).filter(p => p.getAttribute('fill') === 'rgb(255, 255, 255)'
              || p.style.fill === 'rgb(255, 255, 255)');
            return boxes.map(p => { const b = p.getBoundingClientRect(); return b.top >= plot.top - 1; }); }"""
        )
        assert inside and all(inside)  # the boxed id inside the chart, not cut at its top edge
        page.get_by_role("tab", name="Sequence").click()
        page.wait_for_selector(".rg-rownums", timeout=60_000)
        settle(page)
        cut = page.eval_on_selector_all(
            ".rg-rownums span", "ss => ss.filter(s => s.scrollWidth > s.clientWidth + 1).length"
        )
        assert cut == 0 and "…" not in page.locator(".rg-rownums").inner_text()


def test_a_slash_before_the_keyboard_bridge_listens_focuses_the_search(samples_app):
    with browser_page(WIDTH, HEIGHT) as page:
        page.route("**/component/**rg_keyboard**", lambda route: route.abort())  # the bridge never loads
        page.goto(f"{samples_app}/?session=fix-config-bug")
        wait_ready(page, timeout=180_000)
        page.wait_for_function("() => window.__rgEarly === true", timeout=30_000)
        page.mouse.click(5, HEIGHT - 5)  # the page, not a field
        page.keyboard.press("/")
        focused = page.evaluate("() => document.activeElement && document.activeElement.getAttribute('aria-label')")
        assert focused == "Search this rollout"
        page.evaluate("() => document.activeElement.blur()")
        page.keyboard.press("j")
        assert page.evaluate("() => window.__rgKeyQueue.slice(-1)[0]") == "j"  # kept for the bridge


def test_the_graph_reads_at_1000_calls(tmp_path):
    require_chromium()
    write(tmp_path / "agent-1000.jsonl", agent_records(1000, session="agent-1000"))
    with running_app(str(tmp_path)) as url, browser_page(WIDTH, HEIGHT) as page:
        page.goto(url)
        wait_ready(page, timeout=180_000)
        size = page.evaluate(
            DAG_JS
            + "() => { const b = dag().querySelector('.nsewdrag').getBoundingClientRect(); return [b.width, b.height]; }"
        )
        assert size[0] >= 600 and size[1] >= 160, size  # was ~530x230 px of a 5-lane view
        labels = page.evaluate(DAG_JS + "() => dag()._fullData[3].x.length")
        assert labels >= 20  # ids drawn, placed without overlap (views/builders/dag/labels.py)
        screenshot(page, "graph-1000", docs=True)


def test_the_bundle_reads_like_the_app(tmp_path):
    require_chromium()
    out = tmp_path / "b.html"
    done = subprocess.run(
        [sys.executable, "-m", "rollout_graph", "bundle", str(VLLM), "--session", "fix-config-bug", "--node", "c05",
         "--out", str(out)], capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    with browser_page(WIDTH, HEIGHT) as page:
        page.goto(out.as_uri())
        page.wait_for_selector("body[data-ready='1']")
        ring = page.eval_on_selector(".node .ring", "r => getComputedStyle(r).stroke")
        assert ring == "rgb(15, 23, 42)"  # the app's selection ring, not the red of a search hit
        for key, expected in (("j", "c06"), ("k", "c05"), ("h", "c04"), ("l", "c05"), ("]", None)):
            page.keyboard.press(key)
            painted(page)
            if expected:
                assert f"node={expected}" in page.url, (key, page.url)
        page.get_by_text("☰ Story: what the agent did").click()
        page.wait_for_selector(".chapter", timeout=10_000)
        assert page.locator(".chapter").count() == 11
        data = json.loads(page.eval_on_selector("#rollout-data", "e => e.textContent"))
        placed = data["sessions"][0]["layout"]["collapsed"]
        assert placed["visible"] and len(placed["x"]) == len(placed["visible"])
        screenshot(page, "bundle-story", docs=True)
