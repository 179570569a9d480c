"""No module of ``vyre_cuda`` reads another object's private attributes.

Each part of the backend owns its state; others go through its public methods and attributes.
The check is an AST scan: any ``x._name`` (not a dunder) where ``x`` is not ``self`` or ``cls``
is a finding. Annotations are skipped: under ``from __future__ import annotations`` they are never
evaluated. ``test_the_scan_finds_a_private_read`` shows the scan catches one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import vyre_cuda

PACKAGE = Path(vyre_cuda.__file__).parent
OWNERS = ("self", "cls")


def private_reads(source: str, filename: str = "<source>") -> list[str]:
    """``file:line: expr`` for each read of another object's private attribute in ``source``."""
    tree = ast.parse(source, filename)
    annotations = {id(n) for a in _annotations(tree) for n in ast.walk(a)}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or id(node) in annotations:
            continue
        name = node.attr
        if not name.startswith("_") or (name.startswith("__") and name.endswith("__")):
            continue
        if isinstance(node.value, ast.Name) and node.value.id in OWNERS:
            continue
        found.append(f"{filename}:{node.lineno}: {ast.unparse(node)}")
    return found


def _annotations(tree: ast.AST) -> list[ast.AST]:
    out: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.annotation is not None:
            out.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            out.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            out.append(node.annotation)
    return out


def test_no_module_reads_another_objects_private_attributes() -> None:
    findings = []
    for path in sorted(PACKAGE.rglob("*.py")):
        findings += private_reads(path.read_text(), str(path.relative_to(PACKAGE.parent)))
    assert findings == [], "\n".join(findings)


def test_the_scan_finds_a_private_read() -> None:
    source = "def f(backend, self):\n    self._ok = 1\n    return backend._closed or self.x._fault\n"
    assert private_reads(source) == ["<source>:3: backend._closed", "<source>:3: self.x._fault"]
    assert private_reads("x.__class__\ncls._cache\ndef g(p: argparse._Action) -> m._T: ...\n") == []
