"""The whole command with the C speedups and without them: the same bytes (stdout, exit code,
stderr) on every bundled sample and fixture, a synthetic vLLM trace and a trace of odd content
arrays (escapes, UTF-8, commas in tokens, int and null logprobs, `bytes` arrays, whitespace,
malformed and truncated lines), each line's fast path compared with the path it stands for. The
functions' own tests (tests/test_speedups_*.py) compare each one on generated inputs."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from rollout_graph.ingest import speedups

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(speedups.native is None, reason="the C speedups are not built")


def same_inspect():
    spec = importlib.util.spec_from_file_location("same_inspect", ROOT / "benchmarks" / "same_inspect.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def entry(token: str, logprob, top: list | None = None, **extra) -> dict:
    row = {"token": token, "logprob": logprob, **extra}
    row["top_logprobs"] = top if top is not None else [{"token": token, "logprob": logprob}]
    return row


def pair(call: str, prompt: list[int], content: list[dict], sampled: list[int] | None = None) -> dict:
    choice = {"index": 0, "message": {"role": "assistant", "content": "x"}, "logprobs": {"content": content}}
    choice["finish_reason"] = "stop"
    if sampled is not None:
        choice["token_ids"] = sampled
    return {
        "call_id": call,
        "session_id": "odd",
        "request": {"model": "m", "messages": [{"role": "user", "content": "hi " * 400}], "logprobs": True},
        "response": {"object": "chat.completion", "prompt_token_ids": prompt, "choices": [choice]},
    }


def odd_lines() -> list[bytes]:
    """Content arrays of each kind the scanner reads or declines (long enough to be cut: 2 KB)."""
    prompt = list(range(100, 300))
    ids = [entry(f"token_id:{1000 + k}", -0.5 - k / 100) for k in range(40)]
    texts = [entry(t, -0.25, bytes=list(t.encode())) for t in ["caf\u00e9", "\n", '"q"', "\\", "\u2603", "a b"] * 8]
    commas = [entry(",", -1.0), *[entry(f"w{k}", -0.1) for k in range(60)]]
    ints = [entry(f"token_id:{k}", 0 if k == 3 else -1.5) for k in range(50)]
    nulls = [entry(f"token_id:{k}", None if k == 7 else -1.5) for k in range(50)]
    numbers = [entry(f"token_id:{k}", v) for k, v in enumerate([-0.0, -1e-320, -1.7976931348623157e308, -2.5e-5] * 12)]
    lines = [
        orjson_line(pair("ids", prompt, ids, [1000 + k for k in range(40)])),
        orjson_line(pair("texts", prompt + [1], texts)),
        orjson_line(pair("commas", prompt + [2], commas)),
        orjson_line(pair("ints", prompt + [3], ints)),
        orjson_line(pair("nulls", prompt + [4], nulls)),
        orjson_line(pair("numbers", prompt + [5], numbers)),
        json.dumps(pair("spaced", prompt + [6], ids), indent=None, separators=(", ", ": ")).encode(),
    ]
    good = lines[0]
    lines.append(good.replace(b'"top_logprobs":[', b'"top_logprobs":[]]', 1))  # a bracket too many: not JSON
    lines.append(good[: len(good) // 2])  # truncated in the content array
    lines.append(good.replace(b"token_id:1005", b"token_id:1005\xff", 1))  # invalid UTF-8 in a token
    lines.append(good.replace(b'"logprob":-0.5,', b'"logprob":-0.5,"logprob":-0.6,', 1))  # a repeated key
    lines.append(good.replace(b"-0.51", b"-0.51e", 1))  # a number cut short
    return lines


def orjson_line(value: dict) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def test_the_command_prints_the_same_bytes_with_and_without_the_speedups(tmp_path, monkeypatch):
    module = same_inspect()
    odd = tmp_path / "odd.jsonl"
    odd.write_bytes(b"\n".join(odd_lines()) + b"\n")
    synthetic = tmp_path / "synthetic.jsonl"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "synthetic.py"),
            str(synthetic),
            "--calls",
            "200",
            "--max-context",
            "3000",
            "--summary-tokens",
            "50",
        ],
        check=True,
        capture_output=True,
    )
    paths = module.inputs([odd, synthetic], tmp_path, synthetic=False)
    on = module.run(ROOT, paths)
    monkeypatch.setenv("ROLLOUT_GRAPH_SPEEDUPS", "off")
    off = module.run(ROOT, paths)
    different = [str(p) for p, a, b in zip(paths, on, off, strict=True) if module.comparable(a) != module.comparable(b)]
    assert not different, different
    # not vacuous: the odd trace loads its good lines and reports its bad ones
    code, out, _ = on[paths.index(odd)]
    load = json.loads(out)["load"]
    assert code == 0 and load["records"] == 12 and load["loaded"] == 8
    assert [s["line"] for s in load["skipped"]] == [8, 9, 10, 12]  # the repeated key is JSON (line 11)
