"""The daily loop in headless Chromium at 1440x900 (issue 22), on each kind of source a user
opens: the bundled samples, `rollout-graph view PATH` (command-line traces, followed as they grow)
and an upload through the sidebar. One click rings the call in the DAG and shows its detail beside
the graph in the first screen, the DAG keeps its place, Raw JSON reads the record back; Compare and
the Corpus page work on command-line traces; a link the traces cannot open says so."""

from __future__ import annotations

import os

import pytest

from tests.support.browser import (
    ARTIFACTS,
    DAG_JS,
    DOCS_IMAGES,
    ROOT,
    boxed,
    browser_page,
    node_position,
    require_chromium,
    rings,
    running_app,
    wait_ready,
    wait_rings,
    wait_url,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives the app in Chromium

SAMPLE = ROOT / "sample_traces" / "vllm" / "agent-rollouts.jsonl"
WIDTH, HEIGHT = 1440, 900


@pytest.fixture(scope="module")
def samples_app():
    require_chromium()
    with running_app() as url:
        yield url


@pytest.fixture(scope="module")
def cli_app():
    require_chromium()
    with running_app(str(SAMPLE.parent), via_cli=True) as url:
        yield url


def dag_box(page) -> dict:
    return page.evaluate(
        DAG_JS
        + "() => { const b = dag().getBoundingClientRect(); return {left: b.left, right: b.right, top: b.top, bottom: b.bottom}; }"
    )


def ringed(page) -> list[int]:
    """The calls the DAG rings as selected (the DAG client's ring, as arrival indices)."""
    return rings(page)


def faded(page) -> list[str]:
    """The DAG's traces with a call marker or a label drawn faded (a click must fade nothing): the
    calls' markers and the labels' text, as plotly styled them."""
    return page.evaluate(
        DAG_JS
        + """() => Array.from(dag().querySelectorAll('.scatterlayer .trace')).flatMap(tr => {
            const name = tr.__data__ && tr.__data__[0] && tr.__data__[0].trace.name;
            const marks = name === 'calls' ? tr.querySelectorAll('.point') : tr.querySelectorAll('.textpoint text');
            const low = Array.from(marks).filter(p => {
                const s = getComputedStyle(p);
                return parseFloat(s.opacity || '1') < 0.95 || parseFloat(s.fillOpacity || '1') < 0.95;
            });
            return (name === 'calls' || name === 'labels') && low.length ? [name + ':' + low.length] : [];
        })"""
    )


def click_call(page, index: int) -> str:
    """Click call ``index`` in the DAG; check what a user must see; return the call's id."""
    before = dag_box(page)
    scroll = page.evaluate("() => window.parent.scrollY")
    x, y = node_position(page, index)
    page.mouse.click(x, y)
    page.wait_for_function(
        DAG_JS + "() => !!dag() && (dag()._fullLayout.shapes || []).some(s => s.name === 'rg-ring-selected') && "
        f"(document.querySelector('.rg-node-title') || {{}}).innerText?.includes('arrival #{index}')",
        timeout=30_000,
    )
    wait_ready(page)
    title = page.locator(".rg-node-title").first
    node_id = title.inner_text().split()[0]
    wait_rings(page, [index])  # ringed in the DAG ...
    assert faded(page) == []  # ... and nothing else fades
    assert boxed(page) == [f"<b>{node_id}</b>"]  # its id boxed above it, and no other box
    box = title.bounding_box()
    after = dag_box(page)
    assert box["x"] > after["right"] - 5, (box, after)  # beside the DAG, not below it
    assert box["y"] + box["height"] < HEIGHT  # in the first screen
    assert abs(after["top"] - before["top"]) < 3 and page.evaluate("() => window.parent.scrollY") == scroll
    return node_id


def first_screen(page, name: str) -> None:
    """The first screen (not the whole page), into docs/images with ROLLOUT_GRAPH_DOCS_SCREENSHOTS=1."""
    folder = DOCS_IMAGES if os.environ.get("ROLLOUT_GRAPH_DOCS_SCREENSHOTS") else ARTIFACTS
    folder.mkdir(parents=True, exist_ok=True)
    page.mouse.move(0, 0)
    page.screenshot(path=str(folder / f"{name}.png"))


def raw_json_reads_the_record(page) -> None:
    page.get_by_role("tab", name="Raw JSON").first.click()
    page.wait_for_selector("text=The record from", timeout=20_000)
    body = page.inner_text("body")
    assert "were unloaded" not in body and "not among the files" not in body
    assert page.locator("[data-testid='stCode']").first.inner_text().lstrip().startswith("{")


def test_bundled_samples_click_select_beside_and_raw_json(samples_app):
    with browser_page(WIDTH, HEIGHT) as page:
        page.goto(samples_app)
        wait_ready(page)
        assert click_call(page, 6) == "c07"
        wait_url(page, "node=c07")
        first_screen(page, "selection")  # the first screen after a click
        raw_json_reads_the_record(page)
        assert click_call(page, 9) == "c10"  # a second click moves the ring


def test_deep_link_selects_the_same_way(samples_app):
    with browser_page(WIDTH, HEIGHT) as page:
        page.goto(f"{samples_app}/?session=fix-config-bug&node=c19")
        wait_ready(page)
        page.wait_for_selector(".rg-node-title", timeout=30_000)
        assert page.locator(".rg-node-title").first.inner_text().startswith("c19")
        wait_rings(page, [18])
        assert faded(page) == []
        box, dag = page.locator(".rg-node-title").first.bounding_box(), dag_box(page)
        assert box["x"] > dag["right"] - 5 and box["y"] < HEIGHT
        assert click_call(page, 6) == "c07"  # a click after a deep link moves the ring and the box


def test_a_link_the_traces_cannot_open_says_so(samples_app):
    with browser_page(WIDTH, HEIGHT) as page:
        page.goto(f"{samples_app}/?session=nope&node=c03")
        wait_ready(page)
        page.wait_for_selector("text=no rollout 'nope' in these traces", timeout=30_000)
        assert "session=nope" in page.url and "node=c03" in page.url
        assert "Rollout fix-config-bug" in page.inner_text("body")  # the rest of the page opens normally
        page.goto(f"{samples_app}/?session=fix-config-bug&node=c99")
        wait_ready(page)
        page.wait_for_selector("text=No call 'c99' in rollout fix-config-bug", timeout=30_000)
        assert "node=c99" in page.url


def test_upload_click_select_and_raw_json(samples_app):
    with browser_page(WIDTH, HEIGHT) as page:
        page.goto(samples_app)
        wait_ready(page)
        page.get_by_test_id("stRadio").get_by_text("Upload", exact=True).click()  # the source radio, not the dropzone
        page.get_by_test_id("stSidebar").locator('input[type="file"]').set_input_files(str(SAMPLE))
        page.wait_for_selector("text=1 uploaded file(s)", timeout=60_000)
        wait_ready(page)
        wait_url(page, "source=upload")
        node_id = click_call(page, 1)
        raw_json_reads_the_record(page)
        assert SAMPLE.name in page.inner_text("body")
        link = page.url
    with browser_page(WIDTH, HEIGHT) as page:  # the link in a fresh browser: it asks for the file
        page.goto(link)
        page.wait_for_selector(f"text=drop the same file in the sidebar to open {node_id}", timeout=30_000)
        page.get_by_test_id("stSidebar").locator('input[type="file"]').set_input_files(str(SAMPLE))
        page.wait_for_selector(".rg-node-title", timeout=60_000)
        assert page.locator(".rg-node-title").first.inner_text().startswith(node_id)


def test_command_line_traces_explorer_compare_and_corpus(cli_app):
    with browser_page(WIDTH, HEIGHT) as page:
        page.goto(cli_app)
        wait_ready(page)
        page.wait_for_selector(".rg-live", timeout=30_000)  # followed as they grow
        click_call(page, 1)
        raw_json_reads_the_record(page)
        page.goto(f"{cli_app}/compare")
        page.wait_for_selector("text=Compare two rollouts", timeout=60_000)
        page.wait_for_selector("text=Main sequences, aligned at their first divergence", timeout=30_000)
        page.goto(f"{cli_app}/corpus")
        page.wait_for_selector("text=Corpus audit:", timeout=120_000)
        # the sidebar's audit-source radio may be drawn after the table under load: wait for it
        page.wait_for_selector("text=Command-line traces (audited now)", timeout=30_000)
        body = page.inner_text("body")
        assert "rollouts from 1 file" in body  # the command-line folder's file, not the bundled samples
