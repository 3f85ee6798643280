"""The fast loading paths give exactly what the plain sequential loader gives: the typed logprob
decoder, the parallel range parser and the persistent parsed-trace cache (docs/performance.md)."""

from __future__ import annotations

import gzip
import json
import mmap
import os
from pathlib import Path
from unittest import mock

import numpy as np
import orjson
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rollout_graph.ingest.files.sources import Source
from rollout_graph.ingest.load import cache
from rollout_graph.ingest.load import pool as parallel
from rollout_graph.ingest.load.calls import load_sources
from rollout_graph.ingest.load.files import load_files, load_paths, read_files
from rollout_graph.ingest.load.progress import LoadProgress
from rollout_graph.ingest.shortcuts import logprob_entries, logprob_spans
from rollout_graph.ingest.shortcuts.id_arrays import IdArrayCutter
from rollout_graph.ingest.values import line as line_module
from rollout_graph.resources import SAMPLES
from tests.support.builders import Turn, assert_same_load, vllm_chat, write
from tests.support.waiting import wait_until

# ------------------------------------------------------------------------------------------------
# The typed decoder for logprob entries

odd_token = st.one_of(
    st.integers(0, 200).map(lambda i: f"token_id:{i}"),
    st.integers(-3, 2**65),
    st.text(max_size=4),
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
)
odd_logprob = st.one_of(
    st.floats(-20, 0),
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(-3, 3),
    st.booleans(),
    st.none(),
    st.text(max_size=3),
)


def _entry(token, logprob, alts, shape):
    entry: dict = {"token": token, "logprob": logprob}
    if shape == "missing-top":
        return entry
    if shape == "null-top":
        entry["top_logprobs"] = None
    elif shape == "bytes":
        entry.update({"bytes": [104, 105], "top_logprobs": alts})
    else:
        entry["top_logprobs"] = alts
    return entry


alt = st.fixed_dictionaries({"token": odd_token, "logprob": odd_logprob}) | st.just({"token": "token_id:1"})
entries = st.lists(
    st.one_of(
        st.builds(
            _entry,
            odd_token,
            odd_logprob,
            st.lists(alt, max_size=4),
            st.sampled_from(["plain", "plain", "missing-top", "null-top", "bytes"]),
        ),
        st.just(5),  # not an object: the generic path reads it as an entry of nothing
    ),
    max_size=12,
)


def _generic(raw: bytes, *args):
    return raw, {}


def _load_both(lines: list[bytes]):
    data = b"\n".join(lines) + b"\n"
    with mock.patch.object(logprob_spans, "MIN_CUT_BYTES", 0):
        fast = load_sources([Source.from_bytes("t.jsonl", data)])
    with (
        mock.patch.object(line_module, "holds_alternatives", lambda *a: False),
        mock.patch.object(line_module, "located_span", _none),
    ):
        slow = load_sources([Source.from_bytes("t.jsonl", data)])
    return fast, slow


def _none(raw: bytes, *_):
    return None


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")  # float32 top-k, both paths
@settings(deadline=None)
@given(st.lists(entries, min_size=1, max_size=4), st.booleans())
def test_typed_logprobs_agree_with_generic_json(contents, spaced):
    """Calls and findings are the same whichever path decoded the logprob entries."""
    lines = []
    for i, content in enumerate(contents):
        record = vllm_chat(Turn(f"c{i}", [1, 2, 3], [4] * len(content)))
        record["response"]["choices"][0]["logprobs"] = {"content": content}
        separators = (", ", ": ") if spaced else (",", ":")
        lines.append(json.dumps(record, separators=separators).encode())
    fast, slow = _load_both(lines)
    assume(slow.loaded)
    assert_same_load(fast, slow)


def _skimmed(raw: bytes) -> tuple[bytes, list]:
    """The line cut as the skim cuts it, and the content arrays' columns cut."""
    cut, found = line_module.cut_line(raw, IdArrayCutter(), locate=False)
    return cut, [v for v in found.values() if isinstance(v, logprob_entries.LogprobColumns)]


