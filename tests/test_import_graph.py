"""The import graph of ``tfp_sgmcmc`` has no cycle.

Every module of the package is parsed with ``ast`` (nothing is imported), and its
imports of other ``tfp_sgmcmc`` modules are sorted into three kinds:

* **module level**: run when the module is imported (top-level statements, class
  bodies, ``try``/``if`` blocks at top level);
* **function level**: inside a function or method body, run only when it is called
  (the usual way to defer a heavy import or to break a cycle);
* **type checking**: under ``if TYPE_CHECKING:``, never run.

A cycle among module-level imports makes the import order matter (one module sees the
other half-initialised), so the package must have none. ``from p import name`` counts
as an import of ``p.name`` when that is a module, else of ``p``; the implicit import of
a parent package (``a.b`` runs ``a/__init__.py`` first) is not an edge, as Python
resolves it before the importing module runs.
"""

from __future__ import annotations

import ast
import pathlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = "tfp_sgmcmc"


@dataclass
class ImportGraph:
    """Edges ``module -> imported modules`` of one package, by kind of import."""

    modules: set[str] = field(default_factory=set)
    module_level: dict[str, set[str]] = field(default_factory=dict)
    function_level: dict[str, set[str]] = field(default_factory=dict)
    type_checking: dict[str, set[str]] = field(default_factory=dict)

    def combined(self) -> dict[str, set[str]]:
        """Module-level and function-level edges together (what can run)."""
        return {
            m: self.module_level.get(m, set()) | self.function_level.get(m, set())
            for m in self.modules
        }


def module_files(package_dir: pathlib.Path, package: str) -> dict[str, pathlib.Path]:
    """``{dotted module name: file}`` of every ``.py`` file under ``package_dir``."""
    out = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join([package, *parts])] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _targets(
    node: ast.Import | ast.ImportFrom, name: str, is_package: bool, modules: set[str]
) -> set[str]:
    """The package's modules that one import statement of module ``name`` imports."""
    found = set()
    if isinstance(node, ast.Import):
        for alias in node.names:
            parts = alias.name.split(".")
            # The deepest module named: ``import a.b.c`` runs a.b.c (parents aside).
            for k in range(len(parts), 0, -1):
                if ".".join(parts[:k]) in modules:
                    found.add(".".join(parts[:k]))
                    break
        return found
    if node.level:  # relative: from the module's package, ``level - 1`` packages up
        base_parts = name.split(".") if is_package else name.split(".")[:-1]
        base_parts = base_parts[: len(base_parts) - (node.level - 1)]
        base = ".".join(base_parts + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        if sub in modules:
            found.add(sub)
        elif base in modules:
            found.add(base)
    return found


def _collect(
    tree: ast.Module, name: str, is_package: bool, modules: set[str]
) -> dict[str, set[str]]:
    """The package modules one parsed module imports, by kind: module, function, type."""
    kinds: dict[str, set[str]] = {"module": set(), "function": set(), "type": set()}

    def visit(node: ast.AST, kind: str) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            kinds[kind] |= _targets(node, name, is_package, modules) - {name}
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            # Decorators, defaults and annotations run at definition time; the body
            # runs when the function is called.
            for child in ast.iter_child_nodes(node):
                in_body = any(child is stmt for stmt in node.body)
                visit(child, "function" if in_body and kind != "type" else kind)
            return
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, "type")
            for child in node.orelse:
                visit(child, kind)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, kind)

    visit(tree, "module")
    return kinds


def build_graph(package_dir: pathlib.Path, package: str) -> ImportGraph:
    """Parse every module of ``package`` (at ``package_dir``) into an ``ImportGraph``."""
    files = module_files(package_dir, package)
    graph = ImportGraph(modules=set(files))
    for name, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        kinds = _collect(tree, name, path.name == "__init__.py", graph.modules)
        graph.module_level[name] = kinds["module"]
        graph.function_level[name] = kinds["function"]
        graph.type_checking[name] = kinds["type"]
    return graph


def find_cycle(edges: Mapping[str, Iterable[str]]) -> list[str] | None:
    """A cycle ``[a, b, ..., a]`` of the directed graph ``edges``, or ``None`` if acyclic."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in sorted(edges):
        if state.get(start):
            continue
        path = [start]
        stack = [iter(sorted(edges.get(start, ())))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(edges.get(nxt, ()))))
    return None


@pytest.fixture(scope="module")
def graph() -> ImportGraph:
    return build_graph(ROOT / PACKAGE, PACKAGE)


def test_module_level_imports_have_no_cycle(graph):
    cycle = find_cycle(graph.module_level)
    assert cycle is None, "module-level import cycle: " + " -> ".join(cycle)


def test_the_data_package_has_no_cycle_even_through_function_level_imports(graph):
    data = {m for m in graph.modules if m == f"{PACKAGE}.data" or m.startswith(f"{PACKAGE}.data.")}
    assert len(data) >= 5
    edges = {m: graph.combined()[m] & data for m in data}
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle in the data package: " + " -> ".join(cycle)


def test_the_graph_reads_the_package(graph):
    # Sanity: every module parsed, known edges of each kind where they are.
    assert len(graph.modules) > 50 and f"{PACKAGE}.data.stream" in graph.modules
    assert f"{PACKAGE}.data.dataset" in graph.module_level[f"{PACKAGE}.data.stream"]
    # tfp_sgmcmc/models/pmf.py imports the data package inside a method only.
    pmf = f"{PACKAGE}.models.pmf"
    assert f"{PACKAGE}.data" in graph.function_level[pmf]
    assert f"{PACKAGE}.data" not in graph.module_level[pmf]
    # The package's own __init__ names its submodules under TYPE_CHECKING only.
    assert f"{PACKAGE}.kernels" in graph.type_checking[PACKAGE]
    assert f"{PACKAGE}.kernels" not in graph.module_level[PACKAGE]


def test_find_cycle_on_synthetic_graphs():
    # Power check: a cycle is found (and reported as a closed path); a DAG has none.
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"b"}, "d": set()}) == ["b", "c", "b"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({}) is None


def _write(root: pathlib.Path, files: dict[str, str]) -> pathlib.Path:
    for rel, text in files.items():
        path = root / "pkg" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "pkg"


def test_a_module_level_cycle_in_a_synthetic_package_is_detected(tmp_path):
    # Power check through the parser: two modules importing each other at module level
    # (one absolutely, one relatively, one through a subpackage) form a cycle ...
    pkg = _write(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from pkg.sub import b\n",
            "sub/__init__.py": "",
            "sub/b.py": "from .. import a\n",
        },
    )
    graph = build_graph(pkg, "pkg")
    assert find_cycle(graph.module_level) == ["pkg.a", "pkg.sub.b", "pkg.a"]
    # ... which a function-level or a TYPE_CHECKING import does not make.
    pkg = _write(
        tmp_path / "deferred",
        {
            "__init__.py": "",
            "a.py": "from pkg.sub import b\n",
            "sub/__init__.py": "",
            "sub/b.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    import pkg.a\n"
                "def f():\n    from pkg import a\n    return a\n"
            ),
        },
    )
    graph = build_graph(pkg, "pkg")
    assert find_cycle(graph.module_level) is None
    assert graph.function_level["pkg.sub.b"] == {"pkg.a"}
    assert graph.type_checking["pkg.sub.b"] == {"pkg.a"}
    assert find_cycle(graph.combined()) == ["pkg.a", "pkg.sub.b", "pkg.a"]
