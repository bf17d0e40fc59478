"""What a new sampler has to touch (``docs/contributing.md``, "Adding a sampler").

The command line's ``--kernel`` lookup, the gradient-noise diagnostic and the package's
exports read the kernel classes themselves: a kernel's ``cli_name``, its
``gradient_noise_coefficient``, its registration by ``SGMCMCKernel.__init_subclass__``
and ``tfp_sgmcmc.kernels.__all__``. A trivial kernel defined here is found by all three
with no other change, and a trivial kernel added to a copy of the package changes two of
its files (the kernel's module and one export line); with its row in
``tests/kernels/_models.py`` and its docs page that is four files.
"""

from __future__ import annotations

import ast
import collections
import filecmp
import gc
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from tfp_sgmcmc import cli
from tfp_sgmcmc.diagnostics import gradient_noise_ratio
from tfp_sgmcmc.integrators import langevin_step
from tfp_sgmcmc.kernels.base import SGMCMCKernel, registered_kernels
from tfp_sgmcmc.kernels.tfp_wrappers import SGMCMCResultsMixin, sgmcmc_results_fields

ROOT = Path(__file__).resolve().parents[1]

# The whole of a trivial sampler: plain SGLD written against the base class only. The same
# source is the kernel's module in the copied package of the footprint test.
TRIVIAL_KERNEL = '''
import collections

from tfp_sgmcmc.integrators import langevin_step
from tfp_sgmcmc.kernels.base import SGMCMCKernel
from tfp_sgmcmc.kernels.tfp_wrappers import SGMCMCResultsMixin, sgmcmc_results_fields

__all__ = ["TrivialLangevin", "TrivialLangevinKernelResults"]


class TrivialLangevinKernelResults(
    SGMCMCResultsMixin,
    collections.namedtuple("TrivialLangevinKernelResults", sgmcmc_results_fields()),
):
    __slots__ = ()


class TrivialLangevin(SGMCMCKernel):
    """Plain SGLD, for counting what a new sampler touches."""

    _results_type = TrivialLangevinKernelResults
    _default_name = "trivial_langevin"
    cli_name = "trivial"

    def gradient_noise_coefficient(self, step_size, temperature):
        return step_size / (2.0 * temperature), True

    def _transition(self, parts, like, prev, step_size, seed):
        noise_seed, est_seed = self._split(seed, 2, "trivial.one_step")
        noise = self._normals(parts, noise_seed, "trivial.noise")
        temp = self._temperature(parts[0].dtype, prev.step)
        new = [
            langevin_step(p, g, step_size, temp, xi, None)
            for p, g, xi in zip(parts, prev.grads_target_log_prob, noise)
        ]
        est, est_state = self._estimate(new, like, prev.estimator_state, est_seed)
        return new, est, est_state, {}
'''


@pytest.fixture
def trivial_kernel():
    """The trivial kernel, defined in this process (and dropped from the registry after)."""
    namespace: dict = {
        "collections": collections,
        "langevin_step": langevin_step,
        "SGMCMCKernel": SGMCMCKernel,
        "SGMCMCResultsMixin": SGMCMCResultsMixin,
        "sgmcmc_results_fields": sgmcmc_results_fields,
    }
    exec(compile(TRIVIAL_KERNEL, "<trivial kernel>", "exec"), namespace)
    yield namespace["TrivialLangevin"]
    namespace.clear()
    gc.collect()


def _estimator(n=2000, d=3, batch_size=50):
    x = np.random.default_rng(0).normal(1.0, 1.0, size=(n, d)).astype("float32")

    def log_likelihood(theta, batch):
        return -0.5 * tf.reduce_sum((tf.expand_dims(theta, -2) - batch) ** 2, -1)

    return sg.MinibatchEstimator(
        log_likelihood, x, batch_size, log_prior_fn=lambda t: -0.5 * tf.reduce_sum(t**2, -1)
    )


