"""benchmarks/bench_content.py: it reads the content arrays the loader reads, and refuses a trace
that has none (no figure is asserted: speed is for the benchmark to print, not for a test)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import orjson
import pytest

from tests.support.builders import Turn, vllm_chat

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_content", ROOT / "benchmarks" / "bench_content.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_content"] = module
    spec.loader.exec_module(module)
    return module


def _vllm_trace(path: Path, calls: int = 6, sampled: int = 60) -> Path:
    prompt, lines = [1, 2, 3], []
    for i in range(calls):
        ids = [1000 + i * sampled + k for k in range(sampled)]
        lines.append(orjson.dumps(vllm_chat(Turn(f"c{i}", list(prompt), ids))))
        prompt = prompt + ids + [9]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_it_reads_every_content_array_the_loader_cuts(tmp_path, capsys):
    bench = _bench()
    path = _vllm_trace(tmp_path / "t.jsonl")
    spans = bench.spans_of(path, 4)
    assert len(spans) == 4 and all(s.startswith(b"[{") and s.endswith(b"}]") for s in spans)
    bench.main([str(path), "--lines", "4", "--rounds", "2"])
    out = json.loads(capsys.readouterr().out)
    assert out["calls"] == 4 and out["rounds"] == 2
    for step in ("validate", "walk", "sampled", "columns"):
        assert out[f"{step}_s_per_1000_min"] >= 0 and out[f"{step}_ratio"] >= 0
    assert out["validate_ratio"] == 1.0


def test_a_trace_without_content_arrays_is_refused_by_name(tmp_path):
    bench = _bench()
    path = tmp_path / "flat.jsonl"
    path.write_bytes(b'{"prompt_token_ids":[1,2],"completion_token_ids":[3]}\n')
    with pytest.raises(SystemExit) as exc:
        bench.main([str(path)])
    assert str(path) in str(exc.value) and "no vLLM content array" in str(exc.value)
