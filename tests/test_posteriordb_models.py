"""The posteriordb transcriptions (``benchmarks/posteriordb/models.py``): each builds, works
with ``JointPosterior``, and puts posteriordb's reference means where its density peaks.

The NUTS check against the reference draws (``benchmarks/posteriordb/check_nuts.py``) takes
minutes; these tests take seconds and catch a transcription that drifted since then.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from _benchmarks import load_file

import tfp_sgmcmc as sg

models = load_file("_posteriordb_models", "benchmarks/posteriordb/models.py")


def _stacked(values: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {k: np.stack([v[k] for v in values]) for k in values[0]}


#: Parameters whose 3-sd move the check leaves out, and why: the non-centred eight schools'
#: ``tau`` (reference mean 3.6, sd 3.2, skewed) is nearly unidentified by 8 observations, so
#: with ``theta_trans`` at its means, ``tau = 13.2`` is as likely as ``tau = 3.6``.
FLAT_DIRECTIONS: dict[str, tuple[str, ...]] = {
    "eight_schools-eight_schools_noncentered": ("tau",),
}


def _in_support(m: Any, point: dict[str, np.ndarray]) -> bool:
    """Whether ``point`` lies in the prior's support: the event-space bijector maps it to a
    finite unconstrained point and back (a negative scale, an unordered ``ordered`` vector,
    a ``beta1`` above ``1 - alpha1`` do not)."""
    bijector = m.prior.experimental_default_event_space_bijector()
    z = bijector.inverse({k: tf.constant(v) for k, v in point.items()})
    # Through NumPy: the bijector caches its inverse and would hand ``point`` back.
    back = bijector.forward({k: tf.constant(v.numpy()) for k, v in z.items()})
    return all(
        np.all(np.isfinite(back[k].numpy())) and np.allclose(back[k].numpy(), v, atol=1e-9)
        for k, v in point.items()
    )


def _neighbours(m: Any) -> tuple[dict[str, np.ndarray], list[str]]:
    """The reference means, then each parameter moved by -3 and +3 reference sds (the
    others at their means), stacked along a leading axis.

    A simplex component's move is taken from the simplex's other components in equal
    parts, so that the point stays on the simplex. Moves that leave the support (a
    positive parameter 3 sds from a mean near zero) are left out.
    """
    centre = m.reference_values()
    bijector = m.prior.experimental_default_event_space_bijector()
    free = bijector.inverse_event_shape({k: tf.TensorShape(s) for k, s in m.event_shapes.items()})
    points, labels = [centre], ["mean"]
    for part, shape in m.event_shapes.items():
        size = int(np.prod(shape, dtype=np.int64))
        simplex = tf.TensorShape(free[part]).num_elements() < size
        for i in range(size):
            stan = part if shape == () else f"{part}[{i + 1}]"
            for sign in (-3.0, 3.0):
                p = {k: np.array(v, copy=True) for k, v in centre.items()}
                step = sign * m.reference[stan].sd
                if simplex:
                    p[part].reshape(-1)[:] -= step / (size - 1)
                    step *= size / (size - 1)
                p[part].reshape(-1)[i] += step
                if _in_support(m, p):
                    points.append(p)
                    labels.append(f"{stan} {sign:+.0f} sd")
    return _stacked(points), labels


def _by_hand(m: Any, points: dict[str, np.ndarray], data: Any = None) -> np.ndarray:
    """``log p(θ) + Σ_i log p(y_i | θ, x_i) + log |det J_f(z)|`` at ``θ = points``."""
    x, y = (tf.constant(a) for a in (m.data if data is None else data))
    theta = {k: tf.constant(v) for k, v in points.items()}
    bijector = m.prior.experimental_default_event_space_bijector()
    event_ndims = {k: len(s) for k, s in m.event_shapes.items()}
    lp = (
        m.prior.log_prob(theta)
        + tf.reduce_sum(m.likelihood_fn(theta, (x, y)).log_prob(y), -1)
        - bijector.inverse_log_det_jacobian(theta, event_ndims=event_ndims)
    )
    return lp.numpy()


#: Regressions whose prior and likelihood come from the same code as a posterior of
#: `JOINT_POSTERIOR_CASES` (``models._beta_sigma`` with flat, half-Cauchy or wide flat
#: priors): only their data and sizes differ. Building a ``JointPosterior`` costs seconds
#: per posterior, so the agreement with it is checked once per kind of code; every
#: posterior's own density still meets its reference in `test_reference_means_beat_three_sd_moves`.
SAME_CODE_AS_A_JOINT_POSTERIOR_CASE = frozenset(
    {
        "earnings-earn_height",
        "earnings-logearn_height",
        "earnings-logearn_interaction",
        "earnings-logearn_logheight_male",
        "kidiq-kidscore_momhs",
        "kidiq-kidscore_momhsiq",
        "kidiq_with_mom_work-kidscore_interaction_c",
        "kidiq_with_mom_work-kidscore_interaction_c2",
        "kidiq_with_mom_work-kidscore_mom_work",
        "mesquite-logmesquite",
        "mesquite-logmesquite_logva",
        "mesquite-logmesquite_logvash",
        "mesquite-logmesquite_logvolume",
        "mesquite-mesquite",
        *(f"nes{year}-nes" for year in models.NES_YEARS if year != 2000),
        "sblri-blr",
    }
)
#: The ODE posteriors' ``JointPosterior`` takes tens of seconds to build (traced RK4 loops):
#: their agreement with it is checked in the slow tier.
SLOW_JOINT_CASES = frozenset(
    {"one_comp_mm_elim_abs-one_comp_mm_elim_abs", "hudson_lynx_hare-lotka_volterra"}
)
JOINT_POSTERIOR_CASES = [
    pytest.param(n, marks=pytest.mark.slow) if n in SLOW_JOINT_CASES else n
    for n in models.NAMES
    if n not in SAME_CODE_AS_A_JOINT_POSTERIOR_CASE
]


@pytest.fixture(scope="module", params=models.NAMES)
def case(request: pytest.FixtureRequest) -> dict[str, Any]:
    """One transcription and its full-data log-density (`_by_hand`) at the reference means
    and their 3-sd neighbours (one call)."""
    m = models.load(request.param, dtype=np.float64)
    points, labels = _neighbours(m)
    return {"m": m, "points": points, "labels": labels, "lp": _by_hand(m, points)}


@pytest.fixture(scope="module", params=JOINT_POSTERIOR_CASES)
def joint_case(request: pytest.FixtureRequest) -> dict[str, Any]:
    """One transcription, its ``JointPosterior`` and that posterior's full-data log-density
    at the reference means and their 3-sd neighbours."""
    m = models.load(request.param, dtype=np.float64)
    # A series posterior is one example (N = 1); eight schools has N = 8.
    batch_size = min(32, m.num_examples)
    post = sg.JointPosterior(m.prior, m.likelihood_fn, m.data, batch_size=batch_size)
    points, _ = _neighbours(m)
    z = post.unconstrain({k: tf.constant(v) for k, v in points.items()})
    lp = post.target_log_prob_fn(*z).numpy()
    return {"m": m, "post": post, "points": points, "lp": lp}


def test_builds_with_the_stan_parameters(case):
    m = case["m"]
    assert m.num_examples == m.data[0].shape[0] == m.data[1].shape[0]
    assert m.data[0].dtype == m.data[1].dtype == np.float64
    at_means = {k: v[None, None] for k, v in m.reference_values().items()}
    flat = m.flatten(at_means)
    # Every parameter, and every transformed parameter the posterior computes, has a
    # reference; the only reference names left over would be Stan's generated quantities
    # (none in these posteriors).
    assert set(flat) == set(m.reference)
    parameters = dataclasses.replace(m, transformed=None).flatten(at_means)
    for name, values in flat.items():
        assert values.shape == (1, 1)
        if name in parameters:  # a transformed parameter's mean is not at the means
            np.testing.assert_allclose(values[0, 0], m.reference[name].mean)


def test_float32_builds():
    m = models.load("sblrc-blr", dtype=np.float32)
    post = sg.JointPosterior(m.prior, m.likelihood_fn, m.data, batch_size=10)
    z = post.unconstrain({k: tf.constant(v) for k, v in m.reference_values().items()})
    lp = post.target_log_prob_fn(*z)
    assert lp.dtype == tf.float32 and np.isfinite(lp.numpy())


def test_joint_posterior_density_is_the_transcription(joint_case):
    """``JointPosterior``'s full-data log-density = prior + Σ likelihood + log-det-Jacobian
    (the density ``check_nuts.py`` samples)."""
    m, post = joint_case["m"], joint_case["post"]
    assert sorted(post.names) == sorted(m.prior.model)
    # 1e-9: gp_pois_regr's Cholesky of a covariance with a 1e-10 jitter loses a digit.
    np.testing.assert_allclose(joint_case["lp"], _by_hand(m, joint_case["points"]), rtol=1e-9)


def test_every_posterior_skipped_by_the_joint_check_exists():
    """`SAME_CODE_AS_A_JOINT_POSTERIOR_CASE` names only registered posteriors (a renamed
    posterior must not silently leave the ``JointPosterior`` check)."""
    assert SAME_CODE_AS_A_JOINT_POSTERIOR_CASE <= set(models.NAMES)


def test_reference_means_beat_three_sd_moves(case):
    """At the reference means the full-data log-density is finite and higher than at any
    point where one parameter moved 3 reference sds away (a drop of 4.5 nats for a
    Gaussian posterior, more where parameters are correlated)."""
    lp, labels = case["lp"], case["labels"]
    assert np.all(np.isfinite(lp))
    skip = FLAT_DIRECTIONS.get(case["m"].name, ())
    drop = np.array(
        [d if label.split()[0] not in skip else np.inf
         for d, label in zip(lp[0] - lp[1:], labels[1:])]
    )
    worst = int(np.argmin(drop))
    assert drop[worst] > 2.0, f"{labels[worst + 1]} is only {drop[worst]:.2f} nats lower"


def test_three_sd_check_catches_a_wrong_transcription():
    """Power check: kidiq with ``mom_hs`` and ``mom_iq`` swapped in the design fails."""
    m = models.load("kidiq-kidscore_interaction", dtype=np.float64)
    x, y = m.data
    points, _ = _neighbours(m)
    lp = _by_hand(m, points, data=(x[:, [0, 2, 1, 3]], y))
    assert np.all(np.isfinite(lp)) and np.max(lp[1:]) > lp[0]


def _wrong_design(name: str, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The data of posterior ``name`` as a plausible mistranscription of its Stan program's
    transformed data would give them."""
    raw = models.read_data(name)
    if name == "nes1972-nes":  # age dummies on the wrong baseline (1, 2, 3 not 2, 3, 4)
        age = np.asarray(raw["age_discrete"])
        x = x.copy()
        x[:, 3:6] = np.stack([age == k for k in (1, 2, 3)], axis=1)
        return x, y
    if name == "nes1976-nes":  # another year's survey under this year's name
        return models.load("nes1972-nes").data
    if name == "kidiq_with_mom_work-kidscore_interaction_c":  # centred on 0.5 and 100
        return models.load("kidiq_with_mom_work-kidscore_interaction_c2").data
    if name == "kidiq_with_mom_work-kidscore_mom_work":  # work dummies on the wrong baseline
        work = np.asarray(raw["mom_work"])
        return np.stack([np.ones_like(y)] + [work == k for k in (1, 2, 3)], axis=1), y
    if name == "mesquite-logmesquite_logvash":  # log(diam2 ./ diam1) for the shape
        x = x.copy()
        x[:, 3] = -x[:, 3]
        return x, y
    if name == "kilpisjarvi_mod-kilpisjarvi":  # centred years, which the program does not do
        return x - x.mean(), y
    raise KeyError(name)


@pytest.mark.parametrize(
    "name",
    [
        "nes1972-nes",
        "nes1976-nes",
        "kidiq_with_mom_work-kidscore_interaction_c",
        "kidiq_with_mom_work-kidscore_mom_work",
        "mesquite-logmesquite_logvash",
        "kilpisjarvi_mod-kilpisjarvi",
    ],
)
def test_three_sd_check_catches_wrong_transformed_data(name):
    """Power check on the transformed data the regressions compute: each mistake of
    `_wrong_design` makes `test_reference_means_beat_three_sd_moves` fail."""
    m = models.load(name, dtype=np.float64)
    points, _ = _neighbours(m)
    lp = _by_hand(m, points, data=_wrong_design(name, *m.data))
    assert np.all(np.isfinite(lp))
    assert np.min(lp[0] - lp[1:]) <= 2.0
