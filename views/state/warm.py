"""What the first visitor's page run would do once per server, done when the server starts.

Entry point: ``warm()`` (called by ``rollout-graph view`` on a thread, through the app module's
``warm``): the explorer page's imports (``page_imports``), Streamlit's emoji catalogue, its
one-off "is this a REPL" check and the module map a component's declaration looks up; about a
second of the first page run on a 2-core machine. Nothing here draws or reads a trace; a failure
leaves the work to the first page run.

Where it sits: started by views/serve.py (docs/performance.md "The app's first paint")."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import types
from pathlib import Path

SCREENS = Path(__file__).resolve().parent.parent / "screens"
FIRST_PAGE = "explorer.py"  # the page a visitor opens first (views/app.py)


def page_imports(script: Path) -> list[tuple[str, list[str]]]:
    """The modules a page script imports at its top level: ``(module, names imported from it)``."""
    found: list[tuple[str, list[str]]] = []
    for node in ast.parse(script.read_text(encoding="utf-8"), str(script)).body:
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.append((node.module, [alias.name for alias in node.names]))
    return found


def declares_component(module_name: str) -> bool:
    """Whether the module declares a Streamlit component when imported: Streamlit registers one
    only inside a page run (outside, the page would wait for its code), so such a module is left
    to the first page run."""
    spec = importlib.util.find_spec(module_name)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return False
    return "declare_component" in Path(spec.origin).read_text(encoding="utf-8")


def _origin(module_name: str) -> Path | None:
    spec = importlib.util.find_spec(module_name)
    return None if spec is None or spec.origin is None else Path(spec.origin)


def import_page(script: Path, depth: int = 1) -> list[str]:
    """Import what the page imports (a name that is a submodule, such as a panel, included), but
    modules that declare a component; of those, what they import themselves (``depth`` levels: the
    DAG panel declares its browser component, but plotly and the DAG builder it imports are the
    heavy part); returns the modules imported."""
    done: list[str] = []

    def skipped(name: str) -> None:
        origin = _origin(name)
        if depth > 0 and origin is not None and origin.suffix == ".py":
            done.extend(import_page(origin, depth - 1))

    for module_name, names in page_imports(script):
        if declares_component(module_name):
            skipped(module_name)
            continue
        module = importlib.import_module(module_name)
        done.append(module_name)
        for name in names:
            full = f"{module_name}.{name}"
            if hasattr(module, name) and not isinstance(getattr(module, name), types.ModuleType):
                continue  # a name the module defines
            try:
                if declares_component(full):
                    skipped(full)
                    continue
            except ModuleNotFoundError:  # not a submodule
                continue
            importlib.import_module(full)
            done.append(full)
    return done


def warm() -> None:
    """The first page run's once-per-server work, done now (see the module's docstring)."""
    import plotly.graph_objects  # noqa: F401 - views/app.py draws its first chart with it
    from streamlit import delta_generator
    from streamlit.emojis import ALL_EMOJIS  # noqa: F401 - the catalogue set_page_config checks

    import_page(SCREENS / FIRST_PAGE)
    # Declaring a component (the DAG panel, on the first page run) finds its module with
    # inspect.getmodule, whose first call maps the file of every module imported so far (0.04 s of
    # CPU here): mapped now, that page run maps only the few modules it imports itself.
    inspect.getmodule(compile("", str(SCREENS / FIRST_PAGE), "exec"))
    # Streamlit's warning for a script run without `streamlit run` walks the whole stack of the
    # first element's page run; this server is `streamlit run`, so the warning never applies.
    delta_generator._use_warning_has_been_displayed = True