def test_typed_path_is_taken_for_plain_vllm_entries():
    record = vllm_chat(Turn("c0", [1, 2, 3], list(range(40))))
    raw = orjson.dumps(record)
    with mock.patch.object(logprob_spans, "MIN_CUT_BYTES", 0):
        cut, found = _skimmed(raw)
    assert len(found) == 1 and len(cut) < len(raw)
    assert len(found[0].tokens) == 40


@pytest.mark.parametrize(
    "change",
    [
        lambda r: r.update({"prompt_token_ids": [1, 2]}),  # a flat trace entry, not an engine pair
        lambda r: r.update({"turns": [], "sequences": []}),  # a rollout document
        lambda r: r["response"].update({"choices": "x"}),
        lambda r: r.pop("request"),
    ],
)
def test_records_that_are_not_engine_pairs_are_never_cut(change):
    record = vllm_chat(Turn("c0", [1, 2, 3], list(range(40))))
    change(record)
    with mock.patch.object(logprob_spans, "MIN_CUT_BYTES", 0):
        _, found = _skimmed(orjson.dumps(record))
    assert not found


# ------------------------------------------------------------------------------------------------
# Parallel range parsing


def _messy_trace(path: Path, n: int = 120) -> Path:
    """Good records with bad lines, blank lines, records without ids and duplicate ids spread
    over the file, so they land on every side of range boundaries."""
    lines: list[bytes] = []
    prompt: list[int] = [1, 2, 3]
    for i in range(n):
        sampled = [100 + i, 7, 8]
        record = vllm_chat(Turn(f"c{i % 50}", list(prompt), sampled, messages=[{"role": "user", "content": "x" * i}]))
        if i % 7 == 3:
            record.pop("call_id")  # its node id is its line number
        lines.append(orjson.dumps(record))
        if i % 11 == 5:
            lines.append(b'{"request": {}, "broken')
        if i % 13 == 0:
            lines.append(b"")
        if i % 17 == 9:
            lines.append(b'["not an object"]')
        prompt = prompt + sampled + [9]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_parallel_load_equals_sequential(tmp_path, monkeypatch):
    trace = _messy_trace(tmp_path / "a.jsonl")
    other = tmp_path / "b.jsonl.gz"
    other.write_bytes(gzip.compress(_messy_trace(tmp_path / "plain.jsonl", 30).read_bytes()))
    (tmp_path / "plain.jsonl").unlink()
    monkeypatch.setattr(parallel, "CHUNK_BYTES", trace.stat().st_size // 5)
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 0)
    assert len(parallel.split_ranges(trace)) >= 4
    seen = []
    fast = read_files([trace, other], progress=seen.append, workers=2)
    slow = load_paths([trace, other])
    assert_same_load(fast, slow)
    assert seen[-1].bytes_done == seen[-1].bytes_total == trace.stat().st_size + other.stat().st_size
    assert seen[-1].calls == slow.loaded
    assert [p.bytes_done for p in seen] == sorted(p.bytes_done for p in seen)


