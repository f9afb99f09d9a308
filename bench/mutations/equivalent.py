"""Mutants equivalent by construction: a change only to what the running code never reads.

A docstring, an entry of `__all__` (read only by `import *`), or an annotation under
postponed evaluation changes nothing a test can observe; `bench.mutations.mutants` sets
such mutants aside (counted apart) instead of running them.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Protocol, TypeVar


class _Coded(Protocol):
    code: str


_M = TypeVar("_M", bound=_Coded)


# Decorators that read no annotation at run time: a function under any other (a tool
# registry that builds a schema from the annotations) keeps its annotations in the comparison.
_PLAIN_DECORATORS = {
    "property", "staticmethod", "classmethod", "lru_cache", "cache", "cached_property", "setter",
    "dataclass", "contextmanager", "asynccontextmanager", "wraps", "abstractmethod", "override",
}  # fmt: skip


class _Unread(ast.NodeTransformer):
    """Takes out of a module what its running code never reads: docstrings, the value of
    `__all__` (read only by `import *`), and, under `from __future__ import annotations`
    (annotations kept as strings, evaluated by nothing in the product), the annotations of
    arguments, returns and annotated assignments (the target and value are kept: a
    dataclass field stays a field)."""

    def __init__(self, annotations: bool) -> None:
        self.annotations = annotations

    @staticmethod
    def _no_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
        first = body[0] if body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            return body[1:] or [ast.Pass()]
        return body

    def visit_Module(self, node: ast.Module) -> ast.AST:
        node.body = self._no_docstring(node.body)
        return self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        node.body = self._no_docstring(node.body)
        return self.generic_visit(node)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.AST:
        node.body = self._no_docstring(node.body)
        names = {ast.unparse(d).split("(")[0].split(".")[-1] for d in node.decorator_list}
        if self.annotations and names <= _PLAIN_DECORATORS:
            node.returns = None
            a = node.args
            for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
                if arg is not None:
                    arg.annotation = None
        return self.generic_visit(node)

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        if self.annotations:
            node.annotation = ast.Constant(None)
        return self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> ast.AST:
        if [ast.unparse(t) for t in node.targets] == ["__all__"]:
            node.value = ast.Constant(None)
        return self.generic_visit(node)


def _unread_removed(source: str) -> str:
    tree = ast.parse(source)
    future = any(
        isinstance(n, ast.ImportFrom) and n.module == "__future__" and any(a.name == "annotations" for a in n.names)
        for n in tree.body
    )
    return ast.dump(_Unread(future).visit(tree))


def equivalent_by_rule(source: str, mutants: Sequence[_M]) -> tuple[list[_M], list[_M]]:
    """(the mutants to run, those set aside): a mutant that changes only what the running
    code never reads (`_Unread`: a docstring, an `__all__` entry, an annotation under
    postponed evaluation) is the original program, equivalent by construction."""
    base = _unread_removed(source)
    run, aside = [], []
    for m in mutants:
        (aside if _unread_removed(m.code) == base else run).append(m)
    return run, aside