def test_a_kernel_defined_outside_the_package_is_found_by_the_cli(trivial_kernel):
    assert registered_kernels()["TrivialLangevin"] is trivial_kernel
    assert cli.KERNELS["trivial"] == "TrivialLangevin"
    assert list(cli.KERNELS)[-1] == "trivial"  # after the package's own, in their order
    for name in ("trivial", "TRIVIAL", "TrivialLangevin"):
        cli._check_kernel_name(name)
        assert cli._kernel_class(name) is trivial_kernel
    # A subclass does not inherit the short name: pSGLD is not `sgld`.
    assert sg.PSGLD.cli_name == "psgld" and sg.MSGLD.cli_name is None


def test_a_dropped_kernel_leaves_the_registry(trivial_kernel):
    """The registry holds its classes weakly: a kernel defined for a while (here, by the
    fixture of another test) does not stay listed."""
    assert "TrivialLangevin" in registered_kernels()
    namespace = {"SGMCMCKernel": SGMCMCKernel}
    exec("class ShortLived(SGMCMCKernel):\n    cli_name = 'short'\n", namespace)
    assert "short" in cli.KERNELS
    namespace.clear()
    gc.collect()
    assert "ShortLived" not in registered_kernels() and "short" not in cli.KERNELS


def test_the_gradient_noise_diagnostic_asks_the_kernel(trivial_kernel):
    est, state = _estimator(), tf.zeros([3])
    ours = gradient_noise_ratio(trivial_kernel(est, 1e-4), state, seed=1)
    sgld = gradient_noise_ratio(sg.SGLD(est, 1e-4), state, seed=1)
    assert ours is not None and ours.kernel == "TrivialLangevin" and ours.flagged
    np.testing.assert_allclose(ours.ratio[0], sgld.ratio[0], rtol=1e-12)
    # The temperature comes from the kernel's own schedule.
    hot = gradient_noise_ratio(trivial_kernel(est, 1e-4, temperature=2.0), state, seed=1)
    np.testing.assert_allclose(hot.ratio[0], sgld.ratio[0] / 2.0, rtol=1e-12)
    # A kernel that does not say (the base class's default) gets no ratio.
    namespace = {"SGMCMCKernel": SGMCMCKernel, "base": trivial_kernel}
    exec("class _Silent(base):\n    gradient_noise_coefficient = SGMCMCKernel."
         "gradient_noise_coefficient\n", namespace)
    assert gradient_noise_ratio(namespace["_Silent"](est, 1e-4), state) is None


def test_the_trivial_kernel_samples(trivial_kernel):
    """It is a working sampler, not a stub: its steps match SGLD's update rule."""
    est = _estimator()
    kernel = trivial_kernel(est, 1e-3)
    state = tf.zeros([3])
    results = kernel.bootstrap_results(state)
    new, results = kernel.one_step(state, results, seed=tf.constant([0, 7]))
    assert new.shape == [3] and int(results.step) == 1 and not bool(results.diverged)


# --------------------------------------------------------------------------- #
# The exports: derived, one table
# --------------------------------------------------------------------------- #
def test_package_exports_every_sampler_the_kernels_export():
    from tfp_sgmcmc import kernels

    samplers = {n for n in kernels.__all__ if isinstance(getattr(kernels, n), type)
                and issubclass(getattr(kernels, n), SGMCMCKernel)} - {"SGMCMCKernel"}
    assert samplers <= set(sg.__all__)
    for name in samplers:
        assert getattr(sg, name) is getattr(kernels, name)
    assert {"CSGLD", "RESGLD", "sample_chain"} <= set(sg.__all__)
    assert len(sg.__all__) == len(set(sg.__all__))


