"""The PMF and MNIST-BNN reference models against NumPy references; sparse PMF step cost."""

from __future__ import annotations

import time

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp
from scipy import stats

import tfp_sgmcmc as sg
from tfp_sgmcmc.models import mnist_bnn as mb
from tfp_sgmcmc.models import pmf as pm
from tfp_sgmcmc.models.data_files import RatingsData


def _small_ratings(num_users=7, num_items=9, num_ratings=40, seed=0) -> RatingsData:
    return pm.synthetic_ratings(
        num_users, num_items, num_ratings, min_per_user=2, latent_dim=3, seed=seed
    )


def _random_state(prob, seed=1, dtype=np.float64):
    rng = np.random.default_rng(seed)
    d = prob.latent_dim
    return [
        rng.normal(0, 0.7, (prob.num_users, d)),
        rng.normal(0, 0.7, (prob.num_items, d)),
        rng.normal(0, 0.5, d),
        rng.normal(0, 0.5, d),
        rng.normal(0, 0.5, d),
        rng.normal(0, 0.5, d),
    ]


def _numpy_log_post(state, users, items, r):
    u, v, mu_u, z_u, mu_v, z_v = state
    pred = np.sum(u[users] * v[items], axis=1)
    ll = np.sum(stats.norm.logpdf(r, pred, pm.ALPHA**-0.5))
    lp = 0.0
    for w, mu, z in ((u, mu_u, z_u), (v, mu_v, z_v)):
        lam = np.exp(z)
        lp += np.sum(stats.norm.logpdf(w, mu, lam**-0.5))
        lp += np.sum(stats.norm.logpdf(mu, pm.MU0, lam**-0.5))
        lp += np.sum(stats.gamma.logpdf(lam, pm.A0, scale=1.0 / pm.B0)) + np.sum(z)  # + Jacobian
    return ll + lp


def test_pmf_log_density_and_gradient_match_numpy():
    prob = pm.pmf(_small_ratings(), latent_dim=3, dtype=np.float64)
    users, items, r = prob.arrays("train")
    est = prob.estimator(prob.num_train)
    state = [tf.constant(p) for p in _random_state(prob)]
    out = est.full_log_prob_and_gradient(state)
    ref = _numpy_log_post([s.numpy() for s in state], users, items, r)
    # The model drops the Gaussian and Gamma normalising constants of the prior.
    d = prob.latent_dim
    const = -0.5 * np.log(2 * np.pi) * d * (prob.num_users + prob.num_items + 2) + 2 * d * (
        pm.A0 * np.log(pm.B0) - np.log(6.0)
    )  # Γ(4) = 6
    np.testing.assert_allclose(out.target_log_prob.numpy() + const, ref, rtol=1e-10)
    # gradient by central differences of the NumPy reference
    base = [s.numpy() for s in state]
    rng = np.random.default_rng(3)
    for part in range(6):
        for _ in range(3):
            idx = tuple(rng.integers(0, n) for n in base[part].shape)
            h = 1e-6
            plus = [p.copy() for p in base]
            minus = [p.copy() for p in base]
            plus[part][idx] += h
            minus[part][idx] -= h
            fd = (
                _numpy_log_post(plus, users, items, r) - _numpy_log_post(minus, users, items, r)
            ) / (2 * h)
            np.testing.assert_allclose(
                out.grads_target_log_prob[part].numpy()[idx], fd, rtol=1e-5, atol=1e-6
            )


def test_pmf_jacobian_term_is_needed():
    """Power check: dropping log|dλ/dz| changes the density by exactly Σ z."""
    prob = pm.pmf(_small_ratings(), latent_dim=3, dtype=np.float64)
    state = [tf.constant(p) for p in _random_state(prob)]
    with_jac = pm.log_prior(state).numpy()
    lam_u, lam_v = tf.exp(state[3]), tf.exp(state[5])
    without = pm.log_prior_constrained(state[0], state[1], state[2], lam_u, state[4], lam_v).numpy()
    np.testing.assert_allclose(with_jac - without, state[3].numpy().sum() + state[5].numpy().sum())
    assert isinstance(pm.PRECISION_BIJECTOR, tfp.bijectors.Exp)


