"""Bad input raises ``ValueError`` naming the argument (in backticks), at construction.

(The state/data dtype mismatch can only be seen when a state is given, so it is
raised by ``bootstrap_results`` and names ``init_state``.)
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg

X = np.random.default_rng(0).standard_normal((20, 2))
Y = np.zeros(20)


def _ll(theta, batch):
    xb, yb = batch
    return -0.5 * tf.square(yb - tf.einsum("nd,...d->...n", xb, theta))


def _est(batch_size=5, data=(X, Y)):
    return sg.MinibatchEstimator(_ll, data, batch_size)


def _raises(arg):
    return pytest.raises(ValueError, match=f"`{arg}`")


# Non-positive, non-finite step sizes and negative temperatures are checked for every
# kernel in the contract suite (test_contract.py); here the sampler-specific arguments.


def test_non_scalar_step_size():
    with _raises("step_size"):
        sg.SGLD(_est(), step_size=np.array([1e-3, 2e-3]))


def test_estimator_must_be_an_estimator():
    with _raises("estimator"):
        sg.SGLD(lambda x: x, 1e-3)


@pytest.mark.parametrize("friction", [0.0, -0.1])
def test_sghmc_non_positive_friction(friction):
    with _raises("friction"):
        sg.SGHMC(_est(), 1e-3, friction=friction)


def test_sghmc_noise_estimate_above_friction_or_negative():
    with _raises("noise_estimate"):
        sg.SGHMC(_est(), 1e-3, friction=0.1, noise_estimate=0.2)
    with _raises("noise_estimate"):
        sg.SGHMC(_est(), 1e-3, noise_estimate=-0.1)
    sg.SGHMC(_est(), 1e-3, friction=0.1, noise_estimate=0.1)  # β̂ = α is allowed


@pytest.mark.parametrize("big_l", [0, -2, 1.5, True, "3"])
def test_sghmc_num_leapfrog_steps(big_l):
    with _raises("num_leapfrog_steps"):
        sg.SGHMC(_est(), 1e-3, num_leapfrog_steps=big_l)


def test_sghmc_unknown_order():
    with _raises("order"):
        sg.SGHMC(_est(), 1e-3, order="leapfrog")


@pytest.mark.parametrize("diffusion", [0.0, -1.0])
def test_sgnht_non_positive_diffusion(diffusion):
    with _raises("diffusion"):
        sg.SGNHT(_est(), 1e-3, diffusion=diffusion)


@pytest.mark.parametrize("kw,arg", [({"decay": 1.0}, "decay"), ({"decay": -0.1}, "decay"),
                                    ({"epsilon": 0.0}, "epsilon")])
def test_psgld_preconditioner_arguments(kw, arg):
    with _raises(arg):
        sg.PSGLD(_est(), 1e-3, **kw)


@pytest.mark.parametrize("batch_size", [0, -1, 21, 2.5, "5", True])
def test_batch_size_outside_range_or_not_an_int(batch_size):
    with _raises("batch_size"):
        _est(batch_size)


@pytest.mark.parametrize("scheme", ["epoch", "with_replacement", "random_window"])
def test_batch_size_checked_for_every_scheme(scheme):
    with _raises("batch_size"):
        _est(21, sg.InMemoryData((X, Y), scheme=scheme))


def test_data_of_mismatched_length():
    with _raises("data"):
        sg.InMemoryData((X, Y[:10]))
    with _raises("data"):
        _est(5, (X[:19], Y))


def test_data_mixing_float_dtypes():
    with _raises("data"):
        sg.InMemoryData((X.astype(np.float32), Y))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_data(bad):
    x = X.copy()
    x[3, 1] = bad
    with _raises("data"):
        sg.InMemoryData((x, Y))


def test_empty_or_scalar_data():
    with _raises("data"):
        sg.InMemoryData(())
    with _raises("data"):
        sg.InMemoryData(np.float64(1.0))


def test_unknown_scheme():
    with _raises("scheme"):
        sg.InMemoryData((X, Y), scheme="shuffle")
    with _raises("scheme"):
        sg.InMemoryData((X, Y)).with_scheme("sorted")



def test_control_variate_centre():
    with _raises("centering_value"):
        sg.ControlVariateEstimator(_est(), tf.zeros(2, tf.float32))
    with pytest.raises(ValueError, match=r"`centering_value\[0\]` contains non-finite"):
        sg.ControlVariateEstimator(_est(), np.array([np.nan, 0.0]))
    with _raises("base"):
        sg.ControlVariateEstimator(sg.NoisyGradientEstimator(lambda t: t), tf.zeros(2))


def test_estimator_arguments():
    with _raises("log_likelihood_fn"):
        sg.MinibatchEstimator("not callable", (X, Y), 5)
    with _raises("log_prior_fn"):
        sg.MinibatchEstimator(_ll, (X, Y), 5, log_prior_fn=3.0)
    with _raises("full_data_chunk_size"):
        sg.MinibatchEstimator(_ll, (X, Y), 5, full_data_chunk_size=0)
    with _raises("noise_scale"):
        sg.NoisyGradientEstimator(lambda t: t, noise_scale=-1.0)


def test_find_map_arguments():
    with _raises("method"):
        sg.find_map(_est(), tf.zeros(2, tf.float64), method="sgd")
    with _raises("num_steps"):
        sg.find_map(_est(), tf.zeros(2, tf.float64), num_steps=0)
    with _raises("learning_rate"):
        sg.find_map(_est(), tf.zeros(2, tf.float64), method="adam", learning_rate=-1.0)
    with _raises("initial_state"):
        sg.find_map(_est(), tf.zeros(2, tf.float32))


def test_dataset_adapter_arguments():
    ds = tf.data.Dataset.from_tensor_slices(X).batch(4, drop_remainder=True)
    with _raises("dataset"):
        sg.DatasetData(X, num_examples=20)
    with _raises("num_examples"):
        sg.DatasetData(ds, num_examples=0)
    with _raises("dataset"):
        sg.DatasetData(tf.data.Dataset.from_tensor_slices(X).batch(4), num_examples=20)
    with _raises("dataset"):
        sg.DatasetData(ds, num_examples=3)


def test_sghmc_single_leapfrog_with_refresh_warns():
    # With L = 1 the refreshed momentum's gradient kick is discarded: a random walk.
    with pytest.warns(UserWarning, match="never uses the gradient"):
        sg.SGHMC(_est(), 1e-3, num_leapfrog_steps=1)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sg.SGHMC(_est(), 1e-3, num_leapfrog_steps=1, momentum_refresh=False)
        sg.SGHMC(_est(), 1e-3)  # default L = 5


@pytest.mark.parametrize("value", ["no", "False", None, 1, 0.0])
def test_sghmc_momentum_refresh_must_be_a_bool(value):
    """``bool("no")`` is True: a non-bool flag is refused, not coerced."""
    with _raises("momentum_refresh"):
        sg.SGHMC(_est(), 1e-3, momentum_refresh=value)
    assert sg.SGHMC(_est(), 1e-3, momentum_refresh=np.bool_(False)).parameters[
        "momentum_refresh"
    ] is False


@pytest.mark.parametrize(
    "build,arg",
    [
        # ζ = [1, 2] used to broadcast a single-chain state [3] to shape [2, 3].
        (lambda e: sg.CSGLD(e, 1e-3, zeta=[1.0, 2.0]), "zeta"),
        (lambda e: sg.CSGLD(e, 1e-3, energy_gap=[1.0, 2.0]), "energy_gap"),
        (lambda e: sg.CSGLD(e, 1e-3, min_energy=[0.0, 1.0]), "min_energy"),
        (lambda e: sg.CSGLD(e, 1e-3, min_energy="a"), "min_energy"),
        (lambda e: sg.CSGLD(e, 1e-3, min_energy=None), "min_energy"),
        (lambda e: sg.CSGLD(e, 1e-3, sa_step_size=[0.1, 0.2]), "sa_step_size"),
        (lambda e: sg.BAOAB(e, 1e-3, friction=[1.0, 2.0]), "friction"),
        (lambda e: sg.BADODAB(e, 1e-3, diffusion=[1.0, 2.0]), "diffusion"),
        (lambda e: sg.BADODAB(e, 1e-3, thermostat_mass=[1.0, 2.0]), "thermostat_mass"),
        (lambda e: sg.RESGLD(e, 1e-3, max_temperature=[5.0, 10.0]),
         "max_temperature"),
        (lambda e: sg.RESGLD(e, 1e-3, max_temperature="a"), "max_temperature"),
        (lambda e: sg.SGHMC(e, 1e-3, friction=tf.Variable([0.1, 0.2])), "friction"),
    ],
)
def test_non_scalar_or_non_numeric_hyperparameters(build, arg):
    """Each is a ``ValueError`` naming the argument at construction (they used to pass
    and fail later with a TF error, or silently change the state's shape)."""
    with _raises(arg):
        build(_est())


@pytest.mark.parametrize("value", ["a", None, b"1", True, ["a"]])
@pytest.mark.parametrize("arg", ["step_size", "temperature"])
@pytest.mark.parametrize("kernel", [sg.SGLD, sg.SGHMC, sg.BAOAB, sg.RESGLD])
def test_non_numeric_step_size_or_temperature_is_a_value_error(kernel, arg, value):
    kw = {"step_size": 1e-3, arg: value}
    with _raises(arg):
        kernel(_est(), **kw)
