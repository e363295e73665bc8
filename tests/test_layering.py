"""Imports run one way: ``tilecert -> backends -> lowering -> checker -> semantics``.

The graph is read from the source (every ``import``, at module level or inside a function, since a
lazy import is still a dependency), with the folders mapped as ``pyproject.toml`` installs them.
Besides the order of the floors: the checker and lowering do not import the op library
(``semantics/sched``), only the contract (``semantics/transform.py``) and the IR; inside
``semantics``, nothing but the public schedule object reaches an interpreter (the overlapped interpreter of
``semantics/pipeline/realize.py`` is one), and no module
forms an import circle with another.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"tilecert": "tilecert", "semantics": "tilecert.semantics", "checker": "tilecert.checker",
           "lowering": "tilecert.lowering", "backends": "tilecert.backends"}
FLOORS = ("tilecert.semantics", "tilecert.checker", "tilecert.lowering", "tilecert.backends", "tilecert")
OPS = "tilecert.semantics.sched"
INTERPRETERS = ("tilecert.semantics.interp", "tilecert.semantics.interp_fast", "tilecert.semantics.loopinterp",
                "tilecert.semantics.pipeline.realize")


def modules() -> dict[str, Path]:
    found = {}
    for folder, package in FOLDERS.items():
        for f in (ROOT / folder).rglob("*.py"):
            parts = [p for p in f.relative_to(ROOT / folder).with_suffix("").parts if p != "__init__"]
            found[".".join([package] + parts)] = f
    return found


def imports(name: str, f: Path, known: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports (a parent package is implied by any submodule, so not listed)."""
    package = name if f.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(f.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
            subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known]
            targets = subs if len(subs) == len(node.names) else [base, *subs]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            continue
        out.update(t for t in targets if t in known and t != name and not name.startswith(t + "."))
    return out


def floor(name: str) -> int:
    return next(k for k, p in enumerate(FLOORS) if name == p or name.startswith(p + "."))


GRAPH = {name: imports(name, f, modules()) for name, f in modules().items()}


def test_the_graph_is_read():
    assert "tilecert.semantics.ir" in GRAPH["tilecert.checker.model"]
    assert len(GRAPH) > 100


def test_floors_import_only_downwards():
    up = [(a, b) for a, outs in GRAPH.items() for b in outs if floor(b) > floor(a)]
    assert up == []


def test_checker_and_lowering_do_not_import_the_op_library():
    leaks = [(a, b) for a, outs in GRAPH.items() for b in outs
             if floor(a) in (1, 2) and (b == OPS or b.startswith(OPS + "."))]
    assert leaks == []


def test_only_the_schedule_object_reaches_an_interpreter_inside_semantics():
    allowed = {*INTERPRETERS, "tilecert.semantics.sched.schedule"}
    leaks = [(a, b) for a, outs in GRAPH.items() for b in outs
             if b in INTERPRETERS and floor(a) == 0 and a not in allowed]
    assert leaks == []


def test_no_import_circle():
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(GRAPH[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    assert circles == []
