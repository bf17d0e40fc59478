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

**Packages, and their layers.** Collapsed to packages (a subpackage ``tfp_sgmcmc.data``
stands for every module under it; a top-level module such as ``tfp_sgmcmc.loop`` is its
own node; ``tfp_sgmcmc`` itself is the package's ``__init__``, the lazy namespace of
``import tfp_sgmcmc as sg``), the module-level graph has no cycle either, and every import
goes down (or sideways, within a layer) in this order, bottom first (``LAYERS``):

1. **base**: ``internal`` (shared helpers), ``_startup`` (a quiet TensorFlow start-up),
   ``_kernel_names`` (the samplers' names read from source, without TensorFlow);
2. **building blocks**: ``integrators`` (pure update rules), ``schedules``,
   ``transforms`` (drift transforms), ``data`` (minibatch sources);
3. **loop**: ``loop``, the one loop every chain runs in and its seed rule;
4. **estimators**: gradient estimators and mode search (``find_map`` runs Adam in the loop);
5. **priors**: sparse priors with their estimators;
6. **kernels**: the samplers;
7. **diagnostics**: Stein discrepancies, ESS, calibration;
8. **runs**: ``driver`` (long runs, chunks, HDF5, ``sample_chain``), ``export`` (ArviZ);
9. **tuning**: MAMBA and its baselines;
10. **recipes**: ``joint`` (``JointPosterior``), ``automatic`` (``sample_posterior``),
    ``keras`` (``KerasPosterior``): front ends that build a posterior and run the layers
    below;
11. **models**: reference models with ground truth (the BNNs use the Keras bridge);
12. **cli**: the ``tfp-sgmcmc`` command;
13. **namespace**: ``tfp_sgmcmc`` (its ``__init__``), which names everything lazily.

The order holds for module-level imports without exception. A function-level import runs
only when called, but it is a dependency all the same: it must go down too, except the few
listed in ``UPWARD_FUNCTION_IMPORTS`` with the reason each stays for now (the list may
only shrink: an entry whose import is gone fails too). The core (every layer up to the
tuner) never imports the recipes, the command line or the namespace, at any level.

**Private names stay private.** A name ``_x`` of a module is that module's own; a module
``_m`` (or a package ``_p``) is its package's own: importable by the modules of that
package and of its subpackages only. No module of the library imports, or reads as an
attribute (``module._x``), a name private to another (``find_private_imports``). Binding
an imported public name under a private alias (``import x as _x``) is allowed: the name
imported is public.
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
    # The Keras bridge is a package: its modules are one node, in the recipes layer.
    assert f"{PACKAGE}.keras._model" in graph.modules
    assert node_of(f"{PACKAGE}.keras._model") == f"{PACKAGE}.keras"
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


# --------------------------------------------------------------------------- #
# Packages and layers
# --------------------------------------------------------------------------- #
#: The layers, bottom first: ``(name, nodes)`` with the nodes as dotted names under the
#: package (``""``: the package's own ``__init__``). See the module docstring.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("internal", "_startup", "_kernel_names")),
    ("building blocks", ("integrators", "schedules", "transforms", "data")),
    ("loop", ("loop",)),
    ("estimators", ("estimators",)),
    ("priors", ("priors",)),
    ("kernels", ("kernels",)),
    ("diagnostics", ("diagnostics",)),
    ("runs", ("driver", "export")),
    ("tuning", ("tuning",)),
    ("recipes", ("joint", "automatic", "keras")),
    ("models", ("models",)),
    ("cli", ("cli",)),
    ("namespace", ("",)),
)

#: The top layer of the core; the core imports nothing above it, at any level.
CORE_TOP = "tuning"

#: Function-level imports that go up, each with the reason it stays for now. The list may
#: only shrink (``test_function_level_imports_go_down_but_the_listed_ones``).
UPWARD_FUNCTION_IMPORTS: dict[tuple[str, str], str] = {
    **{
        (f"{PACKAGE}.driver.model", f"{PACKAGE}.models.{name}"): (
            "the command line's model-file protocol builds the built-in models by name; "
            "it belongs with the command line and moves out of the driver with it"
        )
        for name in ("logistic_regression", "mnist_bnn", "pmf")
    },
    (f"{PACKAGE}.cli", PACKAGE): (
        "reads ``tfp_sgmcmc.__file__`` to find the kernels' source; the package is the "
        "command line's parent, imported before it, so nothing new runs"
    ),
}


