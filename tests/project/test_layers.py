"""Fitness test: the layers the docs promise (docs/architecture.md) hold, import by import.

Data flows one way: bytes -> records (ingest) -> graph (core) -> analyses -> reports / cli, and the
UI (views/, imported as ``rollout_graph.ui``) on top. Each rule below names the wrong direction it
forbids; a failure names the file, the line and the import. No two modules of the package import
each other, even through others and imports made inside functions (a cycle is named whole), and
inside ingest the folders flow one way: files -> shortcuts -> values -> formats -> load.
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


# --- no import cycle anywhere in the package ------------------------------------------------------
#
# The graph: one node per module of graph/ and views/ (a package is its __init__.py), an edge for
# every import a file makes, at the top or inside a function or an ``if TYPE_CHECKING:`` block
# (``from a import b`` is an edge to the module a.b when there is one, else to a). An import made
# inside a function is then never a way round a cycle: the graph it belongs to has none. (Such
# imports are for start-up only: a command imports its own verb, a heavy third-party package is
# loaded where it is needed; docs/architecture.md.)


def _modules() -> dict[str, Path]:
    return {module_name(p): p for folder in ("graph", "views") for p in sources(folder)}


MODULES = _modules()


def import_edges(path: Path) -> dict[str, int]:
    """The library modules ``path`` imports, each with the first line importing it."""
    edges: dict[str, int] = {}
    this = module_name(path)
    for line, name in imports(path):
        target = name if name in MODULES else name.rpartition(".")[0] if name.rpartition(".")[0] in MODULES else None
        if target is not None and target != this:
            edges.setdefault(target, line)
    return edges


def import_graph() -> dict[str, dict[str, int]]:
    return {name: import_edges(path) for name, path in MODULES.items()}


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, without recursion),
    each as one cycle through all of them where there is one."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(_one_cycle(graph, set(component)))
    return found


def _one_cycle(graph: dict[str, dict[str, int]], members: set[str]) -> list[str]:
    """A path through the component from its first module back to it (a breadth-first search)."""
    start = min(members)
    previous: dict[str, str] = {}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for child in sorted(graph[node]):
            if child == start:
                path = [node]
                while path[-1] != start:
                    path.append(previous[path[-1]])
                return [start, *reversed(path[:-1]), start]
            if child in members and child not in previous:
                previous[child] = node
                queue.append(child)
    return sorted(members)


def describe(graph: dict[str, dict[str, int]], cycle: list[str]) -> str:
    steps = [
        f"{MODULES[a].relative_to(ROOT)}:{graph[a][b]} imports {b}" for a, b in zip(cycle, cycle[1:], strict=False)
    ]
    return " -> ".join(cycle) + " (" + "; ".join(steps) + ")"


def test_no_module_of_the_package_imports_itself_through_others():
    graph = import_graph()
    found = [describe(graph, cycle) for cycle in cycles(graph)]
    assert found == [], "import cycles:\n" + "\n".join(found)


def test_the_cycle_check_names_a_cycle_it_is_given():
    """Not vacuous: a cycle made up in the graph, through an import inside a function, is found
    and named module by module."""
    graph = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3, "d": 4}, "d": {}, "e": {"e2": 1}, "e2": {}}
    assert cycles(graph) == [["a", "b", "c", "a"]]
    real = import_graph()
    real["rollout_graph.ingest.files.sources"]["rollout_graph.ingest.load.files"] = 1
    found = cycles(real)
    assert len(found) == 1 and found[0][0] == found[0][-1]
    assert "rollout_graph.ingest.files.sources" in found[0] and "rollout_graph.ingest.load.files" in found[0]
    assert "graph/ingest/files/sources.py:1 imports rollout_graph.ingest.load.files" in describe(real, found[0])


# --- ingest flows one way --------------------------------------------------------------------------

# Each folder of graph/ingest imports only its own and earlier ones; the leaves any of them may use.
INGEST_LAYERS = ("files", "shortcuts", "values", "formats", "load")
INGEST_LEAVES = ("limits", "speedups", "tokens", "_speedups")


def ingest_layer(name: str) -> int | None:
    """The rank of an ingest module's folder (None: a leaf, or not ingest)."""
    if not name.startswith("rollout_graph.ingest."):
        return None
    part = name.removeprefix("rollout_graph.ingest.").split(".")[0]
    return INGEST_LAYERS.index(part) if part in INGEST_LAYERS else None


def test_ingest_flows_one_way():
    wrong = []
    for name, path in MODULES.items():
        if not name.startswith("rollout_graph.ingest"):
            continue
        own = ingest_layer(name)
        for target, line in import_edges(path).items():
            rank = ingest_layer(target)
            leaf = target.removeprefix("rollout_graph.ingest.") in INGEST_LEAVES
            if (
                own is None
                and target.startswith("rollout_graph.ingest.")
                and not leaf
                and name != "rollout_graph.ingest"
            ):
                wrong.append(f"{path.relative_to(ROOT)}:{line} (a leaf) imports {target}")
            elif own is not None and rank is not None and rank > own:
                wrong.append(f"{path.relative_to(ROOT)}:{line} ({INGEST_LAYERS[own]}/) imports {target}")
    assert wrong == [], "ingest flows files -> shortcuts -> values -> formats -> load"


# Imports of the library made inside a function in ingest: none, but the one that keeps msgspec (a
# third-party package only chat logprob lines need) out of a flat trace's load.
INGEST_LAZY = {("rollout_graph.ingest.shortcuts.logprob_entries", "rollout_graph.ingest.shortcuts.logprob_structs")}


# The compiled speedups (graph/ingest/csrc/): a module of the package with no source file here.
EXTENSIONS = {"rollout_graph.ingest._speedups"}


def _function_imports(path: Path) -> Iterator[tuple[int, str]]:
    """The modules imported inside the file's functions (``from a import b``: a.b when it is a
    module, else a)."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                if isinstance(inner, ast.ImportFrom) and not inner.level and inner.module:
                    for alias in inner.names:
                        full = f"{inner.module}.{alias.name}"
                        yield inner.lineno, full if full in MODULES or full in EXTENSIONS else inner.module
                elif isinstance(inner, ast.Import):
                    for alias in inner.names:
                        yield inner.lineno, alias.name


def test_ingest_imports_its_own_modules_at_the_top():
    wrong = []
    for name, path in MODULES.items():
        if not name.startswith("rollout_graph.ingest"):
            continue
        for line, target in _function_imports(path):
            if target in MODULES and target.startswith("rollout_graph.") and (name, target) not in INGEST_LAZY:
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {target} inside a function")
    assert wrong == []


def test_ingest_imports_no_private_name_of_another_module():
    """A name starting with ``_`` is its module's own: another module that needs it gets a public one."""
    wrong = []
    for name, path in MODULES.items():
        if not name.startswith("rollout_graph.ingest"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rollout_graph"):
                for alias in node.names:
                    target = f"{node.module}.{alias.name}"
                    if alias.name.startswith("_") and target not in MODULES and target not in EXTENSIONS:
                        wrong.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {target}")
    assert wrong == []
