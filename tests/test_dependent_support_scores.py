"""Scores where one parameter's support depends on another's, in graph mode as in eager.

``b ~ Uniform(0, 1 − a)`` has the event-space bijector ``b = (1 − a) σ(z_b)``, so the
constrained part ``b`` handed to the likelihood and the prior is computed from ``a``.
The score of ``log π(a, b)`` is the partial derivative in each part; `tf.gradients`
(TFP's ``value_and_gradient`` default in graph mode) follows the graph from ``a``
through ``b`` as well and returns a total derivative instead. Compiled chains then
sampled another density than the one their log-density reports (on posteriordb's
GARCH(1, 1), ``alpha1``'s mean 0.2–0.3 sd off), while eager calls were right. The
power check is that very path: the same function, differentiated as TFP does by
default inside `tf.function`, misses the finite differences these scores meet.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg

tfd = tfp.distributions


def _posterior() -> sg.JointPosterior:
    prior = tfd.JointDistributionNamed(
        dict(
            a=tfd.Beta(np.float64(1.0), np.float64(2.0)),
            b=lambda a: tfd.Uniform(tf.zeros_like(a), 1.0 - a),
        )
    )
    y = np.array([0.9, -0.4, 1.3, 0.2, 2.1, -1.0])

    def likelihood(p, batch):
        del batch  # the rows are what the returned distribution is evaluated at
        return tfd.Normal(p["a"][..., None] * 2.0, 0.3 + p["b"][..., None])

    return sg.JointPosterior(prior, likelihood, (y,), batch_size=len(y))


def _state() -> list[tf.Tensor]:
    return [tf.constant([0.3, -1.2, 0.8], tf.float64), tf.constant([-0.5, 0.4, 1.1],
                                                                   tf.float64)]


def _finite_differences(fn, parts: list[tf.Tensor], h: float = 1e-6) -> list[np.ndarray]:
    out = []
    for i in range(len(parts)):
        up = [q + (h if j == i else 0.0) for j, q in enumerate(parts)]
        down = [q - (h if j == i else 0.0) for j, q in enumerate(parts)]
        out.append((np.asarray(fn(up)) - np.asarray(fn(down))) / (2 * h))
    return out


@pytest.mark.parametrize("mode", ["eager", "graph", "xla"])
def test_scores_are_partial_derivatives_in_every_mode(mode):
    est = _posterior().estimator  # on the unconstrained space
    call = {
        "eager": est.full_log_prob_and_gradient,
        "graph": tf.function(est.full_log_prob_and_gradient, autograph=False),
        "xla": tf.function(est.full_log_prob_and_gradient, autograph=False,
                           jit_compile=True),
    }[mode]
    parts = _state()
    got = call(parts)
    fd = _finite_differences(lambda p: est.full_log_prob_and_gradient(p).target_log_prob,
                             parts)
    for g, f in zip(got.grads_target_log_prob, fd):
        np.testing.assert_allclose(g, f, rtol=1e-5, atol=1e-6)


def test_tfp_default_graph_gradient_is_a_total_derivative_here():
    """Power check: the cross path exists, so a score taken the old way is wrong."""
    post = _posterior()
    est = post.estimator
    inner, forward = est._base, est.forward  # noqa: SLF001 - the two halves of the score

    def log_prob_of_constrained(*theta):
        return inner.full_log_prob_and_gradient(list(theta)).target_log_prob

    @tf.function(autograph=False)
    def old_way(parts):
        theta = forward(parts)  # b computed from a in the same graph
        return tfp.math.value_and_gradient(log_prob_of_constrained, theta)[1]

    @tf.function(autograph=False)
    def partial(parts):
        theta = [tf.identity(t) for t in forward(parts)]  # cut: a partial derivative
        return tfp.math.value_and_gradient(log_prob_of_constrained, theta)[1]

    old, right = old_way(_state()), partial(_state())
    assert np.abs(np.asarray(old[0]) - np.asarray(right[0])).max() > 1e-2
