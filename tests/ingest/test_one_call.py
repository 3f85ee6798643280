"""One record read from its line (rollout_graph.ingest.load.calls_at_line) gives exactly the calls a whole load
gives for that line: on every bundled sample (plain, gzip, a JSON document) and on odd inputs."""

from __future__ import annotations

import gzip
import json
from dataclasses import fields
from pathlib import Path

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rollout_graph.ingest.files.sources import Source
from rollout_graph.ingest.load.calls_at_line import find_call, read_calls_at
from rollout_graph.ingest.load.files import load_paths
from rollout_graph.ingest.load.trace_files import trace_files
from rollout_graph.resources import SAMPLES
from tests.support.builders import ROLLOUT, Turn, _same_value, examples, vllm_chat


def _same_call(a, b) -> None:
    for f in fields(a):
        va, vb = getattr(a, f.name), getattr(b, f.name)
        if f.name == "top_k" and va is not None and vb is not None:
            for g in ("ids", "logprobs", "texts"):
                _same_value(getattr(va, g), getattr(vb, g), f"{a.node_id}.top_k.{g}")
        elif f.name == "issues":  # a renamed duplicate gets its rename finding and its new id in the load
            assert [(x.level, x.code) for x in va if x.code != "duplicate_node_id"] == [(y.level, y.code) for y in vb]
        elif f.name != "node_id":
            _same_value(va, vb, f"{a.node_id}.{f.name}")


def _check_every_call(path: Path) -> int:
    """Every call of a whole load of ``path`` is found at its line, identical; returns the count."""
    loaded = load_paths([path])
    source = Source.from_path(path)
    n = 0
    for session in loaded.sessions.values():
        for call in session.calls:
            found = find_call(read_calls_at(source, call.line), call.session_id, call.node_id)
            assert found is not None, (path.name, call.line, call.node_id)
            _same_call(call, found)
            n += 1
    return n


def test_every_bundled_sample_call_is_read_back_from_its_line():
    files = [f for f in trace_files(SAMPLES) if "signals" not in f.name]
    assert any(f.suffix == ".gz" for f in files) and any(f.suffix == ".json" for f in files)
    total = sum(_check_every_call(f) for f in files)
    assert total > 50


def _lines(records, blank: str = "", indent: str = "", crlf: bool = False) -> bytes:
    end = "\r\n" if crlf else "\n"
    out = [indent + json.dumps(r) + end + blank for r in records]
    return "".join(out).encode()


def test_odd_layouts_blank_lines_crlf_indent_no_final_newline_gzip(tmp_path):
    records = [vllm_chat(t) for t in ROLLOUT]
    cases = {
        "blank.jsonl": _lines(records, blank="\n \n"),
        "crlf.jsonl": _lines(records, crlf=True),
        "indent.jsonl": _lines(records, indent="  \t"),
        "lead.jsonl": b"\n\n   \n" + _lines(records),
        "open.jsonl": _lines(records).rstrip(b"\n"),
        "gz.jsonl.gz": gzip.compress(_lines(records, blank="\n")),
        "array.json": json.dumps(records).encode(),
        "pretty.json": json.dumps(records, indent=2).encode(),
        "broken-first.jsonl": b'{"not json\n' + _lines(records),
    }
    for name, data in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        assert _check_every_call(path) == len(records), name


def test_duplicate_ids_are_found_under_the_loads_new_name(tmp_path):
    path = tmp_path / "dup.jsonl"
    path.write_bytes(_lines([vllm_chat(Turn("c0", [1, 2], [3])), vllm_chat(Turn("c0", [1, 2, 3, 4], [5]))]))
    loaded = load_paths([path])
    renamed = loaded.sessions["s1"].calls[1]
    assert renamed.node_id != "c0"
    found = find_call(read_calls_at(Source.from_path(path), renamed.line), "s1", renamed.node_id)
    assert found is not None and found.line == 2
    assert find_call(read_calls_at(Source.from_path(path), 2), "other-session", "c0") is None


