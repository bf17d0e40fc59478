"""Command-line conventions shared by every example; import it before TensorFlow.

Importing this module imports TensorFlow without its C++ start-up notices (see
``tfp_sgmcmc/_startup.py``), so an example's first output line is its own.

Every example takes the same three options (:func:`parser`):

* ``--out DIR``: where the example writes (default ``out/<example>/`` under the current
  directory, which ``.gitignore`` ignores). ``DIR`` has the layout of ``docs/``: figures in
  ``DIR/figures/``, the markdown study in ``DIR/studies/`` (its image links are relative, so
  they work in both places), long-run directories in ``DIR/runs/``.
* ``--write-docs``: regenerate the committed study and figures, i.e. ``--out`` set to this
  repository's ``docs/``.
* ``--quick``: a smoke-sized run (seconds to a minute) with the same outputs, each named
  ``*_quick`` (``x.png`` becomes ``x_quick.png``), so a smoke run never replaces
  a full run's results, wherever it writes.

Nothing is written anywhere else.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import warnings
from collections.abc import Callable
from typing import Any

from tfp_sgmcmc import _startup

# Before the example imports TensorFlow: its C++ start-up notices are hidden.
_startup.import_tensorflow()

# SG kernels are uncalibrated by design (no Metropolis step); TFP's sample_chain warns about
# it on every call.
warnings.filterwarnings("ignore", message="supplied `TransitionKernel` is not calibrated")

__all__ = [
    "DOCS",
    "commit",
    "cpu_name",
    "Outputs",
    "provenance",
    "command_line",
    "outputs",
    "parser",
    "positive_float",
    "positive_int",
]

#: The repository's ``docs/`` folder (what ``--write-docs`` writes into).
DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs")


def parser(
    name: str, description: str, quick_help: str = "smoke-sized run (about a minute at most)"
) -> argparse.ArgumentParser:
    """An ``ArgumentParser`` with the shared ``--quick``, ``--out`` and ``--write-docs``.

    Args:
      name: the example's name; the default output folder is ``out/<name>``.
      description: the ``--help`` description (usually the docstring's first line).
      quick_help: what ``--quick`` does for this example.
    """
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--quick", action="store_true", help=quick_help)
    where = ap.add_mutually_exclusive_group()
    where.add_argument(
        "--out",
        metavar="DIR",
        default=os.path.join("out", name),
        help="output folder (figures/, studies/, runs/ inside); default: %(default)s",
    )
    where.add_argument(
        "--write-docs",
        action="store_true",
        help="regenerate the committed study and figures in the repository's docs/",
    )
    return ap


def _positive(text: str, convert: Callable[[str], Any], expected: str) -> Any:
    """``convert(text)`` if it is finite and above zero; else argparse's usage error."""
    try:
        value = convert(text)
    except ValueError:
        value = None
    if value is None or not (0 < value < float("inf")):
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An argparse ``type=`` for an int ``>= 1`` (a usage error, exit code 2, otherwise)."""
    return _positive(text, int, "an int >= 1")


def positive_float(text: str) -> float:
    """An argparse ``type=`` for a finite float ``> 0`` (a usage error otherwise)."""
    return _positive(text, float, "a finite number > 0")


class Outputs:
    """Paths of one run's outputs under ``root`` (folders created on first use).

    With ``quick=True`` every file name gets ``_quick`` before its extension (:meth:`name`).
    """

    def __init__(self, root: str, quick: bool = False) -> None:
        self.root = root
        self.quick = quick

    def name(self, filename: str) -> str:
        """``filename`` as this run names it (``x_quick.png`` for ``x.png`` in quick mode);
        a study links its figure as ``../figures/<name(...)>``."""
        if not self.quick:
            return filename
        stem, ext = os.path.splitext(filename)
        return f"{stem}_quick{ext}"

    def _path(self, sub: str, filename: str) -> str:
        folder = os.path.join(self.root, sub)
        os.makedirs(folder, exist_ok=True)
        return os.path.join(folder, self.name(filename))

    def figure(self, filename: str) -> str:
        """``<root>/figures/<name(filename)>``."""
        return self._path("figures", filename)

    def study(self, filename: str) -> str:
        """``<root>/studies/<name(filename)>``; a bare name gets the ``.md`` extension."""
        if not os.path.splitext(filename)[1]:
            filename += ".md"
        return self._path("studies", filename)

    def run_dir(self, name: str) -> str:
        """``<root>/runs/<name(name)>`` (a folder for a long run's files)."""
        return self._path("runs", name)

    def write_study(self, filename: str, text: str) -> str:
        """Writes ``text`` to :meth:`study` ``(filename)``; returns the path."""
        path = self.study(filename)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text.rstrip() + "\n")
        return path


def outputs(args: argparse.Namespace) -> Outputs:
    """The :class:`Outputs` named by ``--out`` or ``--write-docs`` (and ``--quick``)."""
    return Outputs(DOCS if args.write_docs else args.out, quick=args.quick)


def command_line() -> str:
    """The command that reproduces this run, as a study page quotes it."""
    args = " ".join(sys.argv[1:])
    return f"python examples/{os.path.basename(sys.argv[0])}" + (f" {args}" if args else "")


def commit() -> str:
    """The checkout's short commit, marked when the library or the examples differ from it
    (``"unknown"`` outside a git checkout): the provenance line of a study page."""
    root = os.path.dirname(DOCS)
    try:
        sha = subprocess.run(
            ["git", "-C", root, "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        dirty = subprocess.run(
            ["git", "-C", root, "status", "--porcelain", "--", "examples", "tfp_sgmcmc"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return sha + (" (with uncommitted changes)" if dirty else "")


def cpu_name() -> str:
    """The processor's model name (Linux's ``/proc/cpuinfo``, else ``platform``'s)."""
    import platform

    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def provenance() -> str:
    """One line a study page opens with: the command, commit, versions and machine of
    this run, and the machine's load when it ended (so a reader can tell a loaded run)."""
    import platform

    import keras
    import numpy as np
    import tensorflow as tf
    import tensorflow_probability as tfp

    cpu = cpu_name()
    try:
        load = f"; 1-minute load average {os.getloadavg()[0]:.1f} at the end"
    except OSError:
        load = ""
    gpus = len(tf.config.list_physical_devices("GPU"))
    device = f"{gpus} GPU(s)" if gpus else "CPU only"
    return (
        f"This run: `{command_line()}`, commit `{commit()}`; Python {platform.python_version()}, "
        f"TensorFlow {tf.__version__}, TFP {tfp.__version__}, Keras {keras.__version__}, "
        f"NumPy {np.__version__}; {os.cpu_count()} × {cpu}, {platform.system()}, {device}"
        f"{load}."
    )
