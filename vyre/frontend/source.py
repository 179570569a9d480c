"""Where kernel source comes from, and errors that name the Python file and line.

Every front-end error is a ``ValidationError`` whose findings read ``file.py:12: message`` and
carry a ``Fix:`` naming the construct to use instead. Validator findings on the finished program
(paths such as ``body[2].then[0].value``) are mapped back to the line of the statement that made
them through ``LineMap``.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass, field

from vyre.driver.errors import Finding, ValidationError
from vyre.ir.node import Node
from vyre.ir.program import Program
from vyre.ir.walk import child_bodies


@dataclass(frozen=True)
class SourceFile:
    """The text of one function and where it lives: ``line(n)`` maps an ``ast`` line to the file's."""

    filename: str
    first_line: int  # file line of the function text's first line
    text: str

    def line(self, node: ast.AST | None) -> int:
        return self.first_line + max(getattr(node, "lineno", 1), 1) - 1

    def where(self, node: ast.AST | None) -> str:
        return f"{self.filename}:{self.line(node)}"

    def error(self, node: ast.AST | None, message: str, fix: str, code: str = "unsupported_syntax") -> ValidationError:
        return ValidationError([Finding(code, f"{self.where(node)}: {message}", fix)])


def function_source(fn: object) -> tuple[SourceFile, ast.FunctionDef]:
    """The parsed definition of a Python function, read with ``inspect`` (the file must exist)."""
    try:
        lines, first = inspect.getsourcelines(fn)
        filename = inspect.getsourcefile(fn) or "<unknown>"
    except (OSError, TypeError) as exc:
        name = getattr(fn, "__qualname__", repr(fn))
        raise ValidationError([Finding(
            "no_source", f"the source of {name} cannot be read ({exc})",
            "define kernels in a .py file (not in an interactive prompt or exec), "
            "or pass the text to vyre.frontend.kernel_from_source")]) from None
    source = SourceFile(filename, first, textwrap.dedent("".join(lines)))
    tree = ast.parse(source.text)
    fndef = tree.body[0]
    if not isinstance(fndef, ast.FunctionDef):
        raise source.error(fndef, "a kernel must be a plain `def` function", "write `def name(params): ...`")
    return source, fndef


@dataclass
class LineMap:
    """File lines of the statements a lowering made, to place validator findings."""

    source: SourceFile
    def_line: int
    lines: dict[int, tuple[Node, int]] = field(default_factory=dict)  # id(node) -> (node, file line)
    buffer_lines: list[int] = field(default_factory=list)

    def record(self, node: Node, ast_node: ast.AST) -> Node:
        self.lines[id(node)] = (node, self.source.line(ast_node))
        return node

    def place(self, program: Program, findings: tuple[Finding, ...]) -> list[Finding]:
        """Each finding with ``file:line`` of the statement (or parameter) it is about."""
        by_path: dict[str, int] = {}
        self._walk(program.body, "body", by_path)
        for i, line in enumerate(self.buffer_lines):
            by_path[f"buffers[{i}]"] = line
        out = []
        for f in findings:
            line = self._line_of(f.path, by_path)
            out.append(Finding(f.code, f"{self.source.filename}:{line}: {f.message}", f.fix, f.path))
        return out

    def _walk(self, body: tuple[Node, ...], path: str, by_path: dict[str, int]) -> None:
        for i, node in enumerate(body):
            here = f"{path}[{i}]"
            entry = self.lines.get(id(node))
            if entry is not None:
                by_path[here] = entry[1]
            for name, child in zip(_CHILD_NAMES.get(type(node).__name__, ("body",)), child_bodies(node)):
                self._walk(child, f"{here}.{name}", by_path)

    def _line_of(self, path: str, by_path: dict[str, int]) -> int:
        while path:
            if path in by_path:
                return by_path[path]
            cut = max(path.rfind("."), path.rfind("["))
            path = path[:cut] if cut > 0 else ""
        return self.def_line


_CHILD_NAMES = {"If": ("then", "otherwise")}