def test_lines_that_hold_no_call_give_none(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(
        _lines([vllm_chat(ROLLOUT[0])]) + b"\n" + b"{broken\n" + b'{"x": 1}\n' + _lines([vllm_chat(ROLLOUT[1])])
    )
    source = Source.from_path(path)
    assert read_calls_at(source, 2) == []  # blank
    assert read_calls_at(source, 3) == []  # not JSON: the load skips it
    assert read_calls_at(source, 4) == []  # unknown shape
    assert read_calls_at(source, 99) == []  # past the end
    assert read_calls_at(source, 0) == []
    assert [c.node_id for c in read_calls_at(source, 5)] == ["c1"]
    assert read_calls_at(Source.from_path(tmp_path / "missing.jsonl"), 1) == []


_record = st.builds(
    lambda i, prompt, sampled, session: vllm_chat(Turn(f"c{i}", prompt, sampled, session=session)),
    st.integers(0, 6),  # small: duplicate ids are common
    st.one_of(st.none(), st.lists(st.integers(0, 9), max_size=6)),
    st.lists(st.integers(0, 9), max_size=4),
    st.sampled_from(["s1", "s2"]),
)
_gap = st.sampled_from(["", "\n", " \n", "\r\n", "\t"])


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    records=st.lists(st.one_of(_record, st.just("{bad"), st.just('"text"')), min_size=1, max_size=8),
    gaps=st.lists(_gap, min_size=8, max_size=8),
)
def test_any_jsonl_layout_reads_back_the_loads_calls(tmp_path_factory, records, gaps):
    assume(any(isinstance(r, dict) for r in records))
    body = "".join(
        gap + (r if isinstance(r, str) else json.dumps(r)) + "\n" for r, gap in zip(records, gaps, strict=False)
    )
    path = tmp_path_factory.mktemp("prop") / "t.jsonl"
    path.write_bytes(body.encode())
    _check_every_call(path)


def test_the_early_detail_escapes_the_record_and_colours_only_its_sampled_tokens(tmp_path):
    from rollout_graph.ui.builders import early

    hostile = "<script>window.__pwned=1</script>"
    path = tmp_path / "h.jsonl"
    path.write_bytes(_lines([vllm_chat(Turn(hostile, [1, 2, 3], [4, 5], logprobs=[-0.5, -3.0], session=hostile))]))
    (call,) = read_calls_at(Source.from_path(path), 1)
    html = early.header_html(call, "h.jsonl", 1)
    assert "<script>" not in html and "&lt;script&gt;" in html
    strip = early.sampled_strip(call)
    assert strip.ids.tolist() == [4, 5] and strip.sampled.all()
    assert strip.logprobs.tolist() == [-0.5, -3.0]
    assert strip.top_ids.shape == (2, 2) and strip.top_ids[:, 0].tolist() == [4, 5]  # its alternatives
    assert "<script>" not in early.note_html(479_000_000) and "479 MB" in early.note_html(479_000_000)


def test_lines_are_found_across_read_blocks_and_over_long_ones_are_never_held(tmp_path, monkeypatch):
    """The line is found by reading the file in blocks (never a memory map: a file truncated under
    one kills the process); tiny blocks put every newline and record on a block boundary."""
    from rollout_graph.ingest.limits import Limits
    from rollout_graph.ingest.load import calls_at_line as one_call

    monkeypatch.setattr(one_call, "_BLOCK", 7)
    records = [vllm_chat(t) for t in ROLLOUT]
    path = tmp_path / "blocks.jsonl"
    path.write_bytes(b"\n  \n" + _lines(records, blank="\n \n", indent=" "))
    assert _check_every_call(path) == len(records)
    # a line over max_line_bytes is refused like the loader refuses it, and no call is made of it
    big = tmp_path / "big.jsonl"
    big.write_bytes(_lines(records))
    limits = Limits(max_line_bytes=64)
    assert read_calls_at(Source.from_path(big), 2, limits) == []
