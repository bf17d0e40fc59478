"""Every sampler in the library moves: a chain whose samples stay constant fails.

(SGMCMCJax's BAOAB and BADODAB once returned constant samples for any step
size because of a tuple-unpacking slip.) Every ``TransitionKernel`` class
exported by :mod:`tfp_sgmcmc.kernels` must have a builder below, so a new
sampler cannot be added without this check. Each runs 8 steps from the same
start with two step sizes: every coordinate of every chain must change at every
step, and the two step sizes must give different chains (the step size is used).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg

from ._models import LinearGaussianModel


def _ssgl_sa(eps):
    model = LinearGaussianModel()
    prior = sg.priors.SpikeAndSlabGroupLasso(v0=0.1, v1=10.0, b=None)
    est = sg.priors.SSGLEstimator(
        prior,
        (model.x, model.y),
        batch_size=8,
        residual_fn=lambda b, d: d[1] - tf.einsum("nd,...d->...n", d[0], b),
    )
    return sg.StochasticApproximation(sg.SGLD(est, eps), 0.1)


def _plain(cls, **kw):
    return lambda eps: cls(LinearGaussianModel().minibatch_estimator(), eps, **kw)


BUILDERS = {
    "StochasticGradientLangevinDynamics": _plain(sg.SGLD),
    "PreconditionedStochasticGradientLangevinDynamics": _plain(sg.PSGLD),
    "StochasticGradientHamiltonianMonteCarlo": _plain(sg.SGHMC, num_leapfrog_steps=3),
    "StochasticGradientNoseHooverThermostat": _plain(sg.SGNHT),
    "MomentumSGLD": _plain(sg.kernels.MomentumSGLD),
    "AdamSGLD": _plain(sg.kernels.AdamSGLD),
    "AdaMaxSGLD": _plain(sg.kernels.AdaMaxSGLD),
    "AdadeltaSGLD": _plain(sg.kernels.AdadeltaSGLD),
    "PreconditionedMomentumSGLD": _plain(sg.kernels.PreconditionedMomentumSGLD),
    "PreconditionedAdamSGLD": _plain(sg.kernels.PreconditionedAdamSGLD),
    "StochasticApproximation": _ssgl_sa,
    "BAOAB": _plain(sg.BAOAB),
    "BADODAB": _plain(sg.BADODAB),
    "ContourSGLD": _plain(sg.ContourSGLD, energy_gap=5.0, sa_step_size=0.1),
    "ReplicaExchangeSGLD": _plain(sg.ReplicaExchangeSGLD, num_replicas=3),
    # Estimator wrappers on a moving kernel: SGLD-CV, SGLD-SVRG.
    "SGLD-CV": lambda eps: sg.SGLD(LinearGaussianModel().cv_estimator(), eps),
    "SGLD-SVRG": lambda eps: sg.SGLD(
        sg.SVRGEstimator(LinearGaussianModel().minibatch_estimator(), 3), eps
    ),
}


def _exported_kernels() -> set[str]:
    out = set()
    for name in sg.kernels.__all__:
        obj = getattr(sg.kernels, name)
        if (
            isinstance(obj, type)
            and issubclass(obj, tfp.mcmc.TransitionKernel)
            and obj is not sg.kernels.SGMCMCKernel
        ):
            out.add(obj.__name__)
    return out


def assert_moves(samples: np.ndarray) -> None:
    """Every coordinate of every chain changes at every step (``samples[t]``)."""
    step_change = np.abs(np.diff(samples, axis=0))
    frozen = np.argwhere(step_change == 0)
    assert frozen.size == 0, f"the chain did not move at (step, chain, coord) {frozen[:5]}"


def test_every_exported_sampler_has_a_builder():
    missing = _exported_kernels() - set(BUILDERS)
    assert not missing, f"add a does-it-move builder for {sorted(missing)}"


def test_the_check_fails_a_constant_chain():
    samples = np.cumsum(np.ones([5, 2, 3]), 0)
    assert_moves(samples)
    samples[3, 1] = samples[2, 1]  # one chain frozen for one step
    with pytest.raises(AssertionError, match="did not move"):
        assert_moves(samples)


def _run(kernel, init, seed, num_steps=8):
    """Eager steps (no tracing: the whole file runs in seconds)."""
    state, results = init, kernel.bootstrap_results(init)
    out = [init.numpy()]
    for s in tfp.random.split_seed([seed, 8], n=num_steps, salt="test_moves"):
        state, results = kernel.one_step(state, results, seed=s)
        out.append(state.numpy())
    return np.stack(out)


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_sampler_moves_and_uses_its_step_size(name, seed):
    init = tf.constant([[0.3, -0.2, 0.1], [0.5, 0.4, -0.6]], tf.float64)
    if name == "StochasticApproximation":
        init = init[0]  # the SSGL estimator takes one chain
    small = _run(BUILDERS[name](1e-3), init, seed)
    large = _run(BUILDERS[name](2e-3), init, seed)
    assert np.all(np.isfinite(small)) and np.all(np.isfinite(large))
    assert_moves(small)
    assert_moves(large)
    assert not np.allclose(small[1:], large[1:])
