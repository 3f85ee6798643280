"""The bundled real-harness traces (sample_traces/harnesses/): every finding, near-miss kind and
count, asserted against one golden file.

The golden file is tests/golden/harness_samples.json. After re-running the harnesses
(tools/run_harness_samples.py) or changing an analysis on purpose, regenerate it with
``.venv/bin/python tools/run_harness_samples.py --golden`` and review the diff."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest

from rollout_graph.resources import SAMPLES

ROOT = SAMPLES.parent
GOLDEN = ROOT / "tests" / "golden" / "harness_samples.json"
TRACES = sorted((SAMPLES / "harnesses").glob("*.jsonl.gz"))


def _runner():
    spec = importlib.util.spec_from_file_location("run_harness_samples", ROOT / "tools" / "run_harness_samples.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not TRACES, reason="no bundled harness traces")
def test_harness_samples_match_the_golden_file():
    expected = json.loads(GOLDEN.read_text())
    assert _runner().golden() == expected


@pytest.mark.skipif(not TRACES, reason="no bundled harness traces")
def test_harness_samples_load_cleanly_and_carry_tokens():
    from rollout_graph.ingest.load.files import load_paths

    for path in TRACES:
        loaded = load_paths([path])
        assert loaded.records and not loaded.skipped, path.name
        calls = [c for s in loaded.sessions.values() for c in s.calls]
        assert all(c.prompt_ids is not None and c.n_sampled for c in calls), path.name
        assert all(c.logprobs_aligned for c in calls), path.name
