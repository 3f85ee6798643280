"""The explorer's "Filter calls" panel through AppTest: its widgets are built only while the
expander is open, and a filter chosen there stays on (the DAG dimmed, the note above it) when
the expander is closed and when it is opened again."""

from __future__ import annotations

from tests.support.apptest import app, no_errors


def _open_key(at) -> str:
    return next(k for k in at.session_state.keys() if str(k).startswith("rg_filter-open-"))


def _note(at) -> list[str]:
    return [c.value for c in at.caption if c.value.startswith("Filter on:")]


def _dimmed(at) -> int:
    import json

    traces = [t for chart in at.get("plotly_chart") for t in json.loads(chart.proto.spec)["data"]]
    return sum(len(t["x"]) for t in traces if t.get("name") == "dimmed")  # the DAG's veil over them


def test_filter_widgets_are_built_only_when_open_and_the_filter_survives_closing(monkeypatch):
    at = app(monkeypatch)
    no_errors(at)
    assert not [m for m in at.multiselect if m.label == "Role"]  # closed: not built
    assert not _note(at) and _dimmed(at) == 0
    at.session_state[_open_key(at)] = True  # what a click on the expander's title does
    at.run()
    no_errors(at)
    role = next(m for m in at.multiselect if m.label == "Role")
    assert role.options[0].startswith("agent (")  # each value with how many calls have it
    auxiliary = next(o for o in role.options if not o.startswith("agent")).split(" (")[0]
    role.select(auxiliary).run()
    no_errors(at)
    (note,) = _note(at)
    matched = int(note.split("Filter on: ")[1].split(" of ")[0])
    assert 0 < matched < 25
    veiled = _dimmed(at)  # the drawn calls that do not match (a collapsed chain is one handle)
    assert veiled > 0
    at.session_state[_open_key(at)] = False  # closed again: the widgets go, the filter stays
    at.run()
    no_errors(at)
    assert not [m for m in at.multiselect if m.label == "Role"]
    assert _note(at) == [note] and _dimmed(at) == veiled
    at.run()  # and on the next run too (Streamlit drops the state of widgets a run does not draw)
    assert _note(at) == [note] and _dimmed(at) == veiled
    at.session_state[_open_key(at)] = True
    at.run()
    no_errors(at)
    assert next(m for m in at.multiselect if m.label == "Role").value == [auxiliary]
    assert _note(at) == [note]
