"""The pieces of the posteriordb family transcriptions (``benchmarks/posteriordb/families.py``)
that the density checks of ``test_posteriordb_models.py`` do not reach: the ordered-vector
prior, the closed-form recursion's gradient, and `Posterior.flatten`'s transformed
parameters.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from _benchmarks import load_file
from scipy import stats

models = load_file("_posteriordb_models", "benchmarks/posteriordb/models.py")
families = load_file("_benchmarks_posteriordb_families", "benchmarks/posteriordb/families.py")


@pytest.mark.parametrize("low", [None, 0.0])
def test_ordered_normal_is_stans_density_and_transform(low):
    d = families.OrderedNormal(
        tf.constant([0.0, 3.0], tf.float64), tf.constant([1.0, 2.0], tf.float64), low=low
    )
    x = tf.constant([[0.5, 2.0], [2.0, 0.5], [-0.5, 1.0]], tf.float64)
    expected = stats.norm.logpdf([0.5, 2.0], [0.0, 3.0], [1.0, 2.0]).sum()
    lp = d.log_prob(x).numpy()
    np.testing.assert_allclose(lp[0], expected, rtol=1e-12)
    assert lp[1] == -np.inf  # not ordered
    assert (lp[2] == -np.inf) == (low is not None)  # below the bound
    b = d.experimental_default_event_space_bijector()
    z = tf.constant([[-1.0, 0.3], [2.0, -4.0]], tf.float64)
    y = b.forward(z).numpy()
    assert np.all(np.diff(y, axis=-1) > 0)
    if low is not None:
        # Stan's positive_ordered: y = cumsum(exp(z)).
        np.testing.assert_allclose(y, np.cumsum(np.exp(z.numpy()), axis=-1), rtol=1e-12)
    else:
        np.testing.assert_allclose(y[:, 0], z.numpy()[:, 0])  # Stan's ordered: y_1 = z_1


def test_ordered_normal_samples_the_truncated_law():
    """Sorting-free rejection sampling: for two iid N(0, 2) restricted to x_1 < x_2, the
    law is that of the sorted pair, E[x_2] = 2 / sqrt(pi) = 1.128 (sd 1.65 per draw).
    A sampler that sorts independent draws of N(0, 1) and N(3, 1) instead, or that skips
    the rejection, misses the other case's mean by far more than the 5-sigma tolerance."""
    n = 20_000
    d = families.OrderedNormal(
        tf.constant([0.0, 0.0], tf.float64), tf.constant([2.0, 2.0], tf.float64)
    )
    x = d.sample(n, seed=(1, 2)).numpy()
    assert np.all(x[:, 1] > x[:, 0])
    tol = 5 * 2.0 / np.sqrt(n)
    assert abs(x[:, 1].mean() - 2.0 / np.sqrt(np.pi)) < tol
    # Different means, lower bound 0: compare with accept/reject in NumPy.
    d = families.OrderedNormal(
        tf.constant([0.0, 3.0], tf.float64), tf.constant([1.0, 1.0], tf.float64), low=0.0
    )
    x = d.sample(n, seed=(3, 4)).numpy()
    rng = np.random.default_rng(0)
    ref = rng.normal([0.0, 3.0], 1.0, size=(4 * n, 2))
    ref = ref[(ref[:, 0] > 0) & (ref[:, 1] > ref[:, 0])]
    assert np.all(x[:, 0] > 0) and np.all(x[:, 1] > x[:, 0])
    for k in range(2):
        se = np.hypot(x[:, k].std() / np.sqrt(n), ref[:, k].std() / np.sqrt(len(ref)))
        assert abs(x[:, k].mean() - ref[:, k].mean()) < 5 * se


@pytest.mark.parametrize("coef", [0.0, 0.4, -0.9])
def test_linear_recursion_value_and_gradient(coef):
    """The closed form equals the loop ``x_t = coef x_{t-1} + c_t``, and so do its first and
    second derivatives in ``coef``, at ``coef = 0`` too (a cumulative product's gradient is
    zero there, a power's second derivative NaN: the ARMA Laplace fit failed on both)."""
    c = tf.constant([[1.0, -2.0, 0.5, 3.0, 1.5]], tf.float64)
    init = tf.constant([[0.7]], tf.float64)

    def loop(a: float) -> np.ndarray:
        x, out = 0.7, []
        for ct in c.numpy()[0]:
            x = a * x + ct
            out.append(x)
        return np.array(out)

    a = tf.constant([[coef]], tf.float64)
    with tf.GradientTape() as outer:
        outer.watch(a)
        with tf.GradientTape() as tape:
            tape.watch(a)
            x = families._linear_recursion(c, a, init)
            total = tf.reduce_sum(x)
        grad = tape.gradient(total, a)
    hess = outer.gradient(grad, a)
    np.testing.assert_allclose(x.numpy()[0], loop(coef), rtol=1e-12)
    h = 1e-4
    f = [loop(coef + k * h).sum() for k in (-1, 0, 1)]
    np.testing.assert_allclose(grad.numpy()[0, 0], (f[2] - f[0]) / (2 * h), rtol=1e-6)
    # The second derivative too (the Laplace fit's Hessian; `tf.pow`'s is NaN at 0).
    np.testing.assert_allclose(
        hess.numpy()[0, 0], (f[2] - 2 * f[1] + f[0]) / h**2, rtol=1e-5, atol=1e-6
    )


