"""Every import of a package's modules, read from their source (``ast``): at module level, inside
functions and under ``TYPE_CHECKING`` alike, relative imports resolved, ``from package import module``
named as the module. Used by the host-half and layer tests."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Import:
    """``importer`` (a module name) imports ``target`` at ``where`` (``path:line``)."""

    importer: str
    target: str
    where: str


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(*packages: str) -> dict[str, Path]:
    """Module name -> source file of every module of ``packages`` (directories under the repository root)."""
    return {module_name(p): p for pkg in packages for p in sorted((ROOT / pkg).rglob("*.py"))}


def _named(tree: ast.AST, package: str, known: dict[str, Path]) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            for alias in node.names:  # ``from vyre_cuda._codegen import lowerings`` imports that module
                sub = f"{base}.{alias.name}"
                found.append((node.lineno, sub if sub in known else base))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "__import__"
              and node.args and isinstance(node.args[0], ast.Constant)):
            found.append((node.lineno, str(node.args[0].value)))
    return found


def imports(*packages: str) -> list[Import]:
    """Every import made by a module of ``packages`` (targets anywhere, the standard library included)."""
    known = modules(*packages)
    found = []
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for line, target in _named(ast.parse(path.read_text(encoding="utf-8")), package, known):
            found.append(Import(name, target, f"{path.relative_to(ROOT)}:{line}"))
    return found
