"""Packaging and layout rules: what the library imports, what the wheel installs, how the
examples are wired (shared ``examples/_cli.py``, no ``sys.path`` edits), and the dependency
declarations in ``pyproject.toml``.

These are static checks (AST and TOML) plus one in-process model build, so they run in well
under a second each.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "tfp_sgmcmc"
EXAMPLES = ROOT / "examples"
BENCHMARKS = ROOT / "benchmarks"

# Import names of the core dependencies declared in pyproject.toml (tensorflow-probability
# imports as tensorflow_probability; tf-keras is needed by TFP but not imported by us).
CORE_IMPORTS = {
    "tensorflow",
    "tensorflow_probability",
    "keras",
    "numpy",
    "scipy",
    "matplotlib",
    "tqdm",
    "h5py",
}
# Optional dependencies (extras): imported only inside the functions that need them.
OPTIONAL_IMPORTS = {"sklearn", "arviz", "xarray", "ray"}


def _pyproject() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


def _py_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def _imports(tree: ast.AST) -> list[tuple[str, ast.AST, bool]]:
    """``(top-level module, node, at module level)`` for every absolute import in ``tree``."""
    out = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(
                child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
            )
            if isinstance(child, ast.Import):
                for alias in child.names:
                    out.append((alias.name.split(".")[0], child, not in_function))
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                out.append((child.module.split(".")[0], child, not in_function))
            visit(child, nested)

    visit(tree, False)
    return out


def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def test_library_imports_only_itself_the_stdlib_and_declared_dependencies():
    allowed = set(sys.stdlib_module_names) | {"tfp_sgmcmc"} | CORE_IMPORTS | OPTIONAL_IMPORTS
    bad = []
    for path in _py_files(LIBRARY):
        for module, node, _ in _imports(_parse(path)):
            if module not in allowed:
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {module}")
    assert not bad, "the library imports modules outside tfp_sgmcmc and its dependencies:\n" + (
        "\n".join(bad)
    )


def test_optional_dependencies_are_imported_lazily():
    """``pip install tfp-sgmcmc`` without extras must import: sklearn, arviz, ray, xarray only
    inside functions."""
    bad = []
    for path in _py_files(LIBRARY):
        for module, node, top_level in _imports(_parse(path)):
            if module in OPTIONAL_IMPORTS and top_level:
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {module} at import")
    assert not bad, "\n".join(bad)


def test_nothing_imports_a_top_level_models_package():
    bad = []
    for folder in (LIBRARY, EXAMPLES, BENCHMARKS, ROOT / "tests", ROOT / "models"):
        for path in _py_files(folder):
            if path == Path(__file__).resolve():
                continue  # this file spells the pattern it looks for
            source = path.read_text(encoding="utf-8")
            for module, node, _ in _imports(ast.parse(source)):
                if module == "models":
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno}")
            # import_module("models.x") / __import__("models") spelled as strings.
            if re.search(r"""import_module\(\s*f?["']models[."']""", source):
                bad.append(f"{path.relative_to(ROOT)}: import_module('models...')")
    assert not bad, "top-level `models` imports (use tfp_sgmcmc.models):\n" + "\n".join(bad)


def _edits_sys_path(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        # sys.path.insert / append / extend / assignment, and site.addsitedir.
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "path"
            and isinstance(node.value, ast.Name)
            and node.value.id == "sys"
        ):
            lines.append(node.lineno)
        if isinstance(node, ast.Attribute) and node.attr == "addsitedir":
            lines.append(node.lineno)
    return lines


@pytest.mark.parametrize("folder", ["examples", "benchmarks"])
def test_examples_and_benchmarks_do_not_edit_sys_path(folder):
    bad = [
        f"{p.relative_to(ROOT)}:{line}"
        for p in _py_files(ROOT / folder)
        for line in _edits_sys_path(_parse(p))
    ]
    assert not bad, "sys.path is edited (install the package instead):\n" + "\n".join(bad)


def test_sys_path_check_catches_an_edit():
    # Power check of the rule above on a snippet that does what the old examples did.
    tree = ast.parse("import sys, os\nsys.path.insert(0, os.path.dirname(__file__))\n")
    assert _edits_sys_path(tree) == [2]


def test_pyproject_installs_only_the_library():
    find = _pyproject()["tool"]["setuptools"]["packages"]["find"]
    assert find["include"] == ["tfp_sgmcmc*"]
    data = _pyproject()["tool"]["setuptools"]["package-data"]["tfp_sgmcmc"]
    assert "models/ground_truth/*.json" in data
    assert list((LIBRARY / "models" / "ground_truth").glob("*.json"))
    # The repository's models/ folder holds scripts, not a package that could be installed.
    assert not (ROOT / "models" / "__init__.py").exists()


def test_scikit_learn_is_an_extra_that_the_test_extra_includes():
    project = _pyproject()["project"]
    core = " ".join(project["dependencies"])
    extras = project["optional-dependencies"]
    assert "scikit-learn" not in core
    assert any(r.startswith("scikit-learn") for r in extras["models"])
    # CI installs the test extra: it must pull every optional dependency, so nothing skips.
    included = set()
    for req in extras["test"]:
        m = re.fullmatch(r"tfp-sgmcmc\[([a-z,]+)\]", req)
        if m:
            included |= set(m.group(1).split(","))
    for extra in ("models", "arviz", "ray"):
        assert extra in included or all(r in extras["test"] for r in extras[extra]), extra


def test_dependency_ranges_are_bounded_on_both_sides():
    for req in _pyproject()["project"]["dependencies"]:
        name = re.split(r"[\[<>=!~ ]", req, maxsplit=1)[0]
        if name in {"tensorflow", "tensorflow-probability", "tf-keras", "keras"}:
            assert ">=" in req and "<" in req and "==" not in req, req


def test_constraints_pin_every_core_dependency():
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not an exact pin"
            pins[name.lower()] = version
    for req in _pyproject()["project"]["dependencies"]:
        name = re.split(r"[\[<>=!~ ]", req, maxsplit=1)[0].lower()
        assert name in pins, f"{name} is not pinned in constraints.txt"
    for name in ("scikit-learn", "pytest", "ruff", "arviz", "ray", "hypothesis"):
        assert name in pins, name


def test_builtin_model_name_still_loads():
    from tfp_sgmcmc.driver.model import load_model

    spec = load_model(
        "logistic_regression", {"num_examples": 2_000, "num_features": 3, "batch_size": 50}
    )
    assert spec.name == "logistic_regression"
    assert spec.init_state.shape == (1, 3)


def _example_scripts() -> list[Path]:
    return [
        p
        for p in sorted(EXAMPLES.glob("*.py"))
        if not p.name.startswith("_") and not p.stem.endswith("_common")
    ]


@pytest.mark.parametrize("path", _example_scripts(), ids=lambda p: p.stem)
def test_every_example_uses_the_shared_command_line(path):
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    calls = {
        f"{n.func.value.id}.{n.func.attr}"
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and isinstance(n.func.value, ast.Name)
    }
    # The shared parser, or (older studies with their own parser) the same two options.
    shared = {"_cli.parser", "_cli.outputs"} <= calls
    own = '"--out"' in source and re.search(r"""["']out["']""", source) is not None
    assert shared or own, path.name
    # `_cli` is imported before TensorFlow, so the start-up is quiet.
    modules = [m for m, _, top in _imports(tree) if top]
    assert "_cli" in modules
    if "tensorflow" in modules:
        assert modules.index("_cli") < modules.index("tensorflow"), path.name
    # No output path is built from "docs" outside _cli.py (own parsers: only behind an
    # explicit --write-docs).
    for node in ast.walk(tree) if shared else ():
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "join":
            consts = [a.value for a in node.args if isinstance(a, ast.Constant)]
            assert "docs" not in consts, f"{path.name}:{node.lineno} writes into docs/"


def _load_cli():
    spec = importlib.util.spec_from_file_location("_examples_cli", EXAMPLES / "_cli.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_example_outputs_policy(tmp_path):
    cli = _load_cli()
    ap = cli.parser("demo", "demo")
    args = ap.parse_args([])
    assert args.out == os.path.join("out", "demo") and not args.quick
    out = cli.outputs(ap.parse_args(["--out", str(tmp_path)]))
    assert out.figure("a.png") == str(tmp_path / "figures" / "a.png")
    path = Path(out.write_study("a", "# a\n\ntext"))
    assert path.read_text() == "# a\n\ntext\n"
    assert path.parent == tmp_path / "studies" and path.name == "a" + ".md"
    # --quick names every file *_quick, so it never replaces a full run's output.
    quick = cli.outputs(ap.parse_args(["--quick", "--out", str(tmp_path)]))
    path = Path(quick.study("a"))
    assert path.parent == tmp_path / "studies" and path.stem == "a_quick"
    assert quick.name("x.png") == "x_quick.png"
    # --write-docs is the only way (besides an explicit --out) into docs/.
    docs = cli.outputs(ap.parse_args(["--write-docs"]))
    assert Path(docs.root) == ROOT / "docs"
    with pytest.raises(SystemExit):
        ap.parse_args(["--write-docs", "--out", str(tmp_path)])


def test_default_output_folder_is_git_ignored():
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    probe = subprocess.run(
        ["git", "check-ignore", "-q", "out/quickstart_mamba/figures/mamba_quickstart.png"],
        cwd=ROOT,
        check=False,
    )
    assert probe.returncode == 0, "out/ must be listed in .gitignore"
