"""``sample_posterior`` moves its chains to the mode with the most Laplace mass.

The mode search keeps the first converged point of its starts; the searches for other
modes may find one that holds far more of the posterior (posteriordb's Lotka–Volterra
ODE: a mode 40 nats higher). `_heavier_mode` compares their Laplace masses,
``log π(m) + ½ log det Σ``, so that a narrow spike of high density does not win over
a wide mode of more mass. A mode of negligible mass (`_other_modes_negligible`) is named
in the notes, not the verdict. On a mixture of two Gaussians the masses are the weights.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from tfp_sgmcmc.automatic import _heavier_mode, _other_modes_negligible
from tfp_sgmcmc.estimators.laplace import LocalMode, laplace_approximation


def _mixture(w1: float, s1: float, w2: float, s2: float):
    """``w1 N(−1, s1²) + w2 N(5, s2²)`` in one coordinate, its two modes and fits."""
    locs, scales, weights = np.array([-1.0, 5.0]), np.array([s1, s2]), np.array([w1, w2])

    def log_prior(theta):
        x = theta[0] if isinstance(theta, list) else theta
        z = (x - locs) / scales  # [..., 2]
        comp = np.log(weights) - np.log(scales) - 0.5 * tf.square(z)
        return tf.reduce_logsumexp(comp, axis=-1) - 0.5 * np.log(2 * np.pi)

    def log_lik(theta, batch):
        x = theta[0] if isinstance(theta, list) else theta
        return tf.zeros(tf.concat([tf.shape(x)[:-1], [tf.shape(batch)[0]]], 0), tf.float64)

    est = sg.MinibatchEstimator(log_lik, np.zeros([4, 1]), 4, log_prior_fn=log_prior)
    modes, laps = [], []
    for loc in locs:
        pos = [tf.constant([loc], tf.float64)]
        lp = float(est.full_log_prob_and_gradient(pos).target_log_prob)
        modes.append(LocalMode(pos, lp, [len(modes)]))
        laps.append(laplace_approximation(est, pos))
    return SimpleNamespace(estimator=est), modes, laps


@pytest.mark.parametrize(
    "weights, own, moves",
    [
        ((0.2, 0.5, 0.8, 0.5), 0, True),  # four times the mass: move
        ((0.5, 0.5, 0.5, 0.5), 0, False),  # equal: stay
        ((0.3, 0.05, 0.7, 1.0), 1, False),  # the spike is 4.3x denser but lighter: stay
    ],
)
def test_the_chains_move_to_the_heaviest_mode_only(weights, own, moves):
    target, modes, laps = _mixture(*weights)
    found = _heavier_mode(target, modes, own, laps[own], max_dense_dim=10)
    if not moves:
        assert found is None
        return
    k, lap, gain = found
    assert k == 1 - own
    assert gain == pytest.approx(np.log(weights[2] / weights[0]), abs=0.05)
    np.testing.assert_allclose(np.asarray(lap.scale).ravel(), [weights[3]], rtol=0.05)


@pytest.mark.parametrize(
    "weights, negligible",
    [
        ((1.0 - 1e-12, 0.5, 1e-12, 0.5), True),  # e^-27.6 of the mass: a note
        ((1.0 - 1e-6, 0.5, 1e-6, 0.5), False),  # e^-13.8: still a reason
        ((1.0 - 1e-12, 0.5, 1e-12, 1e-6), False),  # as light, but a spike far denser
    ],
)
def test_a_mode_of_negligible_mass_is_only_named(weights, negligible):
    target, modes, laps = _mixture(*weights)
    assert _other_modes_negligible(target, modes, 0, laps[0], max_dense_dim=10) is negligible
