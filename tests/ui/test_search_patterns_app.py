"""A visitor's regular expression in the app (issue 41 item 1): a catastrophic pattern on the bundled
sample ends at its time limit with a message naming the limit, the page's run ends, and a good
pattern then finds its hits. The pattern runs in a capped child process (graph/analysis/patterns.py);
tests/browser/test_browser_regex.py checks a second visitor and the health check meanwhile."""

from __future__ import annotations

import os
import time

from rollout_graph.analysis.patterns import ENV_SECONDS
from rollout_graph.escape import md_escape
from tests.support.apptest import app, no_errors

REDOS = r"(\w+\s?)*@@@"


def _search(at, text: str, regex: bool):
    box = next(t for t in at.text_input if t.label == "Search this rollout")
    toggle = next(t for t in at.toggle if t.label == "Regex")
    toggle.set_value(regex)
    box.set_value(text)
    return at.run()


def test_a_catastrophic_regex_stops_at_its_limit_and_the_page_goes_on(monkeypatch):
    monkeypatch.setenv(ENV_SECONDS, "1")
    at = app(monkeypatch, session="list-todos")
    no_errors(at)
    started = time.monotonic()
    at = _search(at, REDOS, regex=True)
    elapsed = time.monotonic() - started
    no_errors(at)
    errors = [e.value for e in at.error]
    assert any("took longer than 1 s" in e and md_escape(ENV_SECONDS) in e for e in errors), errors
    # the run waited for the child's deadline, not for the pattern (exponential: hours)
    assert elapsed < 60, elapsed
    children = [p for p in os.listdir("/proc") if p.isdigit() and _is_pattern_child(p)]
    assert children == [], children  # the child was killed, not left running

    at = _search(at, r"No such \w+", regex=True)
    no_errors(at)
    assert not at.error, [e.value for e in at.error]
    assert any("hit(s) in" in m.value for m in at.markdown), [m.value for m in at.markdown]


def test_a_pattern_that_matches_the_empty_string_is_refused(monkeypatch):
    at = app(monkeypatch, session="list-todos")
    at = _search(at, "(?:|)" * 40 + "(?!)", regex=True)  # exponential even on the empty string
    no_errors(at)
    assert at.error, "expected the pattern to be refused"


def _is_pattern_child(pid: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"_pattern_child.py" in f.read() and os.getppid() != int(pid)
    except OSError:
        return False
