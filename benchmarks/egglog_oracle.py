"""egglog (the Python bindings of the Rust engine, ``pip install egglog``) as the judge of
``vyre.lib.egraph``'s equality saturation: the same terms and rules, its e-class count after each
iteration. Also the random terms over ``+`` and ``*`` the tests and the benchmark use.

Terms and rules are written in vyre's rule language; here they become egglog's: operators are
constructors of one sort ``Term`` (``+`` is ``Add``, ``*`` is ``Mul``), integer leaves ``(Num i)``,
other leaves ``(Sym "x")``, ``?a`` the variable ``a``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence

import numpy as np

OPS = {"+": "Add", "*": "Mul"}
LEAVES = ("0", "1", "2", "x", "y", "z")
SIGNATURE = ("+", "*", *LEAVES)
COMM_ASSOC = ("(+ ?a ?b) => (+ ?b ?a)", "(* ?a ?b) => (* ?b ?a)",
              "(+ ?a (+ ?b ?c)) => (+ (+ ?a ?b) ?c)", "(* ?a (* ?b ?c)) => (* (* ?a ?b) ?c)")


def random_term(rng: np.random.Generator, depth: int) -> str:
    """A random term over ``+``, ``*`` and ``LEAVES``, at most ``depth`` operators deep."""
    if depth == 0 or rng.random() < 0.25:
        return LEAVES[int(rng.integers(len(LEAVES)))]
    op = "+" if rng.random() < 0.5 else "*"
    return f"({op} {random_term(rng, depth - 1)} {random_term(rng, depth - 1)})"


def random_terms(seed: int, count: int, depth: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [random_term(rng, depth) for _ in range(count)]


def terms_of_size(enodes: int, seed: int = 0, depth: int = 4) -> list[str]:
    """Random terms (``random_term``) until their distinct subterms, the e-nodes of their e-graph,
    number at least ``enodes``."""
    from vyre.lib.egraph_rules import App, Signature, parse_term

    sig, rng = Signature(SIGNATURE), np.random.default_rng(seed)
    seen: set[App] = set()
    terms: list[str] = []

    def add(t: App) -> None:
        if t not in seen:
            seen.add(t)
            for c in t.children:
                if isinstance(c, App):
                    add(c)

    while len(seen) < enodes:
        terms.append(random_term(rng, depth))
        add(parse_term(terms[-1], sig))
    return terms


def _egglog_atom(atom: str) -> str:
    if atom.startswith("?"):
        return atom[1:]
    if re.fullmatch(r"[+-]?\d+", atom):
        return f"(Num {int(atom)})"
    return f'(Sym "{atom}")'


def to_egglog(text: str) -> str:
    """A term or pattern of vyre's rule language in egglog's syntax."""
    out = []
    head = False
    for tok in re.findall(r"\(|\)|[^\s()]+", text):
        if tok in "()":
            out.append(tok)
            head = tok == "("
        else:
            out.append(OPS[tok] if head else _egglog_atom(tok))
            head = False
    return " ".join(out).replace("( ", "(").replace(" )", ")")


def available() -> bool:
    try:
        import egglog.bindings  # noqa: F401
    except ImportError:
        return False
    return True


class Egglog:
    """An egglog e-graph of ``terms`` with ``rules`` (vyre's syntax) registered."""

    def __init__(self, terms: Sequence[str], rules: Sequence[str]) -> None:
        from egglog import bindings

        self.egraph = bindings.EGraph()
        lines = [f"(datatype Term (Num i64) (Sym String) {' '.join(f'({c} Term Term)' for c in OPS.values())})"]
        for rule in rules:
            lhs, rhs = rule.split("=>")
            lines.append(f"(rewrite {to_egglog(lhs)} {to_egglog(rhs)})")
        self.run_text("\n".join(lines))
        for at in range(0, len(terms), 32):  # one long program text makes egglog's parser run out of memory
            self.run_text("\n".join(to_egglog(t) for t in terms[at:at + 32]))

    def run_text(self, text: str) -> None:
        self.egraph.run_program(*self.egraph.parse_program(text))

    def run(self, iterations: int) -> None:
        """``iterations`` rounds of every rule (match all, apply all, rebuild)."""
        self.run_text(f"(run {iterations})")

    def classes(self) -> int:
        """The number of e-classes of sort ``Term``."""
        frozen = self.egraph.freeze()
        return len({row.output for f in frozen.functions.values() if f.output_sort == "Term" for row in f.rows})


def egglog_classes(terms: Sequence[str], rules: Sequence[str], iterations: int) -> list[int]:
    """egglog's e-class count of ``terms`` before any rule and after each of ``iterations`` rounds."""
    eg = Egglog(terms, rules)
    counts = [eg.classes()]
    for _ in range(iterations):
        eg.run(1)
        counts.append(eg.classes())
    return counts


def egglog_seconds(terms: Sequence[str], rules: Sequence[str], iterations: int) -> tuple[float, int]:
    """Wall time of ``(run iterations)`` on a fresh egglog e-graph of ``terms``, and its e-class count."""
    eg = Egglog(terms, rules)
    start = time.perf_counter()
    eg.run(iterations)
    return time.perf_counter() - start, eg.classes()
