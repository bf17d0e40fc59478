"""Modules of ``benchmarks/`` for the tests, loaded by file path.

``benchmarks/`` is not a package on ``sys.path`` under every way of starting pytest, so a
test loads the file itself, once per session under a fixed module name (the tests that
share a module share its name, hence one copy of it).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["ROOT", "load_file"]

ROOT = Path(__file__).resolve().parents[1]


def load_file(name: str, relative_path: str) -> ModuleType:
    """The module at ``ROOT / relative_path``, imported once as ``name``."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / relative_path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]
