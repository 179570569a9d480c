"""The rewrite-rule language of ``vyre.lib.egraph``'s equality saturation: S-expressions over named
operators, parsed against a ``Signature`` (names -> the e-graph's u32 op ids).

A rule is ``"lhs => rhs"``: ``(+ ?a ?b) => (+ ?b ?a)``. ``?x`` is a variable; any other atom (an
operator or symbol name, or an integer such as ``1``, which names the leaf ``"1"``) is looked up in
the signature; ``(f x y)`` is an e-node of operator ``f`` with those children and a bare atom is a
leaf (an e-node of no children). The left-hand side is an operator or leaf pattern (not a bare
variable); every variable of the right-hand side appears on the left. Terms (no variables) use the
same syntax and become e-graph columns with ``term_columns``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from vyre.driver.errors import InvalidProgram

_TOKEN = re.compile(r"\(|\)|[^\s()]+")
Columns = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # eclass, op, offsets, lens, children


class Signature:
    """Operator and leaf names -> op ids (the ``op`` column); ids are given in order from 0."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        self.ids: dict[str, int] = {}
        for name in names:
            self.add(name)

    def add(self, name: str) -> int:
        """The id of ``name``, a new one (the next free id) if it has none yet."""
        if not name or name.startswith("?") or any(c in name for c in " ()\t\n"):
            raise InvalidProgram(f"{name!r} cannot name an operator or leaf",
                                 "use a name without spaces or parentheses that does not start with '?'.")
        return self.ids.setdefault(name, len(self.ids))

    def __getitem__(self, name: str) -> int:
        if name not in self.ids:
            raise InvalidProgram(f"{name!r} is not in the signature (it names {sorted(self.ids)})",
                                 f"add it: Signature([..., {name!r}]) or signature.add({name!r}).")
        return self.ids[name]

    def name(self, op: int) -> str:
        """The name of op id ``op``."""
        for name, i in self.ids.items():
            if i == op:
                return name
        raise InvalidProgram(f"op id {op} has no name in the signature", "add its name to the Signature.")


@dataclass(frozen=True)
class Var:
    """A pattern variable (``?name``)."""

    name: str


@dataclass(frozen=True)
class App:
    """An e-node pattern: operator ``op`` (an id) with child patterns (none: a leaf)."""

    op: int
    children: tuple[Pattern, ...] = ()


Pattern = Var | App


@dataclass(frozen=True)
class Rule:
    """``lhs => rhs``; ``variables`` are the left side's, in order of first appearance (depth first)."""

    lhs: App
    rhs: Pattern
    variables: tuple[str, ...]
    text: str


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def _read(tokens: list[str], at: int, text: str) -> tuple[object, int]:
    """One S-expression from ``tokens[at:]``: a str atom or a list; and where it ends."""
    if at >= len(tokens):
        raise InvalidProgram(f"{text!r} ends inside an expression", "close every '(' with a ')'.")
    tok = tokens[at]
    if tok == ")":
        raise InvalidProgram(f"{text!r} has a ')' with no '(' before it", "balance the parentheses.")
    if tok != "(":
        return tok, at + 1
    items: list[object] = []
    at += 1
    while at < len(tokens) and tokens[at] != ")":
        item, at = _read(tokens, at, text)
        items.append(item)
    if at >= len(tokens):
        raise InvalidProgram(f"{text!r} ends inside an expression", "close every '(' with a ')'.")
    if not items:
        raise InvalidProgram(f"{text!r} holds an empty list '()'", "write (operator child ...) or a bare leaf name.")
    return items, at + 1


def _one(text: str) -> object:
    tokens = _tokens(text)
    if not tokens:
        raise InvalidProgram(f"{text!r} holds no expression", "write an S-expression such as (+ ?a ?b).")
    expr, end = _read(tokens, 0, text)
    if end != len(tokens):
        raise InvalidProgram(f"{text!r} has text after its expression: {' '.join(tokens[end:])!r}",
                             "write one S-expression per side (wrap several in an operator).")
    return expr


def _atom_name(atom: str) -> str:
    """An integer atom names the leaf of its decimal text (``01`` and ``1`` are the same leaf)."""
    return str(int(atom)) if re.fullmatch(r"[+-]?\d+", atom) else atom


