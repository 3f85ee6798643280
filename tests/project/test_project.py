"""Project-level promises: the README quick start is what CI runs; graph/ never imports streamlit."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def quick_start_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```(?:bash|sh)?\n(.*?)```", section, re.S).group(1)
    return [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_quick_start_has_exactly_two_commands_and_ci_runs_the_test_one():
    commands = quick_start_commands()
    assert len(commands) == 2
    app, tests = commands
    assert "streamlit run app.py" in app or "rollout-graph view" in app
    assert "pytest" in tests
    assert tests.strip() in (ROOT / ".ci" / "run").read_text()


def test_graph_never_imports_streamlit():
    for path in (ROOT / "graph").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            assert not any(n.split(".")[0] in ("streamlit", "plotly", "views") for n in names), path


def test_every_code_folder_is_a_package_so_the_wheel_ships_it():
    # setuptools finds packages automatically, but only folders with an __init__.py (views/screens
    # holds Streamlit page scripts, shipped as package data).
    for top in ("graph", "views"):
        for folder in {p.parent for p in (ROOT / top).rglob("*.py")}:
            if folder.name in ("screens", "__pycache__"):
                continue
            assert (folder / "__init__.py").exists(), f"{folder.relative_to(ROOT)} has no __init__.py"


def test_the_docker_image_installs_the_wheel_not_the_source_tree():
    text = (ROOT / "Dockerfile").read_text()
    assert "python -m build --wheel" in text and "rollout_graph-*.whl" in text
    assert "pip install -e" not in text and "--editable" not in text


def test_nothing_points_outside_the_repository():
    for path in [*ROOT.glob("*.md"), *(ROOT / "docs").glob("*.md"), *(ROOT / "graph").rglob("*.py")]:
        assert "SPEC.md" not in path.read_text(), path
