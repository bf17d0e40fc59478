"""``sample_posterior`` says what went wrong: every problem reaches the verdict.

A mode search that finds no mode (centred eight schools, whose density is
unbounded as τ → 0), a burn-in that diverged, and a posterior with a second mode
the chains never visit each give a reason and a verdict other than ``ok``.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from tfp_sgmcmc.automatic import _adapt, _Chain, _Runner
from tfp_sgmcmc.estimators.laplace import find_mode, local_modes
from tfp_sgmcmc.loop import chain_seed

tfd = tfp.distributions

_Y = np.array([28, 8, -3, 7, -1, 1, 18, 12], np.float64)
_SIGMA = np.array([15, 10, 16, 11, 9, 11, 10, 18], np.float64)


def centred_eight_schools() -> sg.JointPosterior:
    """theta_j ~ N(mu, tau), y_j ~ N(theta_j, sigma_j): no mode (log π → ∞ as τ → 0)."""
    prior = tfd.JointDistributionNamed(
        dict(
            mu=tfd.Normal(np.float64(0.0), 5.0),
            tau=tfd.HalfCauchy(np.float64(0.0), 5.0),
            theta=lambda mu, tau: tfd.Sample(tfd.Normal(mu, tau), 8),
        )
    )

    def likelihood(p, batch):
        school, sigma, _ = batch
        theta = tf.gather(p["theta"], tf.cast(school, tf.int32), axis=-1)
        return tfd.Normal(theta, sigma)

    return sg.JointPosterior(prior, likelihood, (np.arange(8.0), _SIGMA, _Y), batch_size=8)


def test_find_mode_says_there_is_no_mode_on_centred_eight_schools():
    post = centred_eight_schools()
    starts = [[tf.zeros_like(p) for p in post.initial_state(seed=1)]]
    starts += [post.initial_state(seed=k) for k in (1, 2)]
    lines: list[str] = []
    mode = find_mode(post.estimator, starts, 8, log=lines.append)
    assert mode.unbounded and not mode.converged, mode
    # Two searches ran away and the search stopped there: no L-BFGS, no Adam (which
    # climbed for minutes), and each failed search had its progress line.
    assert sum("ran away" in line for line in lines) == 2, lines
    assert not any("Adam" in line or "L-BFGS" in line for line in lines), lines
    assert "density looks unbounded" in mode.notes[-1]
    # The position handed on is a start, where log π is finite, not the runaway point.
    np.testing.assert_allclose(
        np.concatenate([np.ravel(p) for p in mode.position]),
        np.concatenate([np.ravel(p) for p in starts[0]]),
    )


def test_find_mode_power_a_bounded_posterior_still_has_its_mode():
    """The runaway rule does not fire on a posterior with a mode far from the starts."""
    post = centred_eight_schools()
    # tau fixed away from zero by a prior that vanishes there: a mode exists.
    prior = tfd.JointDistributionNamed(
        dict(
            mu=tfd.Normal(np.float64(0.0), 5.0),
            tau=tfd.InverseGamma(np.float64(3.0), 20.0),
            theta=lambda mu, tau: tfd.Sample(tfd.Normal(mu, tau), 8),
        )
    )
    post = sg.JointPosterior(prior, post._likelihood_fn, (np.arange(8.0), _SIGMA, _Y), 8)
    start = [tf.zeros_like(p) for p in post.initial_state(seed=1)]
    start[0] = start[0] + 30.0  # mu far from the data
    mode = find_mode(post.estimator, [start], 8)
    assert mode.converged and not mode.unbounded, mode


@pytest.mark.slow
def test_sample_posterior_on_centred_eight_schools_is_not_ok(capsys):
    res = sg.sample_posterior(
        centred_eight_schools(), num_results=20, seed=0, tuning_steps=20,
        step_sizes=(0.1,), adapt=False,
    )
    err = capsys.readouterr().err
    assert "] mode found" not in err and "] no mode found" in err, err
    assert res.verdict != "ok"
    assert any(r.startswith("no mode found") for r in res.reasons), res.reasons
    assert res.mode.unbounded


def _gaussian(d: int) -> sg.MinibatchEstimator:
    def log_prior(parts):
        return -0.5 * tf.reduce_sum(parts[0] ** 2, -1)

    def log_lik(parts, batch):
        return tf.zeros(tf.concat([tf.shape(parts[0])[:-1], [tf.shape(batch)[0]]], 0), tf.float64)

    return sg.MinibatchEstimator(log_lik, np.zeros([1, 1]), 1, log_prior_fn=log_prior)


@pytest.mark.parametrize("flag_steps", [True, False])
@pytest.mark.parametrize("scale", [10.0, 1.0])
def test_a_diverged_burn_in_reaches_the_verdict(scale, flag_steps):
    """A burn-in window that diverges is a ``suspect`` reason, not only a note; also when
    the kernel does not flag the runaway radius (as in `sample_posterior`), where the
    window's draws are judged by their log-density."""
    d = 2
    est = _gaussian(d)
    # A map ten times too wide: whitened curvature 100, so ε = 0.15 is unstable.
    white = sg.WhitenedEstimator(
        est, [tf.zeros([d], tf.float64)], scale * np.eye(d), flag_runaway_steps=flag_steps)
    runner = _Runner(white, jit_compile=False)
    notes: list[str] = []
    problems: list[tuple[str, str]] = []
    state = np.random.default_rng(0).standard_normal([4, d])
    _adapt(runner, _Chain(state, chain_seed(0)), 0.15, 1, notes, lambda _m: None, problems)
    if scale == 1.0:
        # Power check: the right map does not diverge and adds nothing.
        assert not problems, problems
        return
    assert problems and problems[0][0] == "suspect", (problems, notes)
    assert "diverged in burn-in window 1" in problems[0][1]