def test_ranges_start_at_lines_that_parse_alone(tmp_path):
    trace = _messy_trace(tmp_path / "a.jsonl")
    data = trace.read_bytes()
    ranges = parallel.split_ranges(trace, chunk=len(data) // 6)
    assert ranges[0][:1] == (0,) and ranges[-1][1] == len(data)
    for (start, end, first), nxt in zip(ranges, ranges[1:] + [None], strict=True):
        assert data[:start].count(b"\n") + 1 == first
        line = data[start : data.index(b"\n", start)]
        orjson.loads(line)  # never a broken line: no range is mistaken for a document
        if nxt is not None:
            assert end == nxt[0]


def test_a_document_file_is_never_split(tmp_path):
    doc = tmp_path / "doc.json"
    doc.write_text(json.dumps([vllm_chat(Turn(f"c{i}", [1], [2])) for i in range(50)], indent=2))
    assert parallel.split_ranges(doc, chunk=100) == [(0, -1, 1)]


def test_uploads_parsed_in_workers_equal_sequential(tmp_path):
    data = _messy_trace(tmp_path / "a.jsonl", 40).read_bytes()
    named = [("up.jsonl", data), ("up2.jsonl.gz", gzip.compress(data))]
    fast = parallel.load_bytes_parallel(named)
    slow = load_sources([Source.from_bytes(n, d) for n, d in named])
    assert_same_load(fast, slow)


# ------------------------------------------------------------------------------------------------
# The persistent cache


def test_every_call_field_has_a_column():
    assert cache.call_fields_covered()


@pytest.mark.parametrize("which", ["samples", "messy", "synthetic"])
def test_cached_load_equals_fresh_load(tmp_path, which):
    if which == "samples":
        files = sorted(f for f in SAMPLES.rglob("*") if f.suffix in (".jsonl", ".json", ".gz", ".zst"))
        files = [f for f in files if f.name not in ("tokenizer.json", "tokenizer_config.json")]
    elif which == "messy":
        files = [_messy_trace(tmp_path / "m.jsonl")]
    else:
        import sys

        sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
        from synthetic import write_trace

        write_trace(tmp_path / "s.jsonl", 60, seed=1)
        files = [tmp_path / "s.jsonl"]
    folder = tmp_path / "cache"
    fresh = load_files(files, folder=folder, workers=1)
    assert len(list(folder.iterdir())) == 1
    cached = load_files(files, folder=folder, workers=1)
    assert_same_load(cached, fresh)
    assert_same_load(cached, load_paths(files))
    # arrays are in the process's own memory (never a view of a file that could change), as
    # writable as the fresh ones (prompts that share an arena are read-only on both sides)
    pairs = [
        (a, b)
        for sa, sb in zip(cached.sessions.values(), fresh.sessions.values(), strict=True)
        for a, b in zip(sa.calls, sb.calls, strict=True)
    ]
    call, fresh_call = next((a, b) for a, b in pairs if a.prompt_ids is not None)
    assert call.prompt_ids is not None and fresh_call.prompt_ids is not None
    assert not isinstance(call.prompt_ids.base, np.memmap) and not isinstance(call.prompt_ids.base, mmap.mmap)
    assert call.prompt_ids.flags.writeable == fresh_call.prompt_ids.flags.writeable
    assert call.sampled_ids.flags.writeable == fresh_call.sampled_ids.flags.writeable


def test_a_delayed_background_store_writes_the_entry_later(tmp_path):
    files = [_messy_trace(tmp_path / "m.jsonl", 30)]
    folder = tmp_path / "cache"
    fresh = load_files(files, folder=folder, workers=1, background_store=True, store_delay=1.0)
    assert not folder.exists() or not any(folder.iterdir())  # nothing written yet: the caller goes on first
    wait_until(lambda: cache.load(cache.key_for_files(files), folder), timeout=60, what="the delayed store")
    assert_same_load(load_files(files, folder=folder, workers=1), fresh)
    assert len(list(folder.iterdir())) == 1


def test_corrupt_entry_is_ignored_and_rebuilt(tmp_path):
    files = [_messy_trace(tmp_path / "m.jsonl", 30)]
    folder = tmp_path / "cache"
    fresh = load_files(files, folder=folder, workers=1)
    (entry,) = folder.iterdir()
    calls = entry / "arrays.bin"
    calls.write_bytes(calls.read_bytes()[: calls.stat().st_size // 2])
    assert cache.load(cache.key_for_files(files), folder) is None
    assert not entry.exists()
    assert_same_load(load_files(files, folder=folder, workers=1), fresh)
    assert cache.load(cache.key_for_files(files), folder) is not None
    (entry / "meta.json").write_bytes(b"{not json")
    assert cache.load(cache.key_for_files(files), folder) is None


def test_key_changes_with_the_file_the_format_and_the_limits(tmp_path, monkeypatch):
    trace = _messy_trace(tmp_path / "m.jsonl", 10)
    key = cache.key_for_files([trace])
    assert cache.key_for_files([trace], limits="tight") != key
    os.utime(trace, ns=(1, 1))
    touched = cache.key_for_files([trace])
    assert touched != key
    monkeypatch.setattr(cache, "FORMAT", cache.FORMAT + 1)
    assert cache.key_for_files([trace]) != touched


def test_cache_lives_outside_the_trace_folder(tmp_path, monkeypatch):
    monkeypatch.delenv(cache.ENV_DIR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == tmp_path / "xdg" / "rollout-graph"
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path / "mine"))
    assert cache.cache_dir() == tmp_path / "mine"
    monkeypatch.setenv(cache.ENV_DIR, "off")
    assert not cache.enabled()
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path / "mine"))
    (tmp_path / "traces").mkdir()
    trace = _messy_trace(tmp_path / "traces" / "m.jsonl", 5)
    load_files([trace])
    assert len(list((tmp_path / "mine").iterdir())) == 1
    assert [p.name for p in (tmp_path / "traces").iterdir()] == ["m.jsonl"]


