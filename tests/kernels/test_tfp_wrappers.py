"""SG kernels inside TFP's kernel wrappers: each works, or raises a clear error.

| wrapper                               | answer                                   |
|---------------------------------------|------------------------------------------|
| TransformedTransitionKernel (ours)    | works (tests/estimators/test_transformed.py) |
| tfp.mcmc.TransformedTransitionKernel  | TFP's ValueError (no target_log_prob_fn)  |
| ThinningKernel                        | works                                    |
| sample_fold + reducers                | works                                    |
| Simple/DualAveraging step adaptation  | UncalibratedKernelError naming MAMBA     |
| MetropolisHastings                    | UncalibratedKernelError naming MALA/NUTS |
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from tfp_sgmcmc.estimators import MinibatchEstimator
from tfp_sgmcmc.kernels import UncalibratedKernelError

tfd = tfp.distributions
tfb = tfp.bijectors


def _estimator(batch_size: int = 10) -> MinibatchEstimator:
    y = np.random.default_rng(1).normal(1.0, 1.0, size=100)

    def loglik(mu, batch):
        return tfd.Normal(mu[..., None], tf.constant(1.0, tf.float64)).log_prob(batch)

    return MinibatchEstimator(
        loglik, y, batch_size, log_prior_fn=tfd.Normal(tf.constant(0.0, tf.float64), 10.0).log_prob
    )


X0 = tf.zeros([2], tf.float64)
KERNELS = {
    "sgld": lambda: sg.SGLD(_estimator(), 1e-3),
    "sghmc": lambda: sg.SGHMC(_estimator(), 1e-3),
    "sgnht": lambda: sg.SGNHT(_estimator(), 1e-3),
}
#: Refusal is checked on every kernel family (the error is raised at trace time).
REFUSING = {
    **KERNELS,
    "baoab": lambda: sg.BAOAB(_estimator(), 1e-3),
    "badodab": lambda: sg.BADODAB(_estimator(), 1e-3),
}


@pytest.mark.parametrize("name", list(KERNELS))
def test_thinning_kernel(name):
    kernel = KERNELS[name]()
    thinned = tfp.experimental.mcmc.ThinningKernel(kernel, num_steps_to_skip=2)
    states, steps = tf.function(
        lambda: tfp.mcmc.sample_chain(
            4, X0, kernel=thinned, trace_fn=lambda _, r: r.step, seed=(3, 4)
        )
    )()
    # Each kept draw is 3 steps of the SG chain, and our results pass through intact.
    np.testing.assert_array_equal(steps.numpy(), [3, 6, 9, 12])
    assert states.shape == (4, 2) and np.all(np.isfinite(states.numpy()))
    # The same chain as stepping the kernel itself with TFP's seed stream.
    x, r = X0, kernel.bootstrap_results(X0)
    x3, _ = tfp.experimental.mcmc.step_kernel(
        3, x, r, kernel=kernel, return_final_kernel_results=True, seed=(9, 9)
    )
    y3, _ = thinned.one_step(x, thinned.bootstrap_results(X0), seed=(9, 9))
    np.testing.assert_array_equal(x3.numpy(), y3.numpy())


def test_sample_fold_with_reducers_and_thinning():
    kernel = sg.SGLD(_estimator(), 1e-3)
    est = _estimator()
    reducers = [
        tfp.experimental.mcmc.ExpectationsReducer(),
        sg.KSDReducer(score_fn=est.score_fn()),
    ]
    fold = tf.function(
        lambda: tfp.experimental.mcmc.sample_fold(
            num_steps=30,
            current_state=X0 + 1.0,
            kernel=tfp.experimental.mcmc.ThinningKernel(kernel, num_steps_to_skip=1),
            reducer=reducers,
            seed=(5, 6),
        )
    )
    (mean, ksd), final_state, _ = fold()
    assert mean.shape == (2,) and np.all(np.abs(mean.numpy() - 1.0) < 0.5)
    assert np.all(np.isfinite(np.asarray(ksd)))
    assert final_state.shape == (2,)


@pytest.mark.parametrize(
    "wrapper",
    [
        lambda k: tfp.mcmc.SimpleStepSizeAdaptation(k, num_adaptation_steps=10),
        lambda k: tfp.mcmc.DualAveragingStepSizeAdaptation(k, num_adaptation_steps=10),
    ],
    ids=["simple", "dual_averaging"],
)
@pytest.mark.parametrize("name", list(REFUSING))
def test_step_size_adaptation_refuses_with_the_alternatives(wrapper, name):
    kernel = wrapper(REFUSING[name]())
    with pytest.raises(UncalibratedKernelError, match="MAMBA") as info:
        tfp.mcmc.sample_chain(3, X0, kernel=kernel, trace_fn=None, seed=(1, 2))
    assert "schedule" in str(info.value)


@pytest.mark.parametrize("jit", [False, True], ids=["graph", "xla"])
def test_refusal_keeps_its_type_inside_tf_function(jit):
    """AutoGraph turned the error into a StagingError, which ``except
    UncalibratedKernelError`` missed."""
    name = next(iter(REFUSING))
    for kernel in (tfp.mcmc.SimpleStepSizeAdaptation(REFUSING[name](), num_adaptation_steps=10),
                   tfp.mcmc.MetropolisHastings(REFUSING[name]())):
        run = tf.function(
            lambda k=kernel: tfp.mcmc.sample_chain(3, X0, kernel=k, trace_fn=None, seed=(1, 2)),
            jit_compile=jit,
        )
        with pytest.raises(UncalibratedKernelError):
            run()


@pytest.mark.parametrize("name", list(REFUSING))
def test_metropolis_hastings_refuses(name):
    kernel = tfp.mcmc.MetropolisHastings(REFUSING[name]())
    with pytest.raises(UncalibratedKernelError, match="MetropolisAdjustedLangevinAlgorithm"):
        tfp.mcmc.sample_chain(3, X0, kernel=kernel, trace_fn=None, seed=(1, 2))


def test_metropolis_hastings_refuses_inside_the_transformed_kernel():
    kernel = tfp.mcmc.MetropolisHastings(sg.SGLD(_estimator(), 1e-3))
    with pytest.raises(UncalibratedKernelError, match="MetropolisHastings"):
        tfp.mcmc.sample_chain(
            2,
            X0 + 1.0,
            kernel=sg.TransformedTransitionKernel(kernel, tfb.Exp()),
            trace_fn=None,
            seed=(1, 2),
        )


def test_tfp_transformed_kernel_points_to_ours():
    # TFP's own class searches for a target_log_prob_fn; ours is the drop-in.
    with pytest.raises(ValueError, match="target_log_prob_fn"):
        tfp.mcmc.TransformedTransitionKernel(sg.SGLD(_estimator(), 1e-3), tfb.Exp())
    assert issubclass(sg.TransformedTransitionKernel, tfp.mcmc.TransformedTransitionKernel)


def test_results_fields_and_probing_are_unchanged():
    results = sg.SGLD(_estimator(), 1e-3).bootstrap_results(X0)
    assert "log_accept_ratio" not in results._fields
    # Everything that walks the results structurally (tf.nest, _replace) is unaffected.
    assert len(tf.nest.flatten(results)) > 0
    assert results._replace(step=tf.constant(3)).step == 3