def _two_means(mixture: bool) -> sg.JointPosterior:
    """mu1, mu2 ~ N(0, 5); data from 0.5 N(-2, 1) + 0.5 N(2, 1).

    ``mixture=True``: the equal-weight two-component mixture, whose labels are
    exchangeable (two modes, (-2, 2) and (2, -2)); ``False``: a regression
    ``y ~ N(mu1 + mu2 x, 1)`` on the same rows (one mode), the power check.
    """
    rng = np.random.default_rng(3)
    y = np.where(rng.random(120) < 0.5, -2.0, 2.0) + rng.standard_normal(120)
    x = np.linspace(-1.0, 1.0, 120)
    prior = tfd.JointDistributionNamed(
        dict(mu1=tfd.Normal(np.float64(0.0), 5.0), mu2=tfd.Normal(np.float64(0.0), 5.0))
    )

    def likelihood(p, batch):
        xb, _ = batch
        if mixture:
            loc = tf.stack([p["mu1"], p["mu2"]], -1)[..., None, :]
            return tfd.MixtureSameFamily(
                tfd.Categorical(probs=tf.constant([0.5, 0.5], tf.float64)), tfd.Normal(loc, 1.0)
            )
        return tfd.Normal(p["mu1"][..., None] + p["mu2"][..., None] * xb, 1.0)

    return sg.JointPosterior(prior, likelihood, (x, y), batch_size=120)


@pytest.mark.parametrize("mixture", [True, False])
def test_local_modes_separates_exchangeable_labels(mixture):
    post = _two_means(mixture)
    at = [tf.constant(-2.0, tf.float64), tf.constant(2.0, tf.float64)]
    mirror = [at[1], at[0]]
    shifted = [at[0] + 0.5, at[1] - 0.3]
    modes = local_modes(post.estimator, [at, shifted, mirror])
    if not mixture:
        # Power check: one mode whatever the starts.
        assert len(modes) == 1 and modes[0].starts == [0, 1, 2], modes
        return
    assert len(modes) == 2, modes
    assert sorted(m.starts for m in modes) == [[0, 1], [2]]
    # Exchangeable labels: the same log density, mirrored positions.
    assert modes[0].log_prob == pytest.approx(modes[1].log_prob, abs=1e-6)
    a, b = ([float(p) for p in m.position] for m in modes)
    np.testing.assert_allclose(a, b[::-1], atol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("mixture", [True, False])
def test_a_second_mode_is_named_when_every_chain_starts_in_one(mixture):
    post = _two_means(mixture)
    start = [tf.constant(-2.0, tf.float64), tf.constant(2.0, tf.float64)]
    res = sg.sample_posterior(
        post, num_results=200, seed=0, initial_state=start, step_sizes=(0.15, 0.08),
        tuning_steps=50, adapt=False, progress=False,
    )
    several = [r for r in res.reasons if r.startswith("several modes")]
    if not mixture:
        # Power check: one mode, started the same way, stays ok.
        assert res.verdict == "ok" and not several, res.reasons
        return
    assert res.verdict != "ok" and several, res.reasons
    # Every chain stayed in the mode it started in (the case nothing else catches) ...
    assert np.all(res.draws["mu1"] < 0) and np.all(res.draws["mu2"] > 0)
    # ... and the reason names the other mode: mu1 near +2 and mu2 near -2.
    other = several[0].split("; and at ")
    assert len(other) == 2, several
    far = next(o for o in other if "where the chains start" not in o)
    mu1 = float(far.split("mu1 = ")[1].split(",")[0])
    mu2 = float(far.split("mu2 = ")[1].split(" ")[0])
    assert 1.0 < mu1 < 3.0 and -3.0 < mu2 < -1.0, far


def test_local_modes_traces_the_hessian_once(monkeypatch):
    """Every Newton search of one call shares one traced Hessian: a new trace per
    search made TensorFlow warn about retracing (and cost seconds per start)."""
    from tfp_sgmcmc.estimators import laplace

    built = []
    original = laplace._hessian_fn

    def counting(flat_grad, *args):
        built.append(flat_grad)
        return original(flat_grad, *args)

    monkeypatch.setattr(laplace, "_hessian_fn", counting)
    post = _two_means(True)
    at = [tf.constant(-2.0, tf.float64), tf.constant(2.0, tf.float64)]
    starts = [at, [at[0] + 0.5, at[1] - 0.3], [at[1], at[0]], [at[0] - 0.2, at[1] + 0.1]]
    modes = local_modes(post.estimator, starts)
    assert len(modes) == 2
    assert len(built) == 1, len(built)
