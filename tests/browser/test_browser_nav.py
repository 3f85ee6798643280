"""Finding your way in the real app (headless Chromium): search to a hit at its token, a
keyboard-only walk through parent, child and sibling, Back to the previous call, a timeline click,
and the pinned token inspector's numbers."""

from __future__ import annotations

import pytest

from tests.support.browser import (
    DAG_JS,
    boxed,
    browser_page,
    click_until,
    node_position,
    require_chromium,
    rings,
    running_app,
    screenshot,
    settle,
    wait_ready,
    wait_rings,
    wait_url,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # drives the app in headless Chromium

SESSION = "fix-config-bug"


@pytest.fixture(scope="module")
def samples_app():
    require_chromium()
    with running_app() as url:
        yield url


def settled(page) -> None:
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=90_000)


def title(page) -> str:
    return page.locator(".rg-node-title").first.inner_text()


def wait_call(page, node_id: str) -> None:
    page.wait_for_selector(f".rg-node-title:has-text('{node_id} ')", timeout=90_000)
    settled(page)


def press(page, key: str, expected: str) -> None:
    """Press ``key`` with the focus on the page (not in a field) until ``expected`` is open; on a
    loaded machine a key pressed while the page is still rerunning can be dropped, so once more."""
    for attempt in range(2):
        page.evaluate("document.activeElement && document.activeElement.blur()")
        page.keyboard.press(key)
        try:
            wait_call(page, expected)
            return
        except Exception:
            if attempt:
                raise


def open_call(page, url: str, node_id: str) -> None:
    page.goto(f"{url}/?session={SESSION}&node={node_id}")
    wait_ready(page, timeout=180_000)
    wait_call(page, node_id)


def test_search_hit_opens_the_call_at_the_token(samples_app):
    with browser_page(height=1300) as page:
        page.goto(samples_app)
        wait_ready(page, timeout=180_000)
        box = page.get_by_role("searchbox", name="Search this rollout")
        box.fill("KeyError")
        box.press("Enter")
        hits = page.locator(".st-key-rg-search-hits button")
        hits.first.wait_for(timeout=90_000)
        assert "First entered the context at" in page.inner_text("body")
        target = hits.filter(has_text="c01 · #1").first  # c01: its context span holds the text
        label = target.inner_text()
        assert label.startswith("c01 · #1") and "context token 177" in label and "KeyError" in label
        page.get_by_role("searchbox", name="Search this rollout").scroll_into_view_if_needed()
        screenshot(page, "search", docs=True)
        target.click()
        wait_call(page, "c01")
        wait_url(page, "node=c01")
        marked = page.locator(".rg-tokens .rg-m")
        marked.wait_for(timeout=90_000)
        assert "KeyError" in marked.first.inner_text()
        assert marked.first.get_attribute("data-i") == "177"  # a root: its context span is its prompt
        # the hits are ringed in the DAG: one ring per matching call
        page.wait_for_function(
            DAG_JS + "() => (dag()._fullLayout.shapes || []).filter(s => s.name === 'rg-ring-hit').length >= 2",
            timeout=30_000,
        )
        hits = rings(page, "rg-ring-hit")
        assert 1 in hits  # c01 (arrival #1)


def test_keyboard_only_walk(samples_app):
    with browser_page(height=1200) as page:
        open_call(page, samples_app, "c05")  # a fork: children c06 (a retry) and c07
        steps = [("l", "c06"), ("]", "c07"), ("[", "c06"), ("h", "c05"), ("j", "c06"), ("k", "c05")]
        steps += [("ArrowRight", "c06"), ("ArrowLeft", "c05")]  # arrows do what l/h do
        for key, expected in steps:
            press(page, key, expected)
            assert title(page).startswith(expected), key
        page.keyboard.press("/")
        assert page.evaluate("document.activeElement.getAttribute('aria-label')") == "Search this rollout"
        # the parent and children are buttons too
        page.locator(".st-key-rg-relatives button", has_text="c07").first.click()
        wait_call(page, "c07")


def test_relatives_wrap_as_groups_at_1440(samples_app):
    """The parent, children and siblings each stay one group (its label and its buttons) at
    1440x900: a group wraps as a whole, so no child's button sits on the siblings' line (it read
    as a sibling) and every button is right of or below its own label."""
    with browser_page(width=1440, height=900) as page:
        for node, groups in (
            ("c05", {"parent": ["c04"], "children": ["c06", "c07"], "siblings": []}),
            ("c01", {"parent": [], "children": [], "siblings": ["c02", "c03", "c08", "c18", "c19"]}),
        ):
            open_call(page, samples_app, node)
            for name, members in groups.items():
                group = page.locator(f".st-key-rg-relatives-{name}").first
                buttons = group.locator("button:visible")  # Streamlit keeps a hidden copy of each button too
                assert buttons.all_inner_texts() == members, (node, name)
                label = group.locator("[data-testid='stCaptionContainer']").first.bounding_box()
                for box in (b.bounding_box() for b in buttons.all()):
                    assert box["y"] >= label["y"] - 20 and (box["x"] > label["x"] or box["y"] > label["y"] + 10)
            tops = [page.locator(f".st-key-rg-relatives-{n}").first.bounding_box()["y"] for n in groups]
            assert tops == sorted(tops)  # parent, then children, then siblings: never a group before another


