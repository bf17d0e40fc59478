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
    for full in (
        "StochasticGradientLangevinDynamics",
        "StochasticGradientHamiltonianMonteCarlo",
        "ContourSGLD",
        "MomentumSGLD",
        "AdamSGLD",
    ):
        assert not hasattr(sg, full) and not hasattr(kernels, full), full


def test_both_namespaces_export_every_sampler_under_every_name():
    top = set(_samplers(sg))
    sub = {n for n in _samplers(kernels) if n != "SGMCMCKernel"}
    assert top == sub


def _kernel_modules():
    import pkgutil

    return [importlib.import_module(f"tfp_sgmcmc.kernels.{m.name}")
            for m in pkgutil.iter_modules(kernels.__path__)]


def test_results_types_are_named_after_their_kernel():
    # <name of the kernel that defines them>KernelResults, the name being one the kernel is
    # exported under (its acronym or its class name); each lives in its kernel's module
    # (in `__all__` there), not in the `tfp_sgmcmc.kernels` namespace, as in `tfp.mcmc`.
    results = {}
    for module in _kernel_modules():
        for n in getattr(module, "__all__", ()):
            if n.endswith("Results"):
                results[n] = module
    assert {"SGLDKernelResults", "SGHMCKernelResults", "SGNHTKernelResults"} <= set(results)
    for name, module in results.items():
        assert name.endswith("KernelResults") and getattr(module, name).__name__ == name
        assert name[: -len("KernelResults")] in kernels.__all__, name
        assert name not in kernels.__all__ and not hasattr(kernels, name), name


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
    assert type(results).__name__ == results_name
    assert results_name in sys.modules[type(results).__module__].__all__


def test_no_deprecated_names_before_a_first_release():
    assert not hasattr(kernels, "LangevinKernelResults")
    sys.modules.pop("tfp_sgmcmc.tuning.keras", None)
    with pytest.raises(ImportError):
        importlib.import_module("tfp_sgmcmc.tuning.keras")
    with pytest.raises(AttributeError):
        kernels.NoSuchName  # noqa: B018


def _public_namespaces():
    return [sg] + [importlib.import_module(f"tfp_sgmcmc.{m}") for m in sg._SUBMODULES]


def test_mamba_has_one_entry_point():
    # MAMBA(...).run() only: no function form, no Ray-specific class or function.
    from tfp_sgmcmc import tuning
    from tfp_sgmcmc.internal import util
    from tfp_sgmcmc.tuning import mamba, ray_backend

    assert sg.MAMBA is tuning.MAMBA is mamba.MAMBA
    for ns in (*_public_namespaces(), mamba, ray_backend):
        for old in ("mamba", "RayMAMBA", "ray_mamba"):
            # (`tfp_sgmcmc.tuning.mamba` is the module that defines MAMBA.)
            found = getattr(ns, old, None)
            assert found is None or inspect.ismodule(found), (ns.__name__, old)
            assert old not in getattr(ns, "__all__", ()), (ns.__name__, old)
    names = {n for ns in _public_namespaces() for n in ns.__all__ if "mamba" in n.lower()}
    assert names == {"MAMBA"}
    assert not hasattr(util, "deprecated_aliases")


def test_no_two_public_names_for_one_object():
    for ns in _public_namespaces():
        seen: dict[int, str] = {}
        for name in ns.__all__:
            obj = getattr(ns, name)
            if isinstance(obj, (int, float, str, bool, tuple, frozenset)):
                continue  # constants may share a value
            assert id(obj) not in seen, (ns.__name__, seen.get(id(obj)), name)
            seen[id(obj)] = name


def test_a_wrong_kernel_argument_is_a_value_error_naming_it():
    import tensorflow as tf

    from tfp_sgmcmc import tuning

    est = sg.NoisyGradientEstimator(lambda x: -0.5 * tf.reduce_sum(x**2, -1), 0.1)
    arms, x0 = tuning.grid(step_size=[0.1, 0.2, 0.3]), tf.zeros([2])
    wrong = {
        sg.SGLD: r"`kernel` .*the class SGLD.*tuning\.KernelSpec\(SGLD, estimator",
        est: r"`kernel` .*an estimator.*tuning\.KernelSpec\(sg\.SGLD, estimator",
        sg.SGLD(est, 0.1): r"`kernel` .*a kernel instance",
        "sgld": r"`kernel` .*got str",
    }
    for bad, message in wrong.items():
        with pytest.raises(ValueError, match=message):
            tuning.MAMBA(arms, x0, bad)
        with pytest.raises(ValueError, match=message):
            tuning.grid_search(arms, x0, bad)
        with pytest.raises(ValueError, match=message):
            tuning.heuristic(100, x0, bad)
    # The options are keyword-only and grouped: the former flat arguments are gone.
    with pytest.raises(TypeError):
        tuning.MAMBA(arms, x0, tuning.KernelSpec(sg.SGLD, est), thin=5)
    with pytest.raises(ValueError, match="`thin` must be an int >= 1"):
        tuning.ArmSampling(thin=0)
