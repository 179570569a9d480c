"""A tiny pure-Python equality saturation (the textbook e-graph: hash-consing, union-find, naive
e-matching, rebuild by re-canonicalising until nothing merges): a second judge of
``vyre.lib.egraph``'s ``saturate`` next to egglog."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import product

from vyre.lib.egraph_rules import App, Rule, Var

Node = tuple[int, tuple[int, ...]]  # (op, child classes)


class PyEGraph:
    def __init__(self) -> None:
        self.parent: list[int] = []
        self.memo: dict[Node, int] = {}

    def find(self, c: int) -> int:
        while self.parent[c] != c:
            c = self.parent[c]
        return c

    def union(self, a: int, b: int) -> None:
        a, b = self.find(a), self.find(b)
        if a != b:
            self.parent[max(a, b)] = min(a, b)

    def add(self, op: int, kids: tuple[int, ...]) -> int:
        node = (op, tuple(self.find(k) for k in kids))
        if node not in self.memo:
            self.memo[node] = len(self.parent)
            self.parent.append(len(self.parent))
        return self.find(self.memo[node])

    def add_term(self, term: App) -> int:
        return self.add(term.op, tuple(self.add_term(c) for c in term.children if isinstance(c, App)))

    def rebuild(self) -> None:
        while True:
            memo: dict[Node, int] = {}
            merged = False
            for (op, kids), c in self.memo.items():
                node = (op, tuple(self.find(k) for k in kids))
                if node in memo and self.find(memo[node]) != self.find(c):
                    self.union(memo[node], c)
                    merged = True
                memo.setdefault(node, c)
            self.memo = memo
            if not merged:
                return

    def classes(self) -> int:
        return len({self.find(c) for c in self.memo.values()})

    def nodes_of(self, cls: int) -> Iterator[Node]:
        for node, c in self.memo.items():
            if self.find(c) == cls:
                yield node

    def ematch(self, pat: Var | App, cls: int, sub: dict[str, int]) -> Iterator[dict[str, int]]:
        if isinstance(pat, Var):
            if pat.name not in sub:
                yield {**sub, pat.name: cls}
            elif sub[pat.name] == cls:
                yield sub
            return
        for op, kids in self.nodes_of(cls):
            if op == pat.op and len(kids) == len(pat.children):
                yield from self._match_children(pat.children, kids, sub)

    def _match_children(self, pats: Sequence[Var | App], kids: tuple[int, ...],
                        sub: dict[str, int]) -> Iterator[dict[str, int]]:
        if not pats:
            yield sub
            return
        for s in self.ematch(pats[0], self.find(kids[0]), sub):
            yield from self._match_children(pats[1:], kids[1:], s)

    def instantiate(self, pat: Var | App, sub: dict[str, int]) -> int:
        if isinstance(pat, Var):
            return sub[pat.name]
        return self.add(pat.op, tuple(self.instantiate(c, sub) for c in pat.children))

    def iterate(self, rules: Sequence[Rule]) -> None:
        roots = sorted({self.find(c) for c in self.memo.values()})
        found = [(rule, root, sub) for rule, root in product(rules, roots) for sub in self.ematch(rule.lhs, root, {})]
        for rule, root, sub in found:
            self.union(root, self.instantiate(rule.rhs, sub))
        self.rebuild()


def python_classes(terms: Sequence[App], rules: Sequence[Rule], iterations: int) -> list[int]:
    """E-class counts of ``terms`` before any rule and after each iteration."""
    g = PyEGraph()
    for t in terms:
        g.add_term(t)
    g.rebuild()
    counts = [g.classes()]
    for _ in range(iterations):
        g.iterate(rules)
        counts.append(g.classes())
    return counts
