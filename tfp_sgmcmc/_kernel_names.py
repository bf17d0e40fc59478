"""The names ``tfp_sgmcmc.kernels`` exports, read from its source without importing it.

Importing ``tfp_sgmcmc.kernels`` imports TensorFlow. The package's top level (which
exports every sampler as ``sg.<Name>``) and the command line's ``--help`` and checks
need only the names, so they read them from the source with ``ast``. The package imports
this module on every ``import tfp_sgmcmc``: it imports nothing but the standard library.
"""

from __future__ import annotations

import ast
import os

__all__ = ["kernels_all"]


def kernels_all() -> list[str] | None:
    """``tfp_sgmcmc.kernels.__all__``, read from the source without importing it: its
    literal list, plus the literal ``__all__`` of every module it adds with
    ``__all__ += module.__all__``.

    Returns:
      The names in the order the module lists them, or ``None`` if the source cannot
      be read (no file, or a syntax error); the caller then imports the module.
    """
    folder = os.path.join(os.path.dirname(__file__), "kernels")

    def read(file: str) -> list[str]:
        with open(os.path.join(folder, file), encoding="utf-8") as f:
            tree = ast.parse(f.read())
        names: list[str] = []
        for node in tree.body:  # `__all__ = [...]`, `__all__ += [...]`, `+= module.__all__`
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, value = node.targets[0], node.value
            elif isinstance(node, ast.AugAssign):
                target, value = node.target, node.value
            else:
                continue
            if not (isinstance(target, ast.Name) and target.id == "__all__"):
                continue
            if isinstance(value, (ast.List, ast.Tuple)):
                names += [
                    e.value
                    for e in value.elts
                    if isinstance(e, ast.Constant) and isinstance(e.value, str)
                ]
            elif (
                isinstance(value, ast.Attribute)
                and value.attr == "__all__"
                and isinstance(value.value, ast.Name)
            ):
                names += read(f"{value.value.id}.py")
        return names

    try:
        return read("__init__.py") or None
    except (OSError, SyntaxError):
        return None