def test_pmf_precisions_go_through_the_transformed_estimator():
    """The sampler's estimator is the library's change of variables, and SGLD-CV's is exact
    at its centre (the control variates live in the constrained space)."""
    prob = pm.pmf(_small_ratings(), latent_dim=3, dtype=np.float64)
    est = prob.estimator(prob.num_train)
    assert isinstance(est, sg.TransformedEstimator)
    assert isinstance(est.bijector[3], tfp.bijectors.Exp) and est.bijector[5] is est.bijector[3]
    state = [tf.constant(p) for p in _random_state(prob)]
    theta = est.forward(state)
    np.testing.assert_allclose(theta[3].numpy(), np.exp(state[3].numpy()))
    full = est.full_log_prob_and_gradient(state)
    cv = prob.control_variate_estimator(state, batch_size=7)
    out, _ = cv(state, cv.bootstrap(state), tf.constant([1, 2]))
    for g_cv, g in zip(out.grads_target_log_prob, full.grads_target_log_prob):
        np.testing.assert_allclose(g_cv.numpy(), g.numpy(), rtol=1e-9, atol=1e-9)
    # Power: away from the centre the minibatch CV estimate is not the exact score.
    moved = [p + 0.3 for p in state]
    out, _ = cv(moved, cv.bootstrap(moved), tf.constant([1, 2]))
    exact = est.full_log_prob_and_gradient(moved)
    assert not np.allclose(out.grads_target_log_prob[0].numpy(), exact.grads_target_log_prob[0])


def test_pmf_chain_dimensions_broadcast():
    prob = pm.pmf(_small_ratings(), latent_dim=3, dtype=np.float64)
    batch = [tf.constant(a) for a in prob.arrays("train")]
    s1, s2 = _random_state(prob, 1), _random_state(prob, 2)
    stacked = [tf.constant(np.stack([a, b])) for a, b in zip(s1, s2)]
    ll = pm.log_likelihood(stacked, batch).numpy()
    lp = pm.log_prior(stacked).numpy()
    for k, s in enumerate((s1, s2)):
        st = [tf.constant(p) for p in s]
        np.testing.assert_allclose(ll[k], pm.log_likelihood(st, batch).numpy(), rtol=1e-12)
        np.testing.assert_allclose(lp[k], pm.log_prior(st).numpy(), rtol=1e-12)


def test_synthetic_ratings_shape_and_split():
    d = pm.synthetic_ratings()
    assert (d.num_users, d.num_items, d.num_ratings) == (943, 1682, 100_000)
    assert set(np.unique(d.ratings)) <= {1.0, 2.0, 3.0, 4.0, 5.0}
    counts = np.bincount(d.users, minlength=943)
    assert counts.min() >= 20 and counts.max() > 10 * np.median(counts) / 2  # long tail
    pairs = d.users.astype(np.int64) * 1682 + d.items
    assert np.unique(pairs).size == pairs.size  # each (user, item) rated once
    prob = pm.pmf(synthetic=True)
    assert prob.num_train == 80_000 and prob.test_idx.size == 20_000
    assert np.intersect1d(prob.train_idx, prob.test_idx).size == 0
    assert abs(prob.mean_rating - d.ratings[prob.train_idx].mean()) < 1e-6
    np.testing.assert_array_equal(pm.synthetic_ratings().ratings, d.ratings)  # seeded


def test_pmf_arguments_and_metrics():
    with pytest.raises(ValueError, match="exactly one of"):
        pm.pmf()
    with pytest.raises(ValueError, match="exactly one of"):
        pm.pmf("u.data", synthetic=True)
    prob = pm.pmf(_small_ratings(), latent_dim=3)
    state = _random_state(prob)
    samples = [np.stack([p, p]) for p in state]
    # two identical samples: RMSE of the clipped prediction, by hand
    users, items, _ = prob.arrays("test")
    pred = np.clip(np.sum(state[0][users] * state[1][items], 1) + prob.mean_rating, 1, 5)
    r = prob.data.ratings[prob.test_idx]
    np.testing.assert_allclose(
        prob.test_rmse(samples), np.sqrt(np.mean((pred - r) ** 2)), rtol=1e-5
    )
    raw = np.sum(state[0][users] * state[1][items], 1) + prob.mean_rating
    np.testing.assert_allclose(
        prob.test_log_likelihood(samples),
        np.mean(stats.norm.logpdf(r, raw, pm.ALPHA**-0.5)),
        rtol=1e-5,
    )


def test_pmf_xi_against_a_reference():
    """ξ over the test predictions' posterior sds: zero against the samples' own sds,
    exactly 0.1/1.1 against sds 10% larger; clear errors for bad input."""
    prob = pm.pmf(_small_ratings(), latent_dim=3, dtype=np.float64)
    rng = np.random.default_rng(4)
    samples = [np.stack([p + 0.3 * rng.normal(size=p.shape) for _ in range(40)])
               for p in _random_state(prob)]
    users, items, _ = prob.arrays("test")
    f = np.einsum("snd,snd->sn", samples[0][:, users], samples[1][:, items])
    ref = {"test_predictions": {"std": f.std(0, ddof=1).tolist()}}
    assert prob.xi(samples, ref) == pytest.approx(0.0, abs=1e-12)
    wide = {"test_predictions": {"std": (1.1 * f.std(0, ddof=1)).tolist()}}
    assert prob.xi(samples, wide) == pytest.approx(0.1 / 1.1, rel=1e-9)
    assert np.isnan(prob.xi(samples))  # no stored reference for this data set
    with pytest.raises(ValueError, match="at least two"):
        prob.xi([p[:1] for p in samples], ref)
    with pytest.raises(ValueError, match="test predictions"):
        prob.xi(samples, {"test_predictions": {"std": [1.0, 2.0, 3.0] * 50}})