def node_of(module: str, package: str = PACKAGE) -> str:
    """The package-level node of a module: its subpackage, or the top-level module itself
    (``package`` for the package's own ``__init__``)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == package else module


def package_edges(edges: Mapping[str, Iterable[str]], package: str = PACKAGE) -> dict:
    """``edges`` between modules collapsed to edges between their nodes (no self-edges)."""
    out: dict[str, set[str]] = {}
    for source, targets in edges.items():
        a = node_of(source, package)
        out.setdefault(a, set())
        for target in targets:
            b = node_of(target, package)
            if b != a:
                out[a].add(b)
                out.setdefault(b, set())
    return out


def layer_ranks(
    layers: Iterable[tuple[str, Iterable[str]]], package: str = PACKAGE
) -> dict[str, int]:
    """``{node: index of its layer}``, the nodes as full dotted names."""
    return {
        (f"{package}.{node}" if node else package): i
        for i, (_, nodes) in enumerate(layers)
        for node in nodes
    }


def upward_imports(
    edges: Mapping[str, Iterable[str]], ranks: Mapping[str, int], package: str = PACKAGE
) -> set[tuple[str, str]]:
    """The ``(importer, imported)`` module pairs whose import goes up a layer."""
    return {
        (source, target)
        for source, targets in edges.items()
        for target in targets
        if ranks[node_of(target, package)] > ranks[node_of(source, package)]
    }


def test_packages_have_no_module_level_cycle(graph):
    edges = package_edges(graph.module_level)
    cycle = find_cycle(edges)
    assert cycle is None, "package-level import cycle: " + " -> ".join(cycle)
    assert f"{PACKAGE}.loop" in edges[f"{PACKAGE}.estimators"]  # find_map runs the loop


def test_every_package_has_one_layer(graph):
    nodes = {node_of(m) for m in graph.modules}
    listed = [f"{PACKAGE}.{n}" if n else PACKAGE for _, ns in LAYERS for n in ns]
    assert len(listed) == len(set(listed)), "a node is in two layers"
    assert nodes - set(listed) == set(), "place these in LAYERS"
    assert set(listed) - nodes == set(), "LAYERS names nodes that no longer exist"


def test_module_level_imports_go_down_the_layers(graph):
    up = upward_imports(graph.module_level, layer_ranks(LAYERS))
    assert not up, "module-level imports that go up a layer:\n" + "\n".join(
        f"  {a} -> {b}" for a, b in sorted(up)
    )


def test_function_level_imports_go_down_but_the_listed_ones(graph):
    up = upward_imports(graph.function_level, layer_ranks(LAYERS))
    new = up - set(UPWARD_FUNCTION_IMPORTS)
    assert not new, "function-level imports that go up a layer:\n" + "\n".join(
        f"  {a} -> {b}" for a, b in sorted(new)
    )
    gone = set(UPWARD_FUNCTION_IMPORTS) - up
    assert not gone, f"no longer imported, remove from UPWARD_FUNCTION_IMPORTS: {sorted(gone)}"


def core_imports_of_the_top(
    kinds: Mapping[str, Mapping[str, Iterable[str]]],
    layers: tuple[tuple[str, tuple[str, ...]], ...] = LAYERS,
) -> list[str]:
    """``"importer -> imported (kind)"`` for every import, of any kind in ``kinds``
    (``{kind: edges}``), from the core (layers up to ``CORE_TOP``) into the recipes, the
    command line or the namespace."""
    ranks = layer_ranks(layers)
    names = [name for name, _ in layers]
    core = {node for node, i in ranks.items() if i <= names.index(CORE_TOP)}
    banned = {node for node, i in ranks.items() if names[i] in ("recipes", "cli", "namespace")}
    assert core and banned and not core & banned
    return [
        f"{a} -> {b} ({kind})"
        for kind, edges in kinds.items()
        for a, targets in sorted(edges.items())
        for b in sorted(targets)
        if node_of(a) in core and node_of(b) in banned
    ]


def _kinds(graph: ImportGraph) -> dict[str, dict[str, set[str]]]:
    return {"module": graph.module_level, "function": graph.function_level,
            "type checking": graph.type_checking}  # fmt: skip


def test_the_core_never_imports_the_recipes_or_the_command_line(graph):
    bad = core_imports_of_the_top(_kinds(graph))
    assert not bad, "the core imports the recipes, the command line or the namespace:\n" + (
        "\n".join(bad)
    )


def test_the_core_check_reports_a_planted_import_of_a_recipe_or_the_cli(graph):
    # Power check on the real graph: a deferred import of the Keras bridge by a diagnostic,
    # and a type-checking import of the command line by the driver, are both reported;
    # the tuner importing the kernels (core to core) is not.
    kinds = _kinds(graph)
    calibration, sampler = f"{PACKAGE}.diagnostics.calibration", f"{PACKAGE}.driver.sampler"
    kinds["function"] = {**kinds["function"], calibration: {f"{PACKAGE}.keras"}}
    kinds["type checking"] = {**kinds["type checking"], sampler: {f"{PACKAGE}.cli"}}
    kinds["module"] = {**kinds["module"], f"{PACKAGE}.tuning.runner": {f"{PACKAGE}.kernels"}}
    assert core_imports_of_the_top(kinds) == [
        f"{calibration} -> {PACKAGE}.keras (function)",
        f"{sampler} -> {PACKAGE}.cli (type checking)",
    ]


def test_the_layer_check_reports_an_upward_edge():
    # Power check on planted graphs: an edge up a layer is reported, by module; edges down
    # and within a layer are not.
    layers = (("low", ("a", "b")), ("mid", ("c",)), ("top", ("",)))
    ranks = layer_ranks(layers, "pkg")
    down = {"pkg.c.x": {"pkg.a", "pkg.b.y"}, "pkg.a": {"pkg.b.y"}, "pkg": {"pkg.c.x"}}
    assert upward_imports(down, ranks, "pkg") == set()
    planted = {**down, "pkg.b.y": {"pkg.c.x"}, "pkg.a": {"pkg"}}
    assert upward_imports(planted, ranks, "pkg") == {("pkg.b.y", "pkg.c.x"), ("pkg.a", "pkg")}
    assert package_edges(planted, "pkg") == {
        "pkg.c": {"pkg.a", "pkg.b"}, "pkg.a": {"pkg"}, "pkg.b": {"pkg.c"}, "pkg": {"pkg.c"},
    }  # fmt: skip


def test_the_layer_check_catches_the_loop_back_in_the_driver(graph):
    # Power check on the real layers: were ``find_map`` to import the loop from the
    # driver again (as it did), the estimators would import a layer above them.
    planted = {**graph.module_level}
    planted[f"{PACKAGE}.estimators.map"] = planted[f"{PACKAGE}.estimators.map"] | {
        f"{PACKAGE}.driver.chunks"
    }
    up = upward_imports(planted, layer_ranks(LAYERS))
    assert up == {(f"{PACKAGE}.estimators.map", f"{PACKAGE}.driver.chunks")}
    # ... and with the driver importing the estimators, the packages would form a cycle.
    assert find_cycle(package_edges(planted)) is not None


def test_a_module_level_upward_import_in_a_synthetic_package_is_reported(tmp_path):
    # Power check through the parser: a low module importing a high one at module level.
    pkg = _write(
        tmp_path,
        {
            "__init__.py": "",
            "low.py": "import pkg.high.run\n",
            "high/__init__.py": "",
            "high/run.py": "from pkg import low\n",
        },
    )
    graph = build_graph(pkg, "pkg")
    layers = (("low", ("low",)), ("high", ("high",)), ("namespace", ("",)))
    assert upward_imports(graph.module_level, layer_ranks(layers, "pkg"), "pkg") == {
        ("pkg.low", "pkg.high.run")
    }


# --------------------------------------------------------------------------- #
# Private names
# --------------------------------------------------------------------------- #
def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_owner(module: str) -> str | None:
    """The package that owns a private module (``a.b._m`` -> ``a.b``), or ``None``."""
    parts = module.split(".")
    for k, part in enumerate(parts):
        if _is_private(part):
            return ".".join(parts[:k])
    return None


def find_private_imports(package_dir: pathlib.Path, package: str) -> set[tuple[str, int, str]]:
    """``(module, line, name)`` for every use, by a module of ``package``, of a name
    private to another: ``from m import _x``, ``m._x`` (``m`` an imported module) with
    ``m`` not the module itself, or an import of a private module from outside its package.
    Every import counts (module level, function level, type checking)."""
    files = module_files(package_dir, package)
    modules = set(files)
    found: set[tuple[str, int, str]] = set()
    for name, path in files.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))

        def check_module(module: str, line: int, name: str = name) -> None:
            owner = _private_owner(module)
            if owner is not None and not (name == owner or name.startswith(owner + ".")):
                found.add((name, line, module))

        bound: dict[str, str] = {}  # local name -> the package module it is
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] != package:
                        continue
                    check_module(alias.name, node.lineno)
                    if alias.asname:
                        bound[alias.asname] = alias.name
                    else:
                        bound[alias.name.split(".")[0]] = package
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = name.split(".") if is_package else name.split(".")[:-1]
                    parts = parts[: len(parts) - (node.level - 1)]
                    base = ".".join(parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                if base.split(".")[0] != package:
                    continue
                check_module(base, node.lineno)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    if sub in modules:
                        check_module(sub, node.lineno)
                        bound[alias.asname or alias.name] = sub
                    elif _is_private(alias.name) and base != name:
                        found.add((name, node.lineno, sub))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or isinstance(node.ctx, ast.Del):
                continue
            chain = []  # ``a.b.c`` -> base Name ``a``, attributes [b, c]
            value: ast.expr = node
            while isinstance(value, ast.Attribute):
                chain.append(value.attr)
                value = value.value
            if not (isinstance(value, ast.Name) and value.id in bound):
                continue
            # (ast.walk visits ``a.b`` inside ``a.b.c`` too: the same finding, once in a set.)
            current = bound[value.id]
            for attr in reversed(chain):
                if f"{current}.{attr}" in modules:
                    current = f"{current}.{attr}"
                    check_module(current, node.lineno)
                    continue
                if _is_private(attr) and current != name:
                    found.add((name, node.lineno, f"{current}.{attr}"))
                break
    return found


def test_no_module_uses_a_name_private_to_another():
    found = find_private_imports(ROOT / PACKAGE, PACKAGE)
    assert not found, "private names used across modules (make them public where they " + (
        "live, or move them):\n" + "\n".join(f"  {m}:{line}: {n}" for m, line, n in sorted(found))
    )


def test_the_private_name_check_reports_each_kind_of_use(tmp_path):
    # Power check on a planted package: every kind of cross-module use of a private name
    # is reported (by module, line and name); a module's own private names, a private
    # module used inside its package and a public name bound privately are not.
    pkg = _write(
        tmp_path,
        {
            "__init__.py": "from pkg import _helpers\n",
            "a.py": "_x = 1\ny = 2\n\n\ndef f():\n    return _x\n",
            "_helpers.py": "z = 3\n",
            "sub/__init__.py": "",
            "sub/_inner.py": "w = 4\n",
            "sub/ok.py": (
                "from pkg.sub._inner import w\n"
                "from pkg import _helpers\n"
                "from . import _inner\n"
                "from pkg.a import y as _y\n"
            ),
            "b.py": (
                "from pkg.a import _x, y\n"  # 1
                "import pkg.a\n"
                "from pkg import a as mod\n"
                "\n"
                "\n"
                "def f():\n"
                "    from pkg.sub._inner import w\n"  # 7
                "    return pkg.a._x + w\n"  # 8
                "\n"
                "\n"
                "from pkg.sub import _inner\n"  # 11
                "import pkg.sub._inner as inner\n"  # 12
                "print(mod._x, mod.__name__, mod.y)\n"  # 13
            ),
        },
    )
    assert find_private_imports(pkg, "pkg") == {
        ("pkg.b", 1, "pkg.a._x"),
        ("pkg.b", 7, "pkg.sub._inner"),
        ("pkg.b", 8, "pkg.a._x"),
        ("pkg.b", 11, "pkg.sub._inner"),
        ("pkg.b", 12, "pkg.sub._inner"),
        ("pkg.b", 13, "pkg.a._x"),
    }
