"""``restore`` walks objects before lists (it stops once every marker is placed, usually before
a long list of ids): it must place exactly what the plain walk in order places, wherever the
markers are, odd values included (markers inside lists, which are never placed; marker-like
strings that are no marker; lists mixing scalars and objects)."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rollout_graph.ingest.shortcuts.markers import _NESTING, restore
from tests.support.builders import examples


def _plain_restore(value: Any, arrays: dict[str, Any]) -> None:
    """The walk restore replaced (in order, one stack): the reference."""
    pending = [value]
    remaining = len(arrays)
    while pending and remaining:
        node = pending.pop()
        if isinstance(node, dict):
            items: Any = node.items()
        elif not _NESTING.intersection(map(type, node)):
            continue
        else:
            items = enumerate(node)
        for key, child in items:
            if isinstance(child, str):
                if child[:1] == "\x00" and child in arrays and isinstance(node, dict):
                    node[key] = arrays[child]
                    remaining -= 1
            elif isinstance(child, (dict, list)):
                pending.append(child)


_MARKERS = [f"\x00ids-test:{i}" for i in range(4)]
_scalars = st.one_of(
    st.integers(-3, 300),
    st.none(),
    st.booleans(),
    st.text(max_size=4),
    st.sampled_from(["\x00", "\x00ids-test:9", "\x00ids-other:0"]),  # look like markers, are not
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=6),
        st.dictionaries(st.text(max_size=3), inner, max_size=5),
    ),
    max_leaves=40,
)


def _paths(value: Any, path: tuple = ()) -> list[tuple]:
    """Every place a marker could be put: a dict's key (new or existing) or a list's index."""
    out = []
    if isinstance(value, dict):
        out.append((*path, ("dict", None)))
        for key, child in value.items():
            out += _paths(child, (*path, ("key", key)))
    elif isinstance(value, list):
        out.append((*path, ("list", None)))
        for i, child in enumerate(value):
            out += _paths(child, (*path, ("index", i)))
    return out


def _put(value: Any, path: tuple, marker: str, n: int) -> None:
    node = value
    for _kind, step in path[:-1]:
        node = node[step]
    kind, _ = path[-1]
    if kind == "dict":
        node[f"marker{n}"] = marker  # longer than any generated key
    else:
        node.append(marker)  # a marker in a list: never placed by either walk


class _Array:
    """What a marker stands for (compared by identity)."""


@settings(max_examples=examples(500), deadline=None)
@given(
    st.dictionaries(st.text(max_size=3), _values, max_size=5) | st.lists(_values, max_size=5),
    st.lists(st.integers(0, 10_000), max_size=4),
    st.integers(0, 4),
)
def test_restore_places_what_the_plain_walk_places(value, spots, extra):
    places = _paths(value)
    for n, spot in enumerate(spots):
        _put(value, places[spot % len(places)], _MARKERS[n], n)
    # arrays may also hold markers the line does not (the walk then looks everywhere)
    arrays = {m: _Array() for m in _MARKERS[: min(4, len(spots) + extra)]}
    want, got = copy.deepcopy(value), copy.deepcopy(value)
    # deepcopy would copy the arrays' objects too: the same objects in both
    _plain_restore(want, arrays)
    restore(got, arrays)
    assert _same(got, want)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, _Array) or isinstance(b, _Array):
        return a is b
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def test_the_markers_of_an_engine_pair_are_placed_before_its_token_ids_are_looked_at():
    """The common record: markers in the response's objects, a long list of ids beside them."""
    ids = list(range(5000))
    value = {
        "request": {"messages": _MARKERS[2], "tools": [{"type": "function", "function": {"name": "ls"}}]},
        "response": {
            "prompt_token_ids": _MARKERS[0],
            "choices": [{"message": {"content": "hi"}, "logprobs": {"content": _MARKERS[1]}, "token_ids": ids}],
        },
    }
    arrays = {m: _Array() for m in _MARKERS[:3]}
    want = copy.deepcopy(value)
    _plain_restore(want, arrays)
    restore(value, arrays)
    assert _same(value, want)
    assert value["response"]["prompt_token_ids"] is arrays[_MARKERS[0]]
    assert value["response"]["choices"][0]["logprobs"]["content"] is arrays[_MARKERS[1]]
    assert value["request"]["messages"] is arrays[_MARKERS[2]]
    assert value["response"]["choices"][0]["token_ids"] is ids


def test_a_scalar_or_an_empty_value_is_left_alone():
    for value in ([], {}, [1, 2, "\x00ids-test:0"], {"a": [[], {}]}):
        want = copy.deepcopy(value)
        restore(value, {_MARKERS[0]: _Array()})
        assert value == want


def _strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for child in value.values() for s in _strings(child)]
    if isinstance(value, list):
        return [s for child in value for s in _strings(child)]
    return [value] if isinstance(value, str) else []


_ENGINE_PLACES = (
    ("response", "prompt_token_ids"),
    ("response", "choices", 0, "logprobs", "content"),
    ("request", "messages"),
)


def _engine_pair(at_places: list[bool], filler: Any, odd: int) -> dict:
    """An engine pair whose known places hold a marker (where ``at_places`` says) or filler; ``odd``
    breaks one level of the shape (a list for an object, an empty or scalar choices)."""
    value: dict = {
        "request": {"model": "m", "messages": filler, "tools": [{"type": "function"}]},
        "response": {"prompt_token_ids": filler, "choices": [{"logprobs": {"content": filler}, "token_ids": [1]}]},
    }
    for n, (on, path) in enumerate(zip(at_places, _ENGINE_PLACES, strict=True)):
        if on:
            node = value
            for step in path[:-1]:
                node = node[step]
            node[path[-1]] = _MARKERS[n]
    if odd == 1:
        value["response"]["choices"] = []
    elif odd == 2:
        value["response"]["choices"] = [value["response"]["choices"][0]["logprobs"]]
    elif odd == 3:
        value["request"] = [value["request"]]
    elif odd == 4:
        value["response"]["choices"][0]["logprobs"] = [_MARKERS[1]]  # in a list: never placed
    return value


@settings(max_examples=examples(500), deadline=None)
@given(
    st.lists(st.booleans(), min_size=3, max_size=3),
    _values,
    st.integers(0, 5),
    st.lists(st.integers(0, 10_000), max_size=2),
    st.integers(0, 4),
)
def test_the_engine_pair_places_looked_at_first_give_what_the_plain_walk_gives(at_places, filler, odd, spots, extra):
    """Markers where an engine pair holds them, elsewhere too (the walk goes on for those), or
    missing from the line (the walk looks everywhere): the same as the plain walk."""
    value = _engine_pair(at_places, filler, odd)
    places = _paths(value)
    for n, spot in enumerate(spots):
        if _MARKERS[3 - n] not in _strings(value):  # each marker at most once, as in a cut line
            _put(value, places[spot % len(places)], _MARKERS[3 - n], 3 - n)
    arrays = {m: _Array() for m in _MARKERS[: min(4, 2 + extra)]}
    want, got = copy.deepcopy(value), copy.deepcopy(value)
    _plain_restore(want, arrays)
    restore(got, arrays)
    assert _same(got, want)
