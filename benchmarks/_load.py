"""Import a module of ``benchmarks/`` from a script, however the script was started.

``python -m benchmarks.<package>.<script>`` from the repository root imports
``benchmarks.<module>`` by name. ``python benchmarks/<package>/<script>.py`` puts the
script's own folder, not the repository root, on ``sys.path``: the module is then loaded
from its file, under a private name, once per process.

A script finds this module the same way, without editing ``sys.path``::

    try:
        from benchmarks._load import load
    except ImportError:  # run by path: load this file by its path
        _spec = importlib.util.spec_from_file_location(
            "_benchmarks__load", Path(__file__).resolve().parents[1] / "_load.py"
        )
        _loader = importlib.util.module_from_spec(_spec)
        _spec.loader.exec_module(_loader)
        load = _loader.load
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["load"]

HERE = Path(__file__).resolve().parent


def load(module: str) -> ModuleType:
    """``benchmarks.<module>`` (dotted, e.g. ``"posteriordb.models"``), by name or by path.

    Raises:
      ValueError: ``module`` names no file under ``benchmarks/``.
    """
    try:
        return importlib.import_module(f"benchmarks.{module}")
    except ImportError:
        pass
    path = HERE.joinpath(*module.split(".")).with_suffix(".py")
    if not path.is_file():
        raise ValueError(f"`module`: no benchmarks/{module.replace('.', '/')}.py")
    name = "_benchmarks_" + module.replace(".", "_")
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod
