"""The readable text form of programs (``.vyre`` files): ``to_text`` and ``parse`` round-trip exactly.

One statement per line; blocks open with ``{`` at the end of a line and close with a line ``}``
(indentation is cosmetic). ``#`` starts a comment. Grammar (``NAME`` is a bare identifier or a
double-quoted string with escapes ``\\\\ \\" \\n \\t \\r \\u{HEX}``; reserved words are quoted)::

    program [NAME] workgroup(X, Y, Z)
    buffer NAME: ACCESS DTYPE[COUNT] [@BINDING]        # @BINDING omitted only for workgroup buffers
    let NAME = EXPR            set NAME = EXPR          store NAME[EXPR] = EXPR
    if EXPR {   ...   } else {   ...   }                loop NAME in EXPR .. EXPR {   ...   }
    block {   ...   }          region NAME {   ...   }  barrier          return

    EXPR := NAME (a variable) | true | false | u32:7 | i32:-7 | f32:1.5 | f32:inf | f32:nan
          | f32:0x7fc00001 (exact bits) | u64:7 | i64:-7 | f64:1.5 | f64:inf | f64:nan
          | f64:0x7ff8000000000001 (exact bits) | OP(EXPR, ...) for the binary, unary, select, fma and
            subgroup ops | load(NAME, EXPR) | buf_len(NAME) | invocation_id(0) | workgroup_id(1)
          | local_id(2) | cast(DTYPE, EXPR) | atomic_add(NAME, EXPR, EXPR) ... (atomic_ + the
            AtomicOp value, e.g. atomic_add_relaxed; compare_exchange takes the expected value
            last) | call(NAME, EXPR, ...)

A float literal prints as the shortest decimal that reads back to the same bits, else as its bits.
Malformed text raises ``ValidationError`` with code ``parse_error`` and the line number.

Parsing runs in time and memory linear in the input: the text, each line and each token have a
cap (``MAX_TEXT_CHARS``, ``MAX_LINE_CHARS``, ``MAX_TOKEN_CHARS``, ``MAX_LITERAL_CHARS``), checked
before the part is scanned, and a token match looks at no more than the token cap allows (a
regex keeps ~180 bytes per character it repeats over); a line is tokenised lazily, so a malformed
line fails at its first bad token. ``parse_with_source_map`` also returns where each statement came from, so validation
findings can name their ``.vyre`` line.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from vyre.driver.errors import Finding, ValidationError
from vyre.ir.expr import ALL_OPS, AtomicOp, Expr, name_of
from vyre.ir.node import Assign, Barrier, Block, If, Let, Loop, Node, Region, Store
from vyre.ir.op import BY_NAME, Op
from vyre.ir.program import Access, BufferDecl, Program
from vyre.ir.shape import (
    MAX_DEPTH,
    MAX_NAME_BYTES,
    MAX_NODES,
    buffer_well_formed,
    describe,
    node_well_formed,
    shape_problem,
)
from vyre.ir.types import DataType, bits_f32, bits_f64, f32_bits, f64_bits

_DTYPES = {t.value: t for t in DataType}
_ACCESS = {a.value: a for a in Access}
_ATOMICS = {f"atomic_{a.value}": a for a in AtomicOp}
_KEYWORDS = {"program", "workgroup", "buffer", "let", "set", "store", "if", "else", "loop", "in", "barrier",
             "block", "region", "return", "true", "false"}
_RESERVED = frozenset(_KEYWORDS | set(ALL_OPS) | set(_DTYPES) | set(_ACCESS) | set(_ATOMICS))
_BARE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}
_TOKEN = re.compile(r"""
    (?P<ws>\s+|\#.*)
  | (?P<str>"(?:[^"\\]|\\.)*")
  | (?P<lit>(?:u32|i32|f32|u64|i64|f64):(?:[^\s,()\[\]{}".]|\.(?!\.))+)
  | (?P<int>-?[0-9]+)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>\.\.|[(){}\[\],=:@])
""", re.VERBOSE)
# one way to match each digit (no nested choices), so a long run of digits cannot backtrack quadratically
_DECIMAL = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
_HEX_BITS = {"f32": re.compile(r"0x[0-9a-fA-F]{1,8}"), "f64": re.compile(r"0x[0-9a-fA-F]{1,16}")}
_FIX = "correct that line; the grammar is in the vyre.ir.text module docstring"

#: Longest text ``parse`` reads, in characters (a program at the node cap prints far shorter).
MAX_TEXT_CHARS = 64 * 1024 * 1024
#: Longest line, in characters; ``to_text`` refuses a program with a longer statement.
MAX_LINE_CHARS = 1024 * 1024
#: Longest name token (bare or quoted, escapes included): a 4096-byte name fits with every escape.
MAX_TOKEN_CHARS = 64 * 1024
#: Longest literal token (``u32:...``, ``f32:...``, a bare integer): room for any exact decimal F32.
MAX_LITERAL_CHARS = 1024
#: Characters one token match may look at: one more than the longest token, so an overlong one shows.
_SCAN_WINDOW = MAX_TOKEN_CHARS + 1


# ==== printing ==================================================================================
def to_text(program: Program) -> str:
    """The text form of ``program`` (ends with a newline); ``parse`` reads it back exactly."""
    wx, wy, wz = program.workgroup_size
    name = "" if program.name is None else _name(program.name) + " "
    lines = [f"program {name}workgroup({wx}, {wy}, {wz})"]
    lines += [_buffer_line(b) for b in program.buffers]
    _print_body(program.body, 0, lines, [0])
    for number, line in enumerate(lines, 1):
        if len(line) > MAX_LINE_CHARS:
            raise _unprintable("line_too_long", f"statement {number} prints as {len(line)} characters, over the "
                                                f"text form's {MAX_LINE_CHARS}-character line limit "
                                                "(bind sub-expressions with Node.let, or use to_wire)")
    text = "\n".join(lines) + "\n"
    if len(text) > MAX_TEXT_CHARS:
        raise _unprintable("text_too_large", f"the program prints as {len(text)} characters, over the text form's "
                                             f"limit of {MAX_TEXT_CHARS} (use to_wire)")
    return text


def _unprintable(code: str, message: str) -> ValidationError:
    return ValidationError([Finding(code, message, "run vyre.validate(program) and correct the findings")])


def _name(s: str) -> str:
    if not isinstance(s, str):
        raise _unprintable("malformed_node", f"name {describe(s)} is not a str")
    if len(s) > MAX_NAME_BYTES // 4 and len(s.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        raise _unprintable("invalid_name", f"a name of over {MAX_NAME_BYTES} UTF-8 bytes has no text form")
    if _BARE.fullmatch(s) and s not in _RESERVED:
        return s
    return '"' + "".join(_ESCAPES.get(c) or (c if c.isprintable() else f"\\u{{{ord(c):x}}}") for c in s) + '"'


def _buffer_line(b: BufferDecl) -> str:
    if not buffer_well_formed(b):
        raise _unprintable("malformed_buffer", "a buffer declaration has fields of the wrong type")
    binding = "" if b.is_workgroup and b.binding == -1 else f" @{b.binding}"
    return f"buffer {_name(b.name)}: {b.access.value} {b.dtype.value}[{b.count}]{binding}"


def f32_text(bits: int) -> str:
    """``f32:...`` text of an F32 bit pattern: the shortest decimal that reads back exactly, else the bits."""
    v = bits_f32(bits)
    if math.isinf(v):
        return "f32:inf" if v > 0 else "f32:-inf"
    if bits == 0x7FC00000:
        return "f32:nan"
    if not math.isnan(v):
        for digits in range(1, 10):
            s = f"{v:.{digits}g}"
            if f32_bits(float(s)) == bits:
                return "f32:" + (s if any(c in s for c in ".e") else s + ".0")
    return f"f32:0x{bits:08x}"


def f64_text(bits: int) -> str:
    """``f64:...`` text of an F64 bit pattern: Python's shortest round-trip decimal, else the bits."""
    v = bits_f64(bits)
    if math.isinf(v):
        return "f64:inf" if v > 0 else "f64:-inf"
    if bits == _F64_SPECIALS["nan"]:
        return "f64:nan"
    if math.isnan(v):
        return f"f64:0x{bits:016x}"
    s = repr(v)
    return "f64:" + (s if any(c in s for c in ".e") else s + ".0")


def _literal(e: Expr) -> str:
    if e.dtype is DataType.BOOL:
        return "true" if e.value else "false"
    if e.dtype is DataType.F32:
        return f32_text(e.value)
    if e.dtype is DataType.F64:
        return f64_text(e.value)
    if e.dtype in (DataType.I32, DataType.I64):
        width = e.dtype.bits
        return f"{e.dtype.value}:{e.value - (1 << width) if e.value >> (width - 1) else e.value}"
    return f"{e.dtype.value}:{e.value}"


def _expr_text(e: Expr, depth: int, count: list[int]) -> str:
    _tick(count)
    if depth > MAX_DEPTH:
        raise _unprintable("nesting_too_deep", f"the program nests deeper than {MAX_DEPTH} levels")
    problem = shape_problem(e) if isinstance(e, Expr) else f"{describe(e)} is not an Expr"
    if problem:
        raise _unprintable("malformed_expr", problem)
    if e.op == Op.LIT:
        return _literal(e)
    if e.op == Op.VAR:
        return _name(name_of(e))
    head: list[str] = []
    op = e.op
    if e.op == Op.ATOMIC:
        op = f"atomic_{e.value.value}"
    if e.name is not None:
        head.append(_name(e.name))
    elif e.dtype is not None:
        head.append(e.dtype.value)
    elif e.value is not None:
        head.append(str(e.value))
    args = head + [_expr_text(a, depth + 1, count) for a in e.args]
    return f"{op}({', '.join(args)})"


def _tick(count: list[int]) -> None:
    count[0] += 1
    if count[0] > MAX_NODES:
        raise _unprintable("program_too_large", f"the program has more than {MAX_NODES} statements and expressions")


def _print_body(body: tuple[Node, ...], level: int, lines: list[str], count: list[int]) -> None:
    pad = "  " * level
    for node in body:
        _tick(count)
        if level + 1 > MAX_DEPTH:
            raise _unprintable("nesting_too_deep", f"statements nest deeper than {MAX_DEPTH} levels")
        if not node_well_formed(node):
            raise _unprintable("malformed_node", f"{describe(node)} is not a well-formed statement")
        d = level + 2  # depth of this statement's expressions

        def ex(e: Expr, d: int = d) -> str:
            return _expr_text(e, d, count)

        if isinstance(node, Let):
            lines.append(f"{pad}let {_name(node.name)} = {ex(node.value)}")
        elif isinstance(node, Assign):
            lines.append(f"{pad}set {_name(node.name)} = {ex(node.value)}")
        elif isinstance(node, Store):
            lines.append(f"{pad}store {_name(node.buffer)}[{ex(node.index)}] = {ex(node.value)}")
        elif isinstance(node, If):
            lines.append(f"{pad}if {ex(node.cond)} {{")
            _print_body(node.then, level + 1, lines, count)
            if node.otherwise:
                lines.append(f"{pad}}} else {{")
                _print_body(node.otherwise, level + 1, lines, count)
            lines.append(pad + "}")
        elif isinstance(node, Loop):
            lines.append(f"{pad}loop {_name(node.var)} in {ex(node.start)} .. {ex(node.end)} {{")
            _print_body(node.body, level + 1, lines, count)
            lines.append(pad + "}")
        elif isinstance(node, (Block, Region)):
            lines.append(f"{pad}block {{" if isinstance(node, Block) else f"{pad}region {_name(node.generator)} {{")
            _print_body(node.body, level + 1, lines, count)
            lines.append(pad + "}")
        else:
            lines.append(pad + ("barrier" if isinstance(node, Barrier) else "return"))


# ==== parsing ===================================================================================
class _ParseError(Exception):
    pass


@dataclass
class _Token:
    kind: str  # str lit int ident punct
    text: str
    value: Any = None  # a str token's text, a lit token's number


class _Line:
    """A cursor over the tokens of one line, scanned lazily (a bad token stops the scan there)."""

    def __init__(self, text: str) -> None:
        if len(text) > MAX_LINE_CHARS:
            raise _ParseError(f"the line has {len(text)} characters, over the limit of {MAX_LINE_CHARS}")
        self.text = text
        self.scanned = 0  # characters of ``text`` already tokenised
        self.ahead: list[_Token] = []  # scanned tokens not consumed yet

    def token(self, k: int = 0) -> _Token | None:
        """The ``k``-th token not consumed yet, or None past the end of the line."""
        while len(self.ahead) <= k:
            tok = self._scan()
            if tok is None:
                return None
            self.ahead.append(tok)
        return self.ahead[k]

    def _scan(self) -> _Token | None:
        """The next token. Each match looks at most ``_SCAN_WINDOW`` characters: the regex engine keeps
        state per character it repeats over (~180 bytes), so a token may not cost more than one window."""
        text, pos = self.text, self.scanned
        while pos < len(text):
            if text[pos] == "#":  # a comment runs to the end of the line
                break
            window = min(len(text), pos + _SCAN_WINDOW)
            m = _TOKEN.match(text, pos, window)
            if m is None:
                if text[pos] == '"':
                    raise _ParseError(f"the string at column {pos + 1} does not end within {MAX_TOKEN_CHARS} "
                                      "characters (strings are at most that long)")
                raise _ParseError(f"unexpected character {text[pos]!r} at column {pos + 1}")
            pos = m.end()
            kind = m.lastgroup
            if kind == "ws":
                continue
            self.scanned = pos
            return _make_token(kind, m.group(), m.start() + 1, cut=pos == window < len(text))
        self.scanned = len(text)
        return None

    def empty(self) -> bool:
        return self.token() is None

    def peek(self, text: str) -> bool:
        tok = self.token()
        return tok is not None and tok.kind in ("punct", "ident") and tok.text == text

    def next(self, what: str) -> _Token:
        tok = self.token()
        if tok is None:
            raise _ParseError(f"expected {what} but the line ended")
        self.ahead.pop(0)
        return tok

    def expect(self, text: str) -> None:
        tok = self.next(repr(text))
        if tok.kind not in ("punct", "ident") or tok.text != text:
            raise _ParseError(f"expected {text!r}, found {_shown(tok)}")

    def accept(self, text: str) -> bool:
        if self.peek(text):
            self.ahead.pop(0)
            return True
        return False

    def end(self) -> None:
        tok = self.token()
        if tok is not None:
            raise _ParseError(f"unexpected {_shown(tok)} at the end of the line")

    def name(self, what: str) -> str:
        tok = self.next(what)
        if tok.kind == "ident":
            return tok.text
        if tok.kind == "str":
            return tok.value
        raise _ParseError(f"expected {what}, found {_shown(tok)}")

    def int(self, what: str) -> int:
        tok = self.next(what)
        if tok.kind != "int":
            raise _ParseError(f"expected {what} (an integer), found {_shown(tok)}")
        return int(tok.text)

    def word(self, table: dict, what: str):
        tok = self.next(what)
        if tok.kind != "ident" or tok.text not in table:
            raise _ParseError(f"expected {what} ({', '.join(table)}), found {_shown(tok)}")
        return table[tok.text]


def _make_token(kind: str, text: str, column: int, cut: bool = False) -> _Token:
    """A token, after checking its length against the caps (before any conversion of its text);
    ``cut``: the scan window ended inside it, so it is longer than ``text``."""
    cap = MAX_LITERAL_CHARS if kind in ("lit", "int") else MAX_TOKEN_CHARS
    if len(text) > cap:
        what = "literal" if kind in ("lit", "int") else "name"
        size = f"over {len(text)}" if cut else str(len(text))
        raise _ParseError(f"the {what} at column {column} has {size} characters, over the limit of {cap}")
    return _Token(kind, text, _unquote(text) if kind == "str" else None)


def _shown(tok: _Token) -> str:
    """A token for a message: quoted, and shortened when long."""
    return repr(tok.text) if len(tok.text) <= 40 else repr(tok.text[:37] + "...")


#: a line with something besides blanks and a comment (found at C speed: blank lines cost nothing)
_CONTENT_LINE = re.compile(r"^[^\S\n]*[^\s#][^\n]*", re.MULTILINE)


def _lines(text: str) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of each line with content, ``\\r`` ending dropped, without a list of lines."""
    lineno, scanned = 1, 0
    for m in _CONTENT_LINE.finditer(text):
        lineno += text.count("\n", scanned, m.start())
        scanned = m.start()
        line = m.group()
        yield lineno, line[:-1] if line.endswith("\r") else line


_ESCAPE_RE = re.compile(r"\\(?:u\{([0-9a-fA-F]{1,6})\}|(.))")
_UNESCAPES = {"\\": "\\", '"': '"', "n": "\n", "t": "\t", "r": "\r"}


def _unquote(token: str) -> str:
    def replace(m: re.Match) -> str:
        if m.group(1) is not None:
            code = int(m.group(1), 16)
            if code > 0x10FFFF:
                raise _ParseError(f"escape \\u{{{m.group(1)}}} is beyond U+10FFFF")
            return chr(code)
        if m.group(2) not in _UNESCAPES:
            raise _ParseError(f"unknown escape \\{m.group(2)} in a string")
        return _UNESCAPES[m.group(2)]

    return _ESCAPE_RE.sub(replace, token[1:-1])


_F32_SPECIALS = {"inf": 0x7F800000, "-inf": 0xFF800000, "+inf": 0x7F800000, "nan": 0x7FC00000}
_F64_SPECIALS = {"inf": 0x7FF0000000000000, "-inf": 0xFFF0000000000000, "+inf": 0x7FF0000000000000,
                 "nan": 0x7FF8000000000000}
#: float literal kind -> (specials, decimal -> bits, constructor from bits)
_FLOAT_KINDS = {"f32": (_F32_SPECIALS, f32_bits, Expr.f32_from_bits),
                "f64": (_F64_SPECIALS, f64_bits, Expr.f64_from_bits)}
#: integer literal kind -> (lowest, highest, constructor)
_INT_KINDS = {"u32": (0, 0xFFFFFFFF, Expr.u32), "i32": (-(2**31), 2**31 - 1, Expr.i32),
              "u64": (0, 2**64 - 1, Expr.u64), "i64": (-(2**63), 2**63 - 1, Expr.i64)}


def _parse_literal(tok: _Token) -> Expr:
    kind, _, rest = tok.text.partition(":")
    if kind in _FLOAT_KINDS:
        specials, to_bits, from_bits = _FLOAT_KINDS[kind]
        if _HEX_BITS[kind].fullmatch(rest):
            return from_bits(int(rest, 16))
        if rest in specials:
            return from_bits(specials[rest])
        if _DECIMAL.fullmatch(rest):
            try:
                return from_bits(to_bits(float(rest)))
            except OverflowError:
                raise _ParseError(f"{kind} literal {tok.text!r} is too large") from None
        raise _ParseError(f"bad {kind} literal {tok.text!r}")
    if not re.fullmatch(r"-?[0-9]+", rest):
        raise _ParseError(f"bad {kind} literal {tok.text!r}")
    v = int(rest)
    lo, hi, build = _INT_KINDS[kind]
    if not lo <= v <= hi:
        raise _ParseError(f"{kind} literal {v} is outside [{lo}, {hi}]")
    return build(v)


class _Parser:
    """Line-oriented parser: blocks are kept on an explicit stack, expressions nest at most MAX_DEPTH."""

    def __init__(self) -> None:
        self.nodes = 0

    def tick(self) -> None:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _ParseError(f"the program has more than {MAX_NODES} statements and expressions")

    def expr(self, line: _Line, depth: int) -> Expr:
        self.tick()
        if depth > MAX_DEPTH:
            raise _ParseError(f"nesting deeper than {MAX_DEPTH} levels")
        tok = line.next("an expression")
        if tok.kind == "str":
            return Expr.var(tok.value)
        if tok.kind == "lit":
            return _parse_literal(tok)
        if tok.kind == "int":
            typed = f"i32:{tok.text}" if tok.text.startswith("-") else f"u32:{tok.text}, i32:{tok.text}"
            raise _ParseError(f"found the bare number {_shown(tok)} where an expression belongs; literals carry "
                              f"their type: write {typed} or f32:{tok.text}.0")
        if tok.kind != "ident":
            raise _ParseError(f"expected an expression, found {_shown(tok)}")
        if not line.peek("("):
            if tok.text in ("true", "false"):
                return Expr.bool(tok.text == "true")
            return Expr.var(tok.text)
        return self.call_form(tok.text, line, depth)

    def call_form(self, word: str, line: _Line, depth: int) -> Expr:
        line.expect("(")
        op, value, dtype, name = BY_NAME.get(word), None, None, None
        if word in _ATOMICS:
            op, value = Op.ATOMIC, _ATOMICS[word]
        if op is None or op in (Op.LIT, Op.VAR):
            raise _ParseError(f"unknown op {word!r}")
        args: list[Expr] = []
        if op in (Op.LOAD, Op.BUF_LEN, Op.ATOMIC, Op.CALL):
            name = line.name("a name")
        elif op in (Op.INVOCATION_ID, Op.WORKGROUP_ID, Op.LOCAL_ID):
            value = line.int("an axis")
        elif op == Op.CAST:
            dtype = line.word(_DTYPES, "a type")
        first = name is None and value is None and dtype is None
        while not line.accept(")"):
            if not first:
                line.expect(",")
            first = False
            args.append(self.expr(line, depth + 1))
        e = Expr(op, tuple(args), dtype, value, name)
        problem = shape_problem(e)
        if problem:
            raise _ParseError(problem)
        return e


@dataclass
class _Frame:
    """An open block: its kind, the statements collected so far and what builds its node."""

    kind: str  # root if else loop block region
    line: int
    path: str  # IR path of the statement list, e.g. ``body[3].then``
    body: list[Node] = field(default_factory=list)
    data: tuple = ()


def parse(text: str | bytes) -> Program:
    """Parse the text form back into a Program; malformed text raises ValidationError (``parse_error``)."""
    return parse_with_source_map(text)[0]


@dataclass(frozen=True)
class SourceMap:
    """Where the parts of a parsed program came from: IR paths (``body[2].then[0]``) -> 1-based lines."""

    lines: dict[str, int]

    def line_of(self, path: str) -> int | None:
        """The line of ``path`` or of the nearest statement (or declaration) that contains it."""
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:max(path.rfind("."), path.rfind("["), 0)]
        return None


def parse_with_source_map(text: str | bytes) -> tuple[Program, SourceMap]:
    """``parse``, also returning the line of each statement, buffer and the header (see ``SourceMap``)."""
    size = len(text) if isinstance(text, (str, bytes, bytearray)) else 0
    if size > MAX_TEXT_CHARS:
        raise _parse_error(0, f"the text has {size} characters, over the limit of {MAX_TEXT_CHARS}")
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as err:
            raise _parse_error(0, f"the text is not UTF-8 ({err.reason} at byte {err.start})") from None
    if not isinstance(text, str):
        raise _parse_error(0, f"expected str, got {type(text).__name__}")
    try:
        return _parse_lines(text)
    except _ParseAt as err:
        raise _parse_error(*err.args) from None


class _ParseAt(Exception):
    """A parse error with its line number."""


def _parse_error(lineno: int, message: str) -> ValidationError:
    where = f"line {lineno}: " if lineno else ""
    fix = _FIX if lineno else "pass the UTF-8 text of one program, at most MAX_TEXT_CHARS characters"
    return ValidationError([Finding("parse_error", f"{where}{message}", fix, f"line {lineno}")])


def _parse_lines(text: str) -> tuple[Program, SourceMap]:
    parser = _Parser()
    header: tuple | None = None
    buffers: list[BufferDecl] = []
    where: dict[str, int] = {}
    stack = [_Frame("root", 0, "body")]
    lineno = 0
    for lineno, raw in _lines(text):
        try:
            line = _Line(raw)
            if line.empty():
                continue
            if header is None:
                header = _header(line)
                where["workgroup_size"] = where["name"] = lineno
            elif line.peek("buffer"):
                if len(stack) > 1 or stack[0].body:
                    raise _ParseError("buffer declarations must come before the statements")
                parser.tick()
                where.setdefault("buffers", lineno)  # findings about all buffers name the first
                where[f"buffers[{len(buffers)}]"] = lineno
                buffers.append(_buffer(line))
            else:
                _statement(parser, line, stack, lineno, where)
        except (_ParseError, ValueError, TypeError, OverflowError) as err:
            raise _ParseAt(lineno, str(err)) from None
    if header is None:
        raise _ParseAt(text.count("\n") + 1, "missing the 'program ... workgroup(x, y, z)' header")
    if len(stack) > 1:
        raise _ParseAt(stack[-1].line, "this block is not closed with '}' before the end of the text")
    name, wg = header
    return Program(buffers, wg, stack[0].body, name), SourceMap(where)


def _header(line: _Line) -> tuple:
    line.expect("program")
    after = line.token(1)
    unnamed = line.peek("workgroup") and after is not None and after.text == "("
    name = None if unnamed else line.name("the program name")
    line.expect("workgroup")
    line.expect("(")
    x = line.int("workgroup x")
    line.expect(",")
    y = line.int("workgroup y")
    line.expect(",")
    z = line.int("workgroup z")
    line.expect(")")
    line.end()
    return name, (x, y, z)


def _buffer(line: _Line) -> BufferDecl:
    line.expect("buffer")
    name = line.name("the buffer name")
    line.expect(":")
    access = line.word(_ACCESS, "an access mode")
    dtype = line.word(_DTYPES, "an element type")
    line.expect("[")
    count = line.int("the element count")
    line.expect("]")
    if line.accept("@"):
        binding = line.int("the binding")
    elif access is Access.WORKGROUP:
        binding = -1
    else:
        raise _ParseError(f"{access.value} buffer {name!r} needs '@BINDING'")
    line.end()
    return BufferDecl(name, binding, dtype, count, access)


def _statement(parser: _Parser, line: _Line, stack: list[_Frame], lineno: int, where: dict[str, int]) -> None:
    if line.accept("}"):
        _close(line, stack, lineno)
        return
    parser.tick()
    path = f"{stack[-1].path}[{len(stack[-1].body)}]"  # of the statement this line starts
    where[path] = lineno
    depth = len(stack)  # of this statement; its expressions start one deeper
    if depth > MAX_DEPTH:
        raise _ParseError(f"statements nest deeper than {MAX_DEPTH} levels")
    kw = line.next("a statement")
    word = kw.text if kw.kind == "ident" else ""
    body = stack[-1].body
    if word in ("let", "set"):
        name = line.name("a variable name")
        line.expect("=")
        body.append((Node.let if word == "let" else Node.assign)(name, parser.expr(line, depth + 1)))
    elif word == "store":
        buf = line.name("a buffer name")
        line.expect("[")
        index = parser.expr(line, depth + 1)
        line.expect("]")
        line.expect("=")
        body.append(Node.store(buf, index, parser.expr(line, depth + 1)))
    elif word in ("barrier", "return"):
        body.append(Node.barrier() if word == "barrier" else Node.return_())
    elif word == "if":
        cond = parser.expr(line, depth + 1)
        line.expect("{")
        stack.append(_Frame("if", lineno, path + ".then", data=(cond,)))
    elif word == "loop":
        var = line.name("the loop variable")
        line.expect("in")
        start = parser.expr(line, depth + 1)
        line.expect("..")
        end = parser.expr(line, depth + 1)
        line.expect("{")
        stack.append(_Frame("loop", lineno, path + ".body", data=(var, start, end)))
    elif word == "block":
        line.expect("{")
        stack.append(_Frame("block", lineno, path + ".body"))
    elif word == "region":
        generator = line.name("the region generator")
        line.expect("{")
        stack.append(_Frame("region", lineno, path + ".body", data=(generator,)))
    else:
        raise _ParseError(f"unknown statement {kw.text!r}")
    line.end()


def _close(line: _Line, stack: list[_Frame], lineno: int) -> None:
    if len(stack) == 1:
        raise _ParseError("'}' closes no block")
    frame = stack.pop()
    if line.accept("else"):
        line.expect("{")
        line.end()
        if frame.kind != "if":
            raise _ParseError("'} else {' must close the then-branch of an if")
        stack.append(_Frame("else", lineno, frame.path[: -len("then")] + "otherwise",
                            data=(*frame.data, tuple(frame.body))))
        return
    line.end()
    body = tuple(frame.body)
    if frame.kind == "if":
        node: Node = Node.if_(frame.data[0], body)
    elif frame.kind == "else":
        node = Node.if_(frame.data[0], frame.data[1], body)
    elif frame.kind == "loop":
        var, start, end = frame.data
        node = Node.loop(var, start, end, body)
    elif frame.kind == "block":
        node = Node.block(body)
    else:
        node = Node.region(frame.data[0], body)
    stack[-1].body.append(node)