def test_stored_pmf_reference_matches_the_synthetic_split():
    """The shipped reference: computed on this data set and split, converged, positive sds."""
    prob = pm.pmf(synthetic=True)
    gt = prob.ground_truth()
    if gt is None:
        pytest.fail("pmf_synthetic.json in tfp_sgmcmc/models/ground_truth is missing or stale")
    sd = np.asarray(gt["test_predictions"]["std"])
    assert sd.shape == (20_000,) and np.all(sd > 0)
    assert gt["chains"] >= 2 and gt["rhat"]["max"] < 1.1 and gt["ess"]["min"] > 50
    assert gt["relative_mcse_of_std_norm"] < 0.05
    # Another split has another test set: no reference for it.
    assert pm.pmf(synthetic=True, split_seed=1).ground_truth() is None


def test_pmf_reference_needs_the_same_latent_dim_and_split_size(monkeypatch):
    """A d = 2 model was scored against the d = 20 reference."""
    assert pm.pmf(synthetic=True, latent_dim=2).ground_truth() is None
    assert pm.pmf(synthetic=True, train_fraction=0.7).ground_truth() is None
    stored = pm.load_ground_truth()
    prob = pm.pmf(synthetic=True)
    # A reference that records ``latent_dim`` is compared on it.
    monkeypatch.setattr(pm, "load_ground_truth", lambda: {**stored, "latent_dim": 20})
    assert prob.ground_truth() is not None
    monkeypatch.setattr(pm, "load_ground_truth", lambda: {**stored, "latent_dim": 2})
    assert prob.ground_truth() is None
    assert pm.pmf(synthetic=True, latent_dim=2).ground_truth() is not None


def _pmf_sgld_program(num_users: int, num_items: int, steps: int, num_ratings: int = 20_000):
    data = pm.synthetic_ratings(
        num_users, num_items, num_ratings, min_per_user=1, latent_dim=pm.LATENT_DIM, seed=0
    )
    prob = pm.pmf(data)
    kernel = sg.SGLD(prob.estimator(200), step_size=1e-6)

    @tf.function(jit_compile=True)
    def run(s, seed):
        # `steps` SGLD steps, one stored state: the cost is the steps, not the trace
        return tfp.mcmc.sample_chain(
            1, s, kernel=kernel, trace_fn=None, seed=seed, num_burnin_steps=steps - 1
        )

    return run, prob.init_state()


def _dense_log_likelihood(state, batch):
    """A wrong, dense implementation (all of U Vᵀ, then a gather): the power check."""
    users, items, r = batch
    full = tf.matmul(state[0], state[1], transpose_b=True)
    pred = tf.gather_nd(full, tf.stack([users, items], -1))
    return -0.5 * pm.ALPHA * tf.square(r - pred)


def _largest_hlo_buffer(fn, *args) -> int:
    import re

    hlo = fn.experimental_get_compiler_ir(*args)(stage="hlo")  # before XLA passes: cheap
    sizes = [
        int(np.prod([int(d) for d in m.split(",") if d])) if m else 1
        for m in re.findall(r"f32\[([0-9,]*)\]", hlo)
    ]
    return max(sizes)


def test_pmf_step_touches_no_users_by_items_buffer():
    """The compiled SGLD step has no buffer of users × items elements (XLA's HLO).

    300 users × 400 items: the largest float buffer of a step must be a state
    part (V: 400 × 20), far below users × items = 120,000; the same check on a
    dense likelihood finds the 300 × 400 product.
    """
    run, init = _pmf_sgld_program(300, 400, steps=2, num_ratings=5000)
    seed = tf.constant([0, 1])
    assert _largest_hlo_buffer(run, init, seed) <= 400 * 20
    data = pm.synthetic_ratings(300, 400, 5000, min_per_user=1, seed=0)
    prob = pm.pmf(data)
    est = sg.MinibatchEstimator(
        _dense_log_likelihood, prob.training_data(), 200, log_prior_fn=pm.log_prior
    )
    kernel = sg.SGLD(est, step_size=1e-6)
    dense = tf.function(
        lambda s, sd: tfp.mcmc.sample_chain(
            1, s, kernel=kernel, trace_fn=None, seed=sd, num_burnin_steps=1
        ),
        jit_compile=True,
    )
    assert _largest_hlo_buffer(dense, init, seed) >= 300 * 400


