"""The Hugging Face Space: the Dockerfile's entry command, run directly (CI cannot build images
offline), answers its health check, renders in Chromium, takes uploads and shows no server path;
and the first-run guide reaches each kind of interesting call in one click."""

from __future__ import annotations

import json
import re
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.support.browser import ROOT, browser_page, require_chromium, running_app, wait_ready
from tests.support.builders import Turn, vllm_chat


def dockerfile_cmd() -> list[str]:
    text = (ROOT / "Dockerfile").read_text()
    return json.loads(re.search(r"^CMD (\[.*\])$", text, re.M).group(1))


def test_dockerfile_runs_as_user_1000_on_port_8501():
    text = (ROOT / "Dockerfile").read_text()
    assert "useradd --create-home --uid 1000 user" in text and "\nUSER user\n" in text
    assert "EXPOSE 8501" in text
    assert dockerfile_cmd() == ["rollout-graph", "view", "--public", "--port", "8501"]
    front = (ROOT / "README.md").read_text().split("---")[1]
    assert "sdk: docker" in front and "app_port: 8501" in front


@pytest.mark.browser
@pytest.mark.slow
def test_space_entry_command_serves_the_samples_and_takes_uploads(tmp_path):
    require_chromium()
    args = dockerfile_cmd()[2:]  # the same command, on a free port
    args = [a for i, a in enumerate(args) if a != "--port" and (i == 0 or args[i - 1] != "--port")]
    upload = tmp_path / "mine.jsonl"
    upload.write_text(json.dumps(vllm_chat(Turn("u1", [1, 2], [3]))) + "\n")
    with running_app(*args, via_cli=True) as url, browser_page() as page:
        with urllib.request.urlopen(f"{url}/_stcore/health") as health:
            assert health.read() == b"ok"
        page.goto(url)
        wait_ready(page)
        body = page.inner_text("body")
        assert "Rollout fix-config-bug" in body
        page.get_by_test_id("stRadio").get_by_text("Upload", exact=True).click()  # the source radio, not the dropzone
        page.get_by_test_id("stSidebar").locator('input[type="file"]').set_input_files(str(upload))
        page.wait_for_selector("text=1 uploaded file(s)", timeout=30_000)
        text = page.inner_text("body")
        assert str(ROOT) not in text and str(Path(sys.prefix)) not in text


def test_first_run_guide_reaches_each_interesting_call():
    from rollout_graph.ingest.load.files import load_paths
    from rollout_graph.pipeline import analyse
    from rollout_graph.ui.panels.tour import interesting_calls

    rollout = analyse(load_paths([ROOT / "sample_traces" / "vllm"]).sessions["fix-config-bug"])
    found = {e.label: rollout.calls[e.node].node_id for e in interesting_calls(rollout)}
    # each example is the later call of its near miss (causal: docs/semantics.md, "Near misses"); the
    # title call c02 arrived first, so nothing before it makes it a side call of anything
    assert found == {
        "a retry": "c07",
        "a retry of the first call": "c03",
        "a subagent": "c08",
        "a compaction or resume": "c18",
        "a truncated call": "c03",
    }
