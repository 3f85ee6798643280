"""Load one function (or class) from a framework's source file without importing its module.

The trainers' writers live in modules that import ray, vLLM, Megatron or a GPU stack at the top;
the writer functions themselves need only json, os, torch or numpy. ``load`` parses the file,
keeps the named top-level functions / classes (or methods of one class), and executes exactly
their source, unchanged, in a namespace holding what they use. Nothing here imports rollout_graph.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any


def load(path: Path, names: tuple[str, ...], namespace: dict[str, Any], cls: str | None = None) -> dict[str, Any]:
    """Execute the named definitions of ``path`` (methods of ``cls`` when given) in ``namespace``."""
    tree = ast.parse(path.read_text())
    scope = tree.body
    if cls is not None:
        scope = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls).body
    found = [
        n for n in scope if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and n.name in names
    ]
    missing = set(names) - {n.name for n in found}
    if missing:
        raise LookupError(f"{path}: no {', '.join(sorted(missing))}")
    for node in found:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            node.decorator_list = []  # @staticmethod, @torch.no_grad(): the body is what runs
    module = ast.Module(body=found, type_ignores=[])
    source = "from __future__ import annotations\n" + ast.unparse(module)
    exec(compile(source, str(path), "exec"), namespace)
    return namespace


def commit_of(root: Path) -> str:
    """The commit a fetched source tree was taken at (its ``COMMIT`` file)."""
    marker = root / "COMMIT"
    return marker.read_text().strip() if marker.exists() else "unknown"


def load_module(path: Path, namespace: dict[str, Any], drop_imports_from: str) -> dict[str, Any]:
    """Execute a whole module's source, except its ``from <drop_imports_from>... import`` lines,
    whose names ``namespace`` provides (each loaded from its own file, or the real object)."""
    tree = ast.parse(path.read_text())
    body = [
        n
        for n in tree.body
        if not (isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == drop_imports_from)
    ]
    exec(compile(ast.Module(body=body, type_ignores=[]), str(path), "exec"), namespace)
    return namespace
