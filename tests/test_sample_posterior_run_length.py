"""The run length comes from the verdict, and the verdict reads the posterior's score.

``sample_posterior`` keeps drawing, in chunks continuing the same chains, until the
rank-normalised split R̂ is at most 1.01 and the bulk ESS at least 400, or until its
budget ends the run, and says which. The Stein moment check compares the draws with
the full-data score, so draws that are wrong in the same way in every chain (which R̂,
the ESS and the Gaussian inflation bound all pass) are ``suspect``.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from scipy import stats

import tfp_sgmcmc as sg
from tfp_sgmcmc.automatic import _Chain, _draw_until_long_enough, _Runner
from tfp_sgmcmc.diagnostics.verdict import (
    TARGET_ESS,
    TARGET_RHAT,
    bulk_mixing,
    judge_whitened_draws,
    stein_moment_check,
)
from tfp_sgmcmc.loop import chain_seed


def _slow_gaussian_runner() -> _Runner:
    """SGLD on z ~ N(0, I_2) whitened with a map too narrow in one direction: that
    whitened coordinate has variance 5, so at ε = 0.15 it mixes five times slower."""

    def log_prior(parts):
        return -0.5 * tf.reduce_sum(parts[0] ** 2, -1)

    def log_lik(parts, batch):
        shape = tf.concat([tf.shape(parts[0])[:-1], [tf.shape(batch)[0]]], 0)
        return tf.zeros(shape, tf.float64)

    est = sg.MinibatchEstimator(log_lik, np.zeros([1, 1]), 1, log_prior_fn=log_prior)
    scale = np.diag([1.0 / np.sqrt(5.0), 1.0])
    return _Runner(sg.WhitenedEstimator(est, [tf.zeros([2], tf.float64)], scale), True)


@pytest.fixture(scope="module")
def runner() -> _Runner:
    return _slow_gaussian_runner()


def _start() -> _Chain:
    """Four chains from an over-dispersed start, seed ``[0, 0]``."""
    state = np.random.default_rng(0).standard_normal([4, 2]) * [np.sqrt(5.0), 1.0]
    return _Chain(state, chain_seed(0))


def test_the_run_goes_on_until_rhat_and_ess_meet_their_targets(runner):
    eps, thin = 0.15, 7
    w, div, run = _draw_until_long_enough(
        runner, _start(), eps, 10, 100, thin, None, None, 0.0
    )
    # 100 draws have a bulk ESS far below 400 in the slow coordinate (power check:
    # the fixed-length run of before would have stopped there) ...
    assert bulk_mixing(w[:100])[1] < TARGET_ESS
    # ... so the run went on, in whole chunks, until both targets held.
    assert len(w) > 100 and not run.budget_ended, run
    assert run.rhat <= TARGET_RHAT and run.ess >= TARGET_ESS, run
    assert run.ended_by.startswith("converged after"), run.ended_by
    rhat, ess = bulk_mixing(w)
    assert rhat <= TARGET_RHAT and ess >= TARGET_ESS
    # The draws are right: variance 5 in the slow coordinate, 1 in the other (times
    # SGLD's 1/(1 - ε/2)), within 0.25: the Monte Carlo sd of a variance at ESS 400 is
    # about sqrt(2/400) = 0.07.
    var = w.reshape(-1, 2).var(0) * np.array([0.2, 1.0])
    assert np.all(np.abs(var / (1.0 / (1.0 - eps / 2)) - 1.0) < 0.25), var


def test_the_budget_ends_a_run_and_says_so(runner):
    thin = 7
    w, _, run = _draw_until_long_enough(
        runner, _start(), 0.15, 10, 200, thin, None, (10 + 200) * thin + 10, 0.0
    )
    # The budget left no room for another chunk: exactly the draws asked for.
    assert len(w) == 200
    assert run.budget_ended and "gradient evaluations per chain" in run.ended_by, run
    assert "R-hat" in run.ended_by and "ESS" in run.ended_by


def test_bulk_mixing_sees_a_chain_with_the_wrong_spread():
    """Folded R̂: chains that agree in location but not in spread."""
    rng = np.random.default_rng(1)
    w = rng.standard_normal([500, 4, 1])
    assert bulk_mixing(w)[0] < 1.01
    w[:, 0] *= 3.0
    assert bulk_mixing(w)[0] > 1.05


def _t_draws(scale: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Independent draws of a scaled Student-t (ν = 4) in one direction, a unit
    Gaussian in two others, and the score of the *unscaled* posterior at them."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal([500, 4, 3])
    nu = 4.0
    w[..., 0] = scale * stats.t(nu).rvs(size=(500, 4), random_state=rng)
    s = -w.copy()
    s[..., 0] = -(nu + 1) * w[..., 0] / (nu + w[..., 0] ** 2)
    return w, s


def test_stein_check_flags_a_shared_bias_the_other_checks_pass():
    right = stein_moment_check(*_t_draws(1.0))
    assert right.status == "ok", right  # power: exact draws pass
    w, s = _t_draws(1.6)  # every chain 1.6 times too wide in the heavy-tailed direction
    # R̂, the ESS and the Gaussian inflation bound (step 0.15, no noise) see nothing ...
    assert judge_whitened_draws(w, 0.15).status == "ok"
    # ... the score does.
    wrong = stein_moment_check(w, s)
    assert wrong.status == "suspect" and "Stein variance check" in wrong.reasons[0], wrong
    w, s = _t_draws(1.0)
    shifted = stein_moment_check(w + np.array([0.0, 0.3, 0.0]), s - np.array([0.0, 0.3, 0.0]))
    assert shifted.status == "suspect" and "Stein mean check" in shifted.reasons[0], shifted


def test_stein_check_names_bad_shapes():
    with pytest.raises(ValueError, match="`w` and `scores`"):
        stein_moment_check(np.zeros([10, 2, 3]), np.zeros([10, 2, 2]))



def test_a_time_budget_ends_a_run_and_says_so(runner):
    import time

    w, _, run = _draw_until_long_enough(
        runner, _start(), 0.15, 10, 100, 7, 1.0, None, time.perf_counter() - 100.0
    )
    assert len(w) == 100 and run.budget_ended and "(1 s)" in run.ended_by, run


def test_bad_budgets_are_named():
    with pytest.raises(ValueError, match="`max_gradient_evaluations`"):
        sg.sample_posterior(object(), max_gradient_evaluations=-1)
    with pytest.raises(ValueError, match="`max_seconds`"):
        sg.sample_posterior(object(), max_seconds=float("nan"))