def _pattern(expr: object, signature: Signature, text: str, variables: bool) -> Pattern:
    if isinstance(expr, str):
        if expr.startswith("?"):
            if not variables:
                raise InvalidProgram(f"{text!r} holds the variable {expr}, but a term has none",
                                     "write a ground term (operators and leaves only).")
            if len(expr) == 1:
                raise InvalidProgram(f"{text!r} holds a '?' with no name", "name variables: ?a, ?b, ...")
            return Var(expr[1:])
        return App(signature[_atom_name(expr)])
    assert isinstance(expr, list)
    head = expr[0]
    if not isinstance(head, str) or head.startswith("?"):
        raise InvalidProgram(f"{text!r} has {head!r} in operator position",
                             "start every list with an operator name: (f ?x), not (?f ?x) or ((f) ?x).")
    return App(signature[_atom_name(head)], tuple(_pattern(e, signature, text, variables) for e in expr[1:]))


def variables_of(pattern: Pattern) -> list[str]:
    """Variable names of ``pattern``, each once, in order of first appearance (depth first, left to right)."""
    out: list[str] = []

    def walk(p: Pattern) -> None:
        if isinstance(p, Var):
            if p.name not in out:
                out.append(p.name)
        else:
            for c in p.children:
                walk(c)

    walk(pattern)
    return out


def parse_rule(text: str, signature: Signature) -> Rule:
    """``"lhs => rhs"`` as a ``Rule`` (names resolved in ``signature``); a bad rule raises InvalidProgram."""
    if not isinstance(text, str):
        raise InvalidProgram(f"a rule must be a string, got {type(text).__name__}",
                             'pass rules as strings such as "(+ ?a ?b) => (+ ?b ?a)" or parsed Rules.')
    sides = text.split("=>")
    if len(sides) != 2:
        raise InvalidProgram(f"{text!r} needs exactly one '=>' between its two sides",
                             'write "lhs => rhs", e.g. "(+ ?a ?b) => (+ ?b ?a)".')
    lhs = _pattern(_one(sides[0]), signature, text, True)
    rhs = _pattern(_one(sides[1]), signature, text, True)
    if isinstance(lhs, Var):
        raise InvalidProgram(f"{text!r} has a bare variable as its left-hand side (it would match every e-class)",
                             "start the left-hand side with an operator or leaf: (f ?x ...).")
    left = variables_of(lhs)
    missing = [v for v in variables_of(rhs) if v not in left]
    if missing:
        raise InvalidProgram(f"{text!r}: the right-hand side's ?{', ?'.join(missing)} "
                             f"{'is' if len(missing) == 1 else 'are'} not bound by the left-hand side",
                             "use only variables that the left-hand side binds.")
    return Rule(lhs, rhs, tuple(left), text.strip())


def parse_rules(rules: Sequence[str | Rule], signature: Signature | None) -> list[Rule]:
    """Rules given as strings (parsed against ``signature``) or ``Rule``s."""
    out = []
    for rule in rules:
        if isinstance(rule, Rule):
            out.append(rule)
        elif signature is None:
            raise InvalidProgram(f"the rule {rule!r} is a string, but no signature names its operators",
                                 "pass signature=Signature([...]) (operator and leaf names in op-id order).")
        else:
            out.append(parse_rule(rule, signature))
    return out


def parse_term(text: str, signature: Signature) -> App:
    """A ground term (no variables) as an ``App``."""
    term = _pattern(_one(text), signature, text, False)
    assert isinstance(term, App)
    return term


def term_columns(terms: Sequence[str | App], signature: Signature) -> tuple[Columns, np.ndarray]:
    """E-graph columns ``(eclass, op, child_offsets, child_lens, children)`` of ``terms`` (each
    distinct subterm once, its own e-class), and the e-class of each term."""
    ids: dict[App, int] = {}
    ops: list[int] = []
    kids: list[tuple[int, ...]] = []

    def add(t: App) -> int:
        if t not in ids:
            children = tuple(add(c) for c in t.children if isinstance(c, App))
            ids[t] = len(ops)
            ops.append(t.op)
            kids.append(children)
        return ids[t]

    roots = np.array([add(t if isinstance(t, App) else parse_term(t, signature)) for t in terms], np.uint32)
    lens = np.array([len(k) for k in kids], np.uint32)
    offsets = np.zeros(len(ops), np.uint32)
    offsets[1:] = np.cumsum(lens, dtype=np.uint32)[:-1]
    children = np.array([c for k in kids for c in k], np.uint32)
    return (np.arange(len(ops), dtype=np.uint32), np.array(ops, np.uint32), offsets, lens, children), roots
