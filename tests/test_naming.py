"""The naming policy of the public API (``docs/conventions.md``, "Names")."""

from __future__ import annotations

import importlib
import inspect
import sys

import pytest

import tfp_sgmcmc as sg
from tfp_sgmcmc import kernels

ACRONYMS = {
    "SGLD": "StochasticGradientLangevinDynamics",
    "PSGLD": "PreconditionedStochasticGradientLangevinDynamics",
    "SGHMC": "StochasticGradientHamiltonianMonteCarlo",
    "SGNHT": "StochasticGradientNoseHooverThermostat",
    "MSGLD": "MomentumSGLD",
    "ASGLD": "AdamSGLD",
    "CSGLD": "ContourSGLD",
    "RESGLD": "ReplicaExchangeSGLD",
}


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


def test_acronyms_are_aliases_of_the_full_names():
    for short, full in ACRONYMS.items():
        for ns in (sg, kernels):
            assert getattr(ns, short) is getattr(ns, full), (ns.__name__, short)
            assert getattr(ns, full).__name__ == full


def test_no_other_aliases():
    # Every exported sampler name is either a class's own name or one of the acronyms.
    for ns in (sg, kernels):
        for name, cls in _samplers(ns).items():
            assert name == cls.__name__ or ACRONYMS.get(name) == cls.__name__, (ns, name)


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


def test_deprecated_names_warn_and_point_to_the_new_ones():
    from tfp_sgmcmc.kernels import langevin

    for module in (kernels, langevin):
        with pytest.warns(DeprecationWarning, match="SGLDKernelResults"):
            assert module.LangevinKernelResults is kernels.SGLDKernelResults
    sys.modules.pop("tfp_sgmcmc.tuning.keras", None)
    with pytest.warns(DeprecationWarning, match="tfp_sgmcmc.keras"):
        old = importlib.import_module("tfp_sgmcmc.tuning.keras")
    from tfp_sgmcmc.keras import KerasPosterior

    assert old.KerasPosterior is KerasPosterior
    with pytest.raises(AttributeError):
        kernels.NoSuchName  # noqa: B018