def test_type_checking_imports_mirror_the_export_table():
    """The imports static analysers read (under TYPE_CHECKING) name exactly the table's
    modules and names; the samplers come by one star import of ``tfp_sgmcmc.kernels``."""
    tree = ast.parse((ROOT / "tfp_sgmcmc" / "__init__.py").read_text(encoding="utf-8"))
    block = next(n for n in tree.body if isinstance(n, ast.If)
                 and getattr(n.test, "id", None) == "TYPE_CHECKING")
    imported: dict[str, str] = {}
    star = []
    for node in block.body:
        assert isinstance(node, ast.ImportFrom), ast.dump(node)
        for alias in node.names:
            if alias.name == "*":
                star.append(node.module)
            elif node.module == "tfp_sgmcmc":
                imported[alias.name] = "submodule"
            else:
                imported[alias.name] = node.module
    assert star == ["tfp_sgmcmc.kernels"]
    table = {n: m for n, m in sg._EXPORTS.items() if m != "tfp_sgmcmc.kernels"}
    table.update(dict.fromkeys(sg._SUBMODULES, "submodule"))
    assert imported == table


# --------------------------------------------------------------------------- #
# The footprint: a kernel added to a copy of the package
# --------------------------------------------------------------------------- #
CHILD = textwrap.dedent(
    """
    import contextlib, io, json, re, sys
    import tfp_sgmcmc as sg
    from tfp_sgmcmc import cli
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown), contextlib.suppress(SystemExit):
        cli.build_parser().parse_args(["sample", "--help"])
    out = {
        "file": sg.__file__,
        "exported": "TrivialLangevin" in sg.__all__,
        "cli_before_import": dict(cli.KERNELS).get("trivial"),
        "help": re.search(r"one of [a-z, ]*\\btrivial\\b", " ".join(shown.getvalue().split()))
        is not None,
        "tensorflow": "tensorflow" in sys.modules,
    }
    import tensorflow as tf
    from tfp_sgmcmc.diagnostics import gradient_noise_ratio
    out["same_class"] = sg.TrivialLangevin is sg.kernels.TrivialLangevin
    out["cli_class"] = cli._kernel_class("trivial").__name__
    est = sg.NoisyGradientEstimator(lambda x: -0.5 * tf.reduce_sum(x**2, -1), 1.0)
    report = gradient_noise_ratio(sg.TrivialLangevin(est, 1e-2), tf.zeros([2]), seed=1)
    out["noise_kernel"] = None if report is None else report.kernel
    print(json.dumps(out))
    """
)


@pytest.mark.subprocess
def test_a_new_kernel_touches_two_package_files(tmp_path):
    package = tmp_path / "tfp_sgmcmc"
    shutil.copytree(ROOT / "tfp_sgmcmc", package,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    # 1. Its module.
    (package / "kernels" / "trivial.py").write_text(TRIVIAL_KERNEL, encoding="utf-8")
    # 2. One export line: the import, and the name in the literal __all__.
    init = package / "kernels" / "__init__.py"
    text = init.read_text(encoding="utf-8")
    assert text.count("\n__all__ = [\n") == 1
    text = text.replace(
        "\n__all__ = [\n",
        "\nfrom tfp_sgmcmc.kernels.trivial import TrivialLangevin  # noqa: E402\n"
        "\n__all__ = [\n    \"TrivialLangevin\",\n",
    )
    init.write_text(text, encoding="utf-8")

    changed = _changed_files(ROOT / "tfp_sgmcmc", package)
    assert changed == ["kernels/__init__.py", "kernels/trivial.py"]
    # With its row in tests/kernels/_models.py and its docs page: four files in all.
    assert len(changed) + 2 <= 4

    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", CHILD], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(out.pop("file")).parent == package
    assert out == {
        "exported": True,
        "cli_before_import": "TrivialLangevin",  # read from the source, no TensorFlow
        "help": True,
        "tensorflow": False,
        "same_class": True,
        "cli_class": "TrivialLangevin",
        "noise_kernel": "TrivialLangevin",
    }


def _changed_files(original: Path, copy: Path) -> list[str]:
    """Files of ``copy`` that are new or differ from ``original`` (relative paths)."""
    out = []
    for path in sorted(copy.rglob("*.py")):
        rel = path.relative_to(copy)
        old = original / rel
        if not old.exists() or not filecmp.cmp(old, path, shallow=False):
            out.append(rel.as_posix())
    return out
