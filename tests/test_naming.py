"""The naming policy of the public API (``docs/conventions.md``, "Names")."""

from __future__ import annotations

import importlib
import inspect
import sys

import pytest

import tfp_sgmcmc as sg
from tfp_sgmcmc import kernels

#: One name per sampler: its paper's acronym where the literature has one.
ACRONYMS = ("SGLD", "PSGLD", "SGHMC", "SGNHT", "MSGLD", "ASGLD", "CSGLD", "RESGLD")


def _samplers(namespace) -> dict[str, type]:
    out = {}
    for name in namespace.__all__:
        obj = getattr(namespace, name)
        if inspect.isclass(obj) and issubclass(obj, sg.kernels.SGMCMCKernel):
            out[name] = obj
    out.update(
        {
            n: getattr(namespace, n)
            for n in namespace.__all__
            if getattr(namespace, n) is kernels.StochasticApproximation
        }
    )
    return out


def test_samplers_are_classes_under_their_acronyms():
    for short in ACRONYMS:
        for ns in (sg, kernels):
            assert getattr(ns, short).__name__ == short, (ns.__name__, short)


def test_one_name_per_sampler():
    # Every exported sampler name is the class's own name: no aliases.
    for ns in (sg, kernels):
        samplers = _samplers(ns)
        for name, cls in samplers.items():
            assert name == cls.__name__, (ns, name)
        assert len({id(c) for c in samplers.values()}) == len(samplers), ns
    for full in ("StochasticGradientLangevinDynamics", "StochasticGradientHamiltonianMonteCarlo",
                 "ContourSGLD", "MomentumSGLD", "AdamSGLD"):
        assert not hasattr(sg, full) and not hasattr(kernels, full), full


def test_both_namespaces_export_every_sampler_under_every_name():
    top = set(_samplers(sg))
    sub = {n for n in _samplers(kernels) if n != "SGMCMCKernel"}
    assert top == sub


def test_results_types_are_named_after_their_kernel():
    # <name of the kernel that defines them>KernelResults, the name being one the kernel is
    # exported under (its acronym or its class name).
    results = {n for n in kernels.__all__ if n.endswith("Results")}
    assert {"SGLDKernelResults", "SGHMCKernelResults", "SGNHTKernelResults"} <= results
    for name in results:
        assert name.endswith("KernelResults") and getattr(kernels, name).__name__ == name
        assert name[: -len("KernelResults")] in kernels.__all__, name


@pytest.mark.parametrize(
    "kernel_name, results_name",
    [
        ("SGLD", "SGLDKernelResults"),
        ("PSGLD", "SGLDKernelResults"),
        ("MSGLD", "SGLDKernelResults"),
        ("SGHMC", "SGHMCKernelResults"),
        ("SGNHT", "SGNHTKernelResults"),
    ],
)
def test_each_kernel_returns_its_results_type(kernel_name, results_name):
    import tensorflow as tf

    est = sg.NoisyGradientEstimator(lambda x: -0.5 * tf.reduce_sum(x**2, -1), 0.1)
    kernel = getattr(sg, kernel_name)(est, 0.01)
    results = kernel.bootstrap_results(tf.zeros([2]))
    assert type(results) is getattr(kernels, results_name)


def test_no_deprecated_names_before_a_first_release():
    assert not hasattr(kernels, "LangevinKernelResults")
    sys.modules.pop("tfp_sgmcmc.tuning.keras", None)
    with pytest.raises(ImportError):
        importlib.import_module("tfp_sgmcmc.tuning.keras")
    with pytest.raises(AttributeError):
        kernels.NoSuchName  # noqa: B018
