"""``--no-cache`` and ``--cache-dir`` are this command's choice, passed down to the loader, not
environment changes: a library caller of ``rollout_graph.cli.main`` finds ``ROLLOUT_GRAPH_CACHE``
as it left it, and the variable still chooses for users who set it (docs/cli.md)."""

from __future__ import annotations

import os

import pytest

from rollout_graph.cli import main
from rollout_graph.ingest.load import cache
from tests.support.builders import ROLLOUT, vllm_chat, write


def _entries(folder) -> list[str]:
    return sorted(p.name for p in folder.glob("v*")) if folder.exists() else []


@pytest.fixture
def trace(tmp_path):
    return write(tmp_path / "trace.jsonl", [vllm_chat(t) for t in ROLLOUT])


@pytest.mark.parametrize("verb", [["inspect", "--json"], ["inspect"], ["search", "x"], ["explain"]])
def test_no_cache_writes_nothing_and_leaves_the_variable_alone(verb, trace, tmp_path, monkeypatch, capsys):
    folder = tmp_path / "cache"
    monkeypatch.setenv(cache.ENV_DIR, str(folder))
    code = main(
        [verb[0], *verb[1:2], str(trace), "--no-cache"] if verb[0] == "search" else [*verb, str(trace), "--no-cache"]
    )
    capsys.readouterr()
    assert code in (0, 1)  # search exits 1 without a hit
    assert os.environ[cache.ENV_DIR] == str(folder)
    assert _entries(folder) == []
    assert main(["inspect", "--json", str(trace)]) == 0  # the next command caches as the variable says
    capsys.readouterr()
    assert len(_entries(folder)) == 1


def test_no_cache_unset_variable_stays_unset(trace, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(cache.ENV_DIR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert main(["inspect", "--json", "--no-cache", str(trace)]) == 0
    capsys.readouterr()
    assert cache.ENV_DIR not in os.environ
    assert cache.enabled()
    assert _entries(tmp_path / "xdg" / "rollout-graph") == []


def test_cache_dir_is_the_commands_folder_only(trace, tmp_path, monkeypatch, capsys):
    default, chosen = tmp_path / "default", tmp_path / "chosen"
    monkeypatch.setenv(cache.ENV_DIR, str(default))
    assert main(["inspect", "--json", "--cache-dir", str(chosen), str(trace)]) == 0
    first = capsys.readouterr().out
    assert os.environ[cache.ENV_DIR] == str(default)
    assert len(_entries(chosen)) == 1 and _entries(default) == []
    assert main(["inspect", "--json", "--cache-dir", str(chosen), str(trace)]) == 0  # the reopen
    assert capsys.readouterr().out == first
    assert len(_entries(chosen)) == 1 and _entries(default) == []


def test_the_variable_still_chooses(trace, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(cache.ENV_DIR, "off")
    assert main(["inspect", "--json", str(trace)]) == 0
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path / "mine"))
    assert main(["inspect", "--json", str(trace)]) == 0
    capsys.readouterr()
    assert len(_entries(tmp_path / "mine")) == 1
    # a folder given on the command line is used even where the variable turns the cache off
    monkeypatch.setenv(cache.ENV_DIR, "off")
    assert main(["inspect", "--json", "--cache-dir", str(tmp_path / "flag"), str(trace)]) == 0
    capsys.readouterr()
    assert len(_entries(tmp_path / "flag")) == 1
    assert not (tmp_path / "off").exists() and not os.path.exists("off/v")


def test_no_cache_with_a_cache_dir_caches_nothing(trace, tmp_path, capsys):
    chosen = tmp_path / "chosen"
    assert main(["inspect", "--json", "--cache-dir", str(chosen), "--no-cache", str(trace)]) == 0
    assert main(["inspect", "--json", "--no-cache", "--cache-dir", str(chosen), str(trace)]) == 0
    capsys.readouterr()
    assert _entries(chosen) == []