def test_values_json_cannot_carry_are_not_cached(tmp_path):
    record = vllm_chat(Turn("c0", [1, 2], [3]))
    record["timing"] = {"latency_s": float("nan")}
    trace = tmp_path / "nan.jsonl"
    trace.write_bytes(json.dumps(record).encode() + b"\n")  # the stdlib writes NaN
    folder = tmp_path / "cache"
    loaded = load_files([trace], folder=folder, workers=1)
    assert np.isnan(loaded.sessions["s1"].calls[0].timing["latency_s"])
    assert not folder.exists() or not any(folder.iterdir())


def test_least_recently_used_entries_leave_a_full_cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    traces = [write(tmp_path / f"t{i}.jsonl", [vllm_chat(Turn(f"c{i}", [1] * 500, [2]))]) for i in range(3)]
    for t in traces:
        load_files([t], folder=folder, workers=1)
    one = sum(f.stat().st_size for f in next(folder.iterdir()).iterdir())
    monkeypatch.setenv(cache.ENV_MAX, str(int(one * 2.5)))
    load_files([traces[0]], folder=folder, workers=1)  # used again: now the most recent
    os.utime(cache._entry(cache.key_for_files([traces[0]]), folder))
    fourth = write(tmp_path / "t3.jsonl", [vllm_chat(Turn("c3", [1] * 500, [2]))])
    load_files([fourth], folder=folder, workers=1)
    kept = {p.name for p in folder.iterdir()}
    assert cache._entry(cache.key_for_files([traces[0]]), folder).name in kept
    assert cache._entry(cache.key_for_files([fourth]), folder).name in kept
    assert len(kept) == 2


def test_cli_reads_the_same_with_and_without_cache(tmp_path, capsys):
    from rollout_graph.cli import main

    trace = _messy_trace(tmp_path / "m.jsonl", 40)
    outputs = []
    for flags in ([], [], ["--no-cache"]):
        with mock.patch.dict(os.environ, {cache.ENV_DIR: str(tmp_path / "c")}):
            assert main(["inspect", str(trace), "--json", *flags]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] == outputs[2]
    assert (tmp_path / "c").is_dir()


def test_stderr_progress_names_bytes_and_calls(capsys, monkeypatch):
    from rollout_graph.cli.common import StderrProgress

    show = StderrProgress(every=0)
    show(LoadProgress(50_000_000, 100_000_000, 300, 300, 0, 1))
    show(LoadProgress(100_000_000, 100_000_000, 600, 598, 0, 1))
    err = capsys.readouterr().err
    assert "50 of 100 MB read · 300 calls" in err and "100 of 100 MB read · 598 calls" in err
    StderrProgress(every=0)(LoadProgress(10, 100, 1, 1, 0, 1))  # a small load: silent
    assert capsys.readouterr().err == ""