@pytest.mark.slow
def test_pmf_steps_per_second_do_not_grow_with_users_times_items():
    """Same users + items (the same parameters), 25x the users × items: same speed.

    A dense likelihood would be ~25x slower on the square grid. Best of 5
    interleaved timings on each side (the machine may be shared), and a bound far from
    both 1x and 25x, so that only the dense cost fails it under load.
    """
    programs = {k: _pmf_sgld_program(*k, steps=300) for k in ((50, 4950), (2500, 2500))}
    best = {k: np.inf for k in programs}
    for run, init in programs.values():
        run(init, tf.constant([0, 1]))  # compile
    for r in range(5):
        for k, (run, init) in programs.items():
            t0 = time.perf_counter()
            run(init, tf.constant([r, 2]))[0].numpy()
            best[k] = min(best[k], time.perf_counter() - t0)
    narrow, square = best[(50, 4950)], best[(2500, 2500)]
    assert square < 8 * narrow, (narrow, square)


# --------------------------------------------------------------------------- #
# MNIST BNN
# --------------------------------------------------------------------------- #
def _numpy_bnn_loglik(state, x, y):
    w1, b1, w2, b2 = state
    h = x @ w1 + b1
    h = np.exp(h - h.max(1, keepdims=True))
    h /= h.sum(1, keepdims=True)
    z = h @ w2 + b2
    logp = z - z.max(1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(1, keepdims=True))
    return logp[np.arange(y.size), y]


def test_bnn_log_likelihood_matches_numpy_and_keras():
    rng = np.random.default_rng(0)
    x = rng.random((13, 784))
    y = rng.integers(0, 10, 13)
    state = [rng.normal(0, 0.3, s) for s in ((784, 100), (100,), (100, 10), (10,))]
    ll = mb.log_likelihood([tf.constant(p) for p in state], (tf.constant(x), tf.constant(y)))
    np.testing.assert_allclose(ll.numpy(), _numpy_bnn_loglik(state, x, y), rtol=1e-10)
    lp = mb.log_prior([tf.constant(p) for p in state]).numpy()
    np.testing.assert_allclose(lp, -0.5 * sum(np.sum(p**2) for p in state))
    # chain dimensions
    stacked = [tf.constant(np.stack([p, 2 * p])) for p in state]
    ll2 = mb.log_likelihood(stacked, (tf.constant(x), tf.constant(y))).numpy()
    np.testing.assert_allclose(ll2[1], _numpy_bnn_loglik([2 * p for p in state], x, y), rtol=1e-10)
    # the Keras model: same network, same numbers
    prob = mb.MnistBNN(x.astype(np.float32), y.astype(np.int32), x[:2], y[:2])
    post = mb.keras_posterior(prob)
    st32 = [tf.constant(p, tf.float32) for p in state]
    kll = post.log_likelihood_fn(st32, (tf.constant(x, tf.float32), tf.constant(y)))
    np.testing.assert_allclose(kll.numpy(), _numpy_bnn_loglik(state, x, y), rtol=2e-4, atol=2e-5)
    assert post.num_parameters == prob.num_parameters == 79_510


def test_synthetic_mnist_and_metrics():
    raw = mb.synthetic_mnist(num_train=300, num_test=200, seed=1)
    assert raw["x_train"].shape == (300, 784) and raw["x_test"].shape == (200, 784)
    assert raw["x_train"].dtype == np.float32
    assert 0.0 <= raw["x_train"].min() and raw["x_train"].max() <= 1.0
    assert 0.05 < np.mean(raw["x_train"] > 0) < 0.5  # mostly background, like MNIST
    assert set(np.unique(raw["y_train"])) == set(range(10))
    np.testing.assert_array_equal(mb.synthetic_mnist(300, 200, seed=1)["x_test"], raw["x_test"])
    with pytest.raises(ValueError, match="exactly one of"):
        mb.mnist_bnn()
    prob = mb.MnistBNN(raw["x_train"], raw["y_train"], raw["x_test"], raw["y_test"])
    state = [np.asarray(p) for p in mb.init_state(scale=0.0)]
    m = prob.metrics(state)  # zero weights: uniform predictive
    np.testing.assert_allclose(m["log_loss"], np.log(10.0), rtol=1e-6)
    np.testing.assert_allclose(m["ece"], abs(0.1 - m["accuracy"]), atol=1e-6)
