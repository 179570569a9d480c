"""The host half stays CUDA-free: no module of ``vyre`` imports CuPy, torch or ``vyre_cuda``,
at module level or inside a function (device work goes through the backend object)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = ("cupy", "cupy_backends", "torch", "vyre_cuda")


def _imports(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append((node.lineno, node.module))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "__import__"
              and node.args and isinstance(node.args[0], ast.Constant)):
            found.append((node.lineno, str(node.args[0].value)))
    return found


def test_no_module_of_vyre_imports_cuda_libraries():
    bad = [f"{path.relative_to(ROOT)}:{line} imports {name}"
           for path in sorted((ROOT / "vyre").rglob("*.py"))
           for line, name in _imports(ast.parse(path.read_text(encoding="utf-8")))
           if name.split(".")[0] in FORBIDDEN]
    assert not bad, "\n".join(bad)
