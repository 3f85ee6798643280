"""Fitness test: the layers the docs promise (docs/architecture.md) hold, import by import.

Data flows one way: bytes -> records (ingest) -> graph (core) -> analyses -> reports / cli, and the
UI (views/, imported as ``rollout_graph.ui``) on top. Each rule below names the wrong direction it
forbids; a failure names the file, the line and the import.
"""

from __future__ import annotations

import ast
import inspect
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"graph": "rollout_graph", "views": "rollout_graph.ui", "sample_traces": "rollout_graph.samples"}


def module_name(path: Path) -> str:
    """The import name of a source file under one of the mapped folders."""
    rel = path.relative_to(ROOT)
    top = FOLDERS[rel.parts[0]]
    parts = [p for p in rel.with_suffix("").parts[1:] if p != "__init__"]
    return ".".join([top, *parts])


def imports(path: Path) -> Iterator[tuple[int, str]]:
    """Every module a file imports (absolute names), with its line, including imports inside functions."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the file's package
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            yield node.lineno, module
            for alias in node.names:  # `from rollout_graph.ui import panels` imports a package too
                yield node.lineno, f"{module}.{alias.name}"


def sources(folder: str) -> list[Path]:
    return sorted(p for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts)


def within(name: str, *prefixes: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def violations(files: list[Path], forbidden: tuple[str, ...]) -> list[str]:
    return [
        f"{p.relative_to(ROOT)}:{line} imports {name}"
        for p in files
        for line, name in imports(p)
        if within(name, *forbidden)
    ]


LIBRARY = [p for p in sources("graph")]
UI = sources("views")
CORE = sources("graph/core")
ANALYSIS = sources("graph/analysis")
INGEST = sources("graph/ingest")
BUILDERS = sources("views/builders")
PANELS = [p for p in sources("views/panels")]
STATE = sources("views/state")


def test_core_stands_alone():
    # core holds the data and the exact-prefix rules; the composition lives in rollout_graph.pipeline
    assert violations(CORE, ("rollout_graph.analysis", "rollout_graph.reports", "rollout_graph.cli",
                             "rollout_graph.live", "rollout_graph.capture", "rollout_graph.signals",
                             "rollout_graph.ingest", "rollout_graph.pipeline", "rollout_graph.api",
                             "rollout_graph.ui", "streamlit", "plotly")) == []  # fmt: skip


def test_ingest_reads_bytes_into_records_only():
    assert violations(INGEST, ("rollout_graph.analysis", "rollout_graph.reports", "rollout_graph.cli",
                               "rollout_graph.live", "rollout_graph.pipeline", "rollout_graph.ui")) == []  # fmt: skip


def test_analyses_never_reach_up_to_reports_cli_or_ui():
    assert violations(ANALYSIS, ("rollout_graph.reports", "rollout_graph.cli", "rollout_graph.live",
                                 "rollout_graph.capture", "rollout_graph.pipeline", "rollout_graph.api",
                                 "rollout_graph.ui")) == []  # fmt: skip


def test_the_library_never_imports_or_names_the_ui():
    assert violations(LIBRARY, ("rollout_graph.ui", "streamlit", "plotly", "views")) == []
    named = [str(p.relative_to(ROOT)) for p in LIBRARY if "rollout_graph.ui" in p.read_text()]
    assert named == [], "the library finds the app through its entry point (rollout_graph.resources)"


def test_the_ui_never_imports_the_command_line():
    assert violations(UI, ("rollout_graph.cli",)) == []


def test_pure_builders_never_import_streamlit_panels_or_state():
    assert violations(BUILDERS, ("streamlit", "rollout_graph.ui.panels", "rollout_graph.ui.state",
                                 "rollout_graph.ui.screens")) == []  # fmt: skip


# Panels never import panels (a screen composes them; what two panels share lives in builders/ or
# state/). The ratchet left from the regrouping is empty: it may never grow again.
KNOWN_PANEL_IMPORTS: set[tuple[str, str]] = set()


def panel_imports(files: list[Path]) -> list[tuple[str, str, int]]:
    found = []
    for p in files:
        own = module_name(p).removeprefix("rollout_graph.ui.panels.").split(".")[0]
        for line, name in imports(p):
            if within(name, "rollout_graph.ui.panels") and name != "rollout_graph.ui.panels":
                target = name.removeprefix("rollout_graph.ui.panels.").split(".")[0]
                if target != own:
                    found.append((str(p.relative_to(ROOT)), target, line))
    return found


def test_state_never_imports_a_panel():
    new = [f for f in panel_imports(STATE) if f[:2] not in KNOWN_PANEL_IMPORTS]
    assert new == []


def test_no_panel_imports_another():
    new = [f for f in panel_imports(PANELS) if f[:2] not in KNOWN_PANEL_IMPORTS]
    assert new == [], "a screen composes panels; shared helpers live in builders/ or state/"
    still = {f[:2] for f in panel_imports(PANELS + STATE)}
    assert still == KNOWN_PANEL_IMPORTS, f"fixed ones leave the ratchet: {sorted(KNOWN_PANEL_IMPORTS - still)}"


def test_every_package_folder_is_listed_in_pyproject():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = {module_name(p) for folder in FOLDERS for p in (ROOT / folder).rglob("__init__.py")}
    assert found == listed
    assert config["package-dir"] == {v: k for k, v in FOLDERS.items()}


@pytest.mark.parametrize("name", ["rollout_graph", "rollout_graph.ui", "rollout_graph.samples"])
def test_each_mapped_package_imports_from_its_folder(name):
    import importlib

    module = importlib.import_module(name)
    folder = {v: k for k, v in FOLDERS.items()}[name]
    assert Path(module.__file__).resolve().parent == ROOT / folder


def test_the_facade_names_its_public_api():
    import rollout_graph as rg

    for name in rg.__all__:
        obj = getattr(rg, name)
        if isinstance(obj, type) or inspect.isfunction(obj):
            assert getattr(obj, "__module__", "rollout_graph") == "rollout_graph", name
    assert (ROOT / "graph" / "py.typed").exists()