def test_flatten_adds_the_transformed_parameters():
    """Eight schools: ``flatten`` gives ``theta[j] = theta_trans[j] * tau + mu`` next to the
    parameters, draw by draw."""
    m = models.load("eight_schools-eight_schools_noncentered")
    rng = np.random.default_rng(1)
    draws = {
        "theta_trans": rng.normal(size=(5, 2, 8)),
        "mu": rng.normal(size=(5, 2)),
        "tau": rng.exponential(size=(5, 2)),
    }
    flat = m.flatten(draws)
    assert set(flat) == set(m.reference)
    for j in range(8):
        np.testing.assert_allclose(
            flat[f"theta[{j + 1}]"],
            draws["theta_trans"][..., j] * draws["tau"] + draws["mu"],
            rtol=1e-12,
        )
        np.testing.assert_array_equal(flat[f"theta_trans[{j + 1}]"], draws["theta_trans"][..., j])


def test_series_data_are_one_example():
    m = models.load("arma-arma11")
    x, y = m.data
    assert m.num_examples == 1 and x.shape == (1, 200) and y.shape == (1, 200)
    with pytest.raises(ValueError, match="same T"):
        families.pack_series("s", np.arange(3.0), np.arange(4.0), np.float64)


odes = load_file("_benchmarks_posteriordb_odes", "benchmarks/posteriordb/odes.py")


def test_rk4_is_fourth_order():
    """``y' = -t y``, ``y(0) = 1``: ``y = exp(-t²/2)``; halving the step divides the error
    by about 2⁴ = 16 (a first-order slip, e.g. k2 and k3 taken at ``t`` instead of
    ``t + h/2``, gives 2 or 4)."""
    times = np.array([0.5, 1.0, 2.0])
    y0 = tf.constant([[1.0], [2.0]], tf.float64)  # two "chains"
    exact = np.exp(-(times**2) / 2)[None, :, None] * np.array([1.0, 2.0])[:, None, None]
    errs = []
    for steps in (4, 8, 16):
        y = odes.rk4(lambda t, y: -t * y, y0, 0.0, times, steps).numpy()
        assert y.shape == (2, 3, 1)
        errs.append(np.abs(y - exact).max())
    assert errs[2] < 1e-6
    for coarse, fine in zip(errs, errs[1:]):
        assert 12 < coarse / fine < 20, errs
    with pytest.raises(ValueError, match="times"):
        odes.rk4(lambda t, y: y, y0, 0.0, np.array([1.0, 0.5]), 10)


@pytest.mark.parametrize(
    "name", ["one_comp_mm_elim_abs-one_comp_mm_elim_abs", "hudson_lynx_hare-lotka_volterra"]
)
def test_ode_step_is_fine_enough(name):
    """At the reference means the default RK4 step's solution is within 1e-4 (relative)
    of one with a step 16 times smaller: under 0.001 of the observation noise's sd (about
    0.13 and 0.25 on the log scale)."""
    m = models.load(name)
    p = {k: tf.constant(v) for k, v in m.reference_values().items()}
    if name.startswith("one_comp"):
        d = families.read_data(name)
        times = np.asarray(d["times"], np.float64)

        def solve(s):
            return odes.one_comp_solution(p, times, float(d["D"]), float(d["V"]), s)

        default = odes.ONE_COMP_STEPS
    else:
        times = m.data[0][0, 1:]

        def solve(s):
            return odes.lotka_volterra_solution(p, times, s)

        default = odes.LOTKA_VOLTERRA_STEPS
    coarse = tf.function(lambda: solve(default), autograph=False)().numpy()
    fine = tf.function(lambda: solve(16 * default), autograph=False)().numpy()
    gap = np.abs(np.log(coarse) - np.log(fine)).max()
    assert 1e-12 < gap < 1e-4, gap
    # Power: a step 10 times the default misses by far more.
    rough = tf.function(lambda: solve(max(1, default // 10)), autograph=False)().numpy()
    assert np.abs(np.log(rough) - np.log(fine)).max() > 10 * gap


def test_positive_normal_is_stans_truncated_normal():
    d = odes.PositiveNormal(tf.constant([1.0, 0.05], tf.float64),
                            tf.constant([0.5, 0.05], tf.float64))
    x = np.array([0.7, 0.02])
    expected = stats.norm.logpdf(x, [1.0, 0.05], [0.5, 0.05]) - stats.norm.logsf(
        0.0, [1.0, 0.05], [0.5, 0.05])
    np.testing.assert_allclose(d.log_prob(x).numpy(), expected, rtol=1e-10)
    b = d.experimental_default_event_space_bijector()
    np.testing.assert_allclose(b.forward(tf.constant([0.3, -2.0], tf.float64)).numpy(),
                               np.exp([0.3, -2.0]), rtol=1e-12)
