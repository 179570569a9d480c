"""Where kernel source comes from, and errors that name the Python file and line.

Every front-end error is a ``ValidationError`` whose findings read ``file.py:12: message`` and
carry a ``Fix:`` naming the construct to use instead. Validator findings on the finished program
(paths such as ``body[2].then[0].value``) are mapped back to the line of the statement that made
them through ``LineMap``.
"""

from __future__ import annotations

import ast
import linecache
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from vyre.driver.errors import Finding, ValidationError
from vyre.ir.node import Node
from vyre.ir.program import Program
from vyre.ir.walk import child_bodies


@dataclass(frozen=True)
class SourceFile:
    """Where kernel source lives: ``line(node)`` maps an ``ast`` node's line to the file's."""

    filename: str
    first_line: int = 1  # file line of the parsed text's first line

    def line(self, node: ast.AST | None) -> int:
        return self.first_line + max(getattr(node, "lineno", 1), 1) - 1

    def where(self, node: ast.AST | None) -> str:
        return f"{self.filename}:{self.line(node)}"

    def error(self, node: ast.AST | None, message: str, fix: str, code: str = "unsupported_syntax") -> ValidationError:
        return ValidationError([Finding(code, f"{self.where(node)}: {message}", fix)])


def function_source(fn: object) -> tuple[SourceFile, ast.FunctionDef]:
    """The parsed definition of a Python function, found in its file's syntax tree (parsed once per file version)."""
    code = getattr(fn, "__code__", None)
    filename = code.co_filename if code is not None else "<unknown>"
    linecache.checkcache(filename)  # a reloaded (or autoreloaded) module's file changed: drop its stale lines
    lines = linecache.getlines(filename, getattr(fn, "__globals__", None))
    fndef = _find_def(filename, lines, code.co_firstlineno) if code is not None and lines else None
    if fndef is None:
        name = getattr(fn, "__qualname__", repr(fn))
        raise ValidationError([Finding(
            "no_source", f"the source of {name} cannot be read (no file {filename!r} or no def there)",
            "define kernels in a .py file (not in an interactive prompt or exec), "
            "or pass the text to vyre.frontend.kernel_from_source")])
    return SourceFile(filename), fndef


_TREES: dict[str, tuple[list[str], dict[int, ast.FunctionDef]]] = {}
_BLOCKS: dict[tuple[str, int], tuple[list[str], ast.FunctionDef]] = {}
_DEF = ("def ", "async def ")


def _find_def(filename: str, lines: list[str], first_line: int) -> ast.FunctionDef | None:
    """The ``def`` starting (with its decorators) at ``first_line``: its own lines parsed (once per
    file version), else the file's whole syntax tree (one parse per file version)."""
    block = _BLOCKS.get((filename, first_line))
    if block is not None and block[0] is lines:
        return block[1]
    fndef = _parse_block(filename, lines, first_line)
    if fndef is not None:
        _BLOCKS[filename, first_line] = (lines, fndef)
        return fndef
    cached = _TREES.get(filename)
    if cached is None or cached[0] is not lines:
        try:
            tree = ast.parse("".join(lines), filename)
        except SyntaxError:
            return None
        defs: dict[int, ast.FunctionDef] = {}
        _collect_defs(tree.body, defs)
        cached = _TREES[filename] = (lines, defs)
    return cached[1].get(first_line)


def _parse_block(filename: str, lines: list[str], first_line: int) -> ast.FunctionDef | None:
    """The function whose decorators or ``def`` start at ``first_line``, parsed from its own lines:
    from there to the first code line indented no deeper, after the ``def`` line. A cut inside a
    string or bracket is a ``SyntaxError``, so None means "parse the whole file" and a result is the
    function exactly (line numbers are the file's)."""
    if not 1 <= first_line <= len(lines):
        return None
    head = lines[first_line - 1]
    indent = len(head) - len(head.lstrip())
    end, seen_def = first_line, head.lstrip().startswith(_DEF)  # lines[end]: the line after the head
    while end < len(lines):
        line = lines[end]
        text = line.lstrip()
        if text and not text.startswith("#") and len(line) - len(text) <= indent:
            if seen_def or not text.startswith(("@", *_DEF)):
                break
            seen_def = text.startswith(_DEF)
        end += 1
    text = "".join(lines[first_line - 1:end])
    try:  # an indented def is parsed as the body of ``if 1:`` (its text, strings included, unchanged)
        tree = ast.parse(f"if 1:\n{text}" if indent else text, filename)
    except SyntaxError:
        return None
    body = tree.body[0].body if indent and isinstance(tree.body[0], ast.If) else tree.body
    if len(tree.body) != 1 or len(body) != 1 or not isinstance(body[0], ast.FunctionDef):
        return None
    ast.increment_lineno(body[0], first_line - (2 if indent else 1))
    return body[0]


def _collect_defs(body: Sequence[ast.AST], defs: dict[int, ast.FunctionDef]) -> None:
    """Every ``def`` in ``body`` and the statement lists nested in it, by its first line (statements only)."""
    for node in body:
        if isinstance(node, ast.FunctionDef):
            defs[min([node.lineno, *(d.lineno for d in node.decorator_list)])] = node
        for _, value in ast.iter_fields(node):
            if isinstance(value, list) and value and isinstance(value[0], (ast.stmt, ast.excepthandler)):
                _collect_defs(value, defs)


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
            out.append(Finding(f.code, f"{self.source.filename}:{line}: {f.message}", kernel_fix(f.fix), f.path))
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

#: the IR's Fix phrases (written for builder users) in the words of a kernel author
_KERNEL_WORDS: tuple[tuple[str, str | Callable[[re.Match[str]], str]], ...] = (
    (r"Expr\.cast\(DataType\.(\w+), \.\.\.\)",
     lambda m: "vyre.boolean(...)" if m[1] == "BOOL" else f"vyre.{m[1].lower()}(...)"),
    (r"cast it to one of (.*) with Expr\.cast", r"cast it to one of \1 with vyre.u32(x), vyre.i32(x) or vyre.f32(x)"),
    (r"cast one operand with Expr\.cast", "cast one operand with vyre.u32(x), vyre.i32(x) or vyre.f32(x)"),
    (r"Expr\.ne\(x, Expr\.u32\(0\)\)", "x != 0"),
    (r"with Expr\.select", "with `a if c else b` (or an `if` statement)"),
    (r"bind (intermediate values|repeated sub-expressions) with Node\.let", r"assign \1 to variables"),
    (r"declare it (?:first )?with Node\.let\('([^']*)', \.\.\.\)", r"assign it first (\1 = ...)"),
    (r"add a BufferDecl named ('[^']*') to the program's buffers", r"declare a parameter named \1"),
    (r"build (?:statements|expressions) with the (?:Node|Expr)\.\* constructors", "write the kernel subset "
     "(docs/kernels.md)"),
)


def kernel_fix(fix: str) -> str:
    """A Fix sentence of the IR (validator, type rules) in kernel words: ``vyre.u32(x)``, not ``Expr.cast``."""
    for pattern, words in _KERNEL_WORDS:
        fix = re.sub(pattern, words, fix)
    return fix