def test_call_picker_goes_to_the_call_and_empties(samples_app):
    """The call picker below the split view: typing an id lists the matching calls, a pick opens it
    (the DAG rings it), and the picker is empty again, ready for the next pick; keys still step
    from the call picked."""
    with browser_page(height=1200) as page:
        open_call(page, samples_app, "c05")
        box = picker_box(page)
        assert box.input_value() == ""
        assert box.get_attribute("placeholder") == "Go to a call: pick it from the list or type its id"
        box.scroll_into_view_if_needed()
        box.click()
        box.fill("c07")
        page.get_by_role("option", name="c07 · #6 · agent").click()
        wait_call(page, "c07")
        wait_url(page, "node=c07")
        wait_rings(page, [6])
        assert picker_box(page).input_value() == ""
        press(page, "k", "c06")  # arrival order: c06 before c07
        assert picker_box(page).input_value() == ""


def picker_box(page):
    """The call picker's box, its "Go to a call" popover opened first when it is closed (the list
    is built only then)."""
    box = page.get_by_role("combobox", name="Call", exact=True)
    if not box.is_visible():
        # Streamlit keeps a hidden copy of the button too
        button = page.locator("[data-testid='stPopoverButton']:visible").filter(has_text="Go to a call")
        button.scroll_into_view_if_needed()
        button.click()
        box.wait_for(state="visible", timeout=20_000)
    return box


def test_back_returns_to_the_previous_call(samples_app):
    with browser_page(height=1200) as page:
        page.goto(f"{samples_app}/?session={SESSION}")
        wait_ready(page, timeout=180_000)
        for index, node_id in ((4, "c05"), (6, "c07")):
            page.evaluate(DAG_JS + "() => dag().scrollIntoView({block: 'center'})")
            # a chart that has just appeared (or redrawn around the call) can miss a click: once more
            click_until(page, lambda index=index: node_position(page, index), f".rg-node-title:has-text('{node_id} ')")
            settled(page)
        page.go_back()
        wait_call(page, "c05")
        wait_url(page, "node=c05")
        page.go_forward()
        wait_call(page, "c07")


def test_timeline_click_selects_the_call(samples_app):
    with browser_page(height=1300) as page:
        open_call(page, samples_app, "c05")
        page.get_by_text("Timeline: calls over wall time").click()
        page.wait_for_function(
            "() => Array.from(document.querySelectorAll('.js-plotly-plot')).some(g => g._fullData && g._fullData[0]"
            " && g._fullData[0].type === 'bar' && g.offsetParent !== null && g.getBoundingClientRect().height > 100)",
            timeout=90_000,
        )
        settle(page)  # the expander's opening animation
        point = page.evaluate(
            """() => {
              const gd = Array.from(document.querySelectorAll('.js-plotly-plot'))
                .find(g => g._fullData && g._fullData[0] && g._fullData[0].type === 'bar');
              const t = gd._fullData[0];
              const k = Array.from(t.customdata).indexOf(6);  // c07
              const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis, box = gd.getBoundingClientRect();
              gd.scrollIntoView({block: 'center'});
              const b = gd.getBoundingClientRect();
              return [b.left + xa._offset + xa.l2p(t.base[k] + t.x[k] / 2), b.top + ya._offset + ya.l2p(t.y[k])];
            }"""
        )
        # a chart that has just appeared can miss a click (about 1 run in 6 here): at most one more
        click_until(page, lambda: point, ".rg-node-title:has-text('c07 ')")
        settled(page)
        wait_url(page, "node=c07")
        # the DAG follows: c07 is the selected call there (ringed, its id boxed)
        wait_rings(page, [6])
        assert boxed(page) == ["<b>c07</b>"]
        page.get_by_text("Timeline: calls over wall time").scroll_into_view_if_needed()
        screenshot(page, "timeline", docs=True)


def test_inspector_shows_the_numbers(samples_app):
    with browser_page(height=1300) as page:
        open_call(page, samples_app, "c07")
        page.get_by_role("button", name="Lowest logprob").click()  # a jump pins the token too
        settled(page)
        panel = page.locator("[class*='st-key-rg-inspector'] code").first
        panel.wait_for(timeout=90_000)
        text = panel.inner_text()
        for label in ("position", "id", "text", "logprob", "probability", "rank", "loss mask", "top 1"):
            assert f"\n{label} " in "\n" + text, label
        first = text.splitlines()[0]
        page.evaluate("document.activeElement && document.activeElement.blur()")
        page.keyboard.press("ArrowRight")  # token by token
        page.wait_for_function(
            "(old) => { const c = document.querySelector(\"[class*='st-key-rg-inspector'] code\"); return c && c.innerText.split('\\n')[0] !== old; }",
            arg=first,
            timeout=90_000,
        )
        settled(page)
        # a click on a token pins that token
        token = page.locator(".rg-tokens .rg-t").nth(3)
        token.click()
        page.wait_for_function(
            "() => { const c = document.querySelector(\"[class*='st-key-rg-inspector'] code\"); return c && c.innerText.startsWith('position   3 of'); }",
            timeout=90_000,
        )
        settled(page)
        sampled = page.locator(".rg-tokens .rg-t[class*='rg-b']").nth(4)  # a sampled token: its alternatives too
        position = sampled.get_attribute("data-i")
        sampled.click()
        page.wait_for_function(
            "(p) => { const c = document.querySelector(\"[class*='st-key-rg-inspector'] code\");"
            " return c && new RegExp('^position +' + p + ' of').test(c.innerText) && c.innerText.includes('top 1'); }",
            arg=position,
            timeout=90_000,
        )
        settled(page)
        page.mouse.move(0, 0)
        page.locator("[class*='st-key-rg-inspector']").first.scroll_into_view_if_needed()
        screenshot(page, "inspector", docs=True)
        page.keyboard.press("Escape")  # unpins
        page.wait_for_function("() => !document.querySelector(\"[class*='st-key-rg-inspector'] code\")", timeout=90_000)
