"""The JointDistribution bridge: every JD flavour, same chain as the hand-written model,
kernels, MAMBA, the driver and ``--model`` files."""

from __future__ import annotations

import os
import textwrap

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from tfp_sgmcmc.driver.model import load_model
from tfp_sgmcmc.estimators import ControlVariateEstimator, MinibatchEstimator

tfd = tfp.distributions
tfb = tfp.bijectors

ALPHA, BETA = 3.0, 2.0


def _y(n: int = 200) -> np.ndarray:
    return np.random.default_rng(5).normal(0.0, 1.5, size=n)


def _lik(p, batch):
    v = p["v"] if isinstance(p, dict) else p[0]
    return tfd.Normal(tf.zeros([], v.dtype), tf.sqrt(v)[..., None])


def _inverse_gamma(dtype=tf.float64):
    return tfd.InverseGamma(tf.constant(ALPHA, dtype), tf.constant(BETA, dtype))


def test_same_chain_as_the_hand_written_transformed_kernel():
    """JD bridge on z == TransformedTransitionKernel(SGLD(hand-written), f) on v."""
    y = _y()
    post = sg.JointPosterior(tfd.JointDistributionNamed(dict(v=_inverse_gamma())), _lik, y, 20)
    assert post.names == ["v"]

    def loglik(v, batch):
        return tfd.Normal(tf.zeros([], v.dtype), tf.sqrt(v)[..., None]).log_prob(batch)

    hand = MinibatchEstimator(loglik, y, 20, log_prior_fn=_inverse_gamma().log_prob)
    # The bridge uses TFP's default event-space bijector (InverseGamma: 1/softplus).
    bijector = _inverse_gamma().experimental_default_event_space_bijector()
    ttk = sg.TransformedTransitionKernel(sg.SGLD(hand, step_size=1e-3), bijector)
    v0 = tf.constant([0.5, 2.0, 4.0], tf.float64)
    seed = tf.constant([7, 8])
    run = tf.function(lambda k, s: tfp.mcmc.sample_chain(15, s, kernel=k, trace_fn=None, seed=seed))
    v = run(ttk, v0)
    z = run(sg.SGLD(post.estimator, step_size=1e-3), post.unconstrain({"v": v0}))
    np.testing.assert_allclose(post.constrain(z)["v"].numpy(), v.numpy(), rtol=1e-10)


def _flavours():
    def seq_prior():
        return [
            tfd.Normal(tf.constant(0.0, tf.float64), 3.0),
            tfd.HalfNormal(tf.constant(2.0, tf.float64)),
        ]

    @tfd.JointDistributionCoroutineAutoBatched
    def coroutine():
        yield tfd.Normal(tf.constant(0.0, tf.float64), 3.0, name="mu")
        yield tfd.HalfNormal(tf.constant(2.0, tf.float64), name="sigma")

    named = dict(
        mu=tfd.Normal(tf.constant(0.0, tf.float64), 3.0),
        sigma=tfd.HalfNormal(tf.constant(2.0, tf.float64)),
    )
    return {
        "named": tfd.JointDistributionNamed(named),
        "named_ab": tfd.JointDistributionNamedAutoBatched(named),
        "sequential": tfd.JointDistributionSequential(seq_prior()),
        "sequential_ab": tfd.JointDistributionSequentialAutoBatched(seq_prior()),
        "coroutine_ab": coroutine,
    }


@pytest.mark.parametrize("flavour", list(_flavours()))
def test_every_joint_distribution_flavour(flavour):
    prior = _flavours()[flavour]
    y = _y(100)

    def lik(p, batch):
        mu, sigma = (p["mu"], p["sigma"]) if isinstance(p, dict) else (p[0], p[1])
        return tfd.Normal(mu[..., None], sigma[..., None])

    post = sg.JointPosterior(prior, lik, y, batch_size=10)
    assert len(post.names) == 2
    z = post.initial_state(num_chains=3, seed=1)
    assert [p.shape for p in z] == [(3,), (3,)]
    theta = post.constrain(z)
    assert np.all(theta[post.names[1]].numpy() > 0)  # sigma: second in every flavour
    # The full-data score is the gradient of the exact unconstrained log-density.
    full = post.estimator.full_log_prob_and_gradient(z)

    def exact(*parts):
        parts = [tf.identity(p) for p in parts]  # defeat the bijector cache (no tape there)
        th = post.bijector.forward(parts)
        ldj = post.bijector.forward_log_det_jacobian(parts, [0, 0])
        lp = prior.log_prob(post.structure(th))
        return lp + tf.reduce_sum(lik(post.structure(th), y).log_prob(y), -1) + ldj

    value, grads = tfp.math.value_and_gradient(exact, z)
    np.testing.assert_allclose(full.target_log_prob, value, rtol=1e-10)
    for g, h in zip(post.score_fn()(z), grads):
        np.testing.assert_allclose(g, h, rtol=1e-10)
    np.testing.assert_allclose(post.target_log_prob_fn(*z), value, rtol=1e-10)


def _map_posterior():
    y = _y(400)
    prior = tfd.JointDistributionNamedAutoBatched(
        dict(
            mu=tfd.Normal(tf.constant(0.0, tf.float64), 3.0),
            sigma=tfd.HalfNormal(tf.constant(2.0, tf.float64)),
        )
    )

    def lik(p, batch):
        return tfd.Normal(p["mu"][..., None], p["sigma"][..., None])

    return y, sg.JointPosterior(prior, lik, y, batch_size=40)


def test_map_and_control_variates():
    y, post = _map_posterior()
    z_map = post.find_map()
    theta = post.constrain(z_map)
    # The MAP of θ (no Jacobian) is close to the data's mean and sd (N = 400, weak prior).
    assert abs(float(theta["mu"]) - y.mean()) < 0.02
    assert abs(float(theta["sigma"]) - y.std()) < 0.02
    cv = post.control_variates(z_map)
    assert isinstance(cv.estimator, ControlVariateEstimator)
    # At the centre the control-variate score is the exact full-data score.
    e, _ = cv(z_map, cv.bootstrap(z_map), tf.constant([0, 1]))
    for g, h in zip(e.grads_target_log_prob, post.score_fn()(z_map)):
        np.testing.assert_allclose(g, h, rtol=1e-8, atol=1e-8)


_SLOW = pytest.mark.slow
KERNELS = {
    "sgld_cv": lambda post, cv: sg.SGLD(cv, 1e-4),
    "sghmc": lambda post, cv: sg.SGHMC(post.estimator, 1e-4),
    "sgld": pytest.param(lambda post, cv: sg.SGLD(post.estimator, 1e-4), marks=_SLOW),
    "psgld": pytest.param(lambda post, cv: sg.PSGLD(post.estimator, 1e-4), marks=_SLOW),
    "sgnht": pytest.param(lambda post, cv: sg.SGNHT(post.estimator, 1e-4), marks=_SLOW),
    "asgld": pytest.param(lambda post, cv: sg.ASGLD(post.estimator, 1e-4), marks=_SLOW),
}


@pytest.mark.parametrize("make", list(KERNELS.values()), ids=list(KERNELS))
def test_kernels_on_the_bridge(make):
    y, post = _map_posterior()
    z_map = post.find_map()
    kernel = make(post, post.control_variates(z_map))
    init = [tf.stack([p, p]) for p in z_map]

    @tf.function
    def run():
        return tfp.mcmc.sample_chain(20, init, kernel=kernel, trace_fn=None, seed=(1, 2))

    th = post.constrain(run())
    assert np.all(np.isfinite(th["mu"].numpy())) and np.all(th["sigma"].numpy() > 0)
    # Draws stay near the MAP at this small step.
    assert abs(float(tf.reduce_mean(th["sigma"])) - y.std()) < 0.3


def test_arviz_named_constrained_draws():
    pytest.importorskip("arviz")
    y = _y(50)
    post = sg.JointPosterior(tfd.JointDistributionNamed(dict(v=_inverse_gamma())), _lik, y, 10)
    z = [tf.random.stateless_normal([30, 2], seed=(1, 1), dtype=tf.float64)]
    idata = post.to_arviz(z)
    v = idata.posterior["v"].values
    assert v.shape == (2, 30) and np.all(v > 0)
    # InverseGamma's default event-space bijector is 1/softplus.
    np.testing.assert_allclose(v, 1.0 / tf.transpose(tf.nn.softplus(z[0])).numpy())


def test_mamba_and_driver_and_model_file(tmp_path, capsys):
    model_file = tmp_path / "jd_model.py"
    model_file.write_text(
        textwrap.dedent(
            """
            import numpy as np, tensorflow as tf, tensorflow_probability as tfp
            import tfp_sgmcmc as sg
            tfd = tfp.distributions

            def build(batch_size=20, num_chains=2):
                y = np.random.default_rng(0).normal(1.0, 2.0, size=500).astype("float32")
                prior = tfd.JointDistributionNamedAutoBatched(
                    dict(mu=tfd.Normal(0.0, 10.0), sigma=tfd.HalfNormal(5.0)))
                lik = lambda p, b: tfd.Normal(p["mu"][..., None], p["sigma"][..., None])
                post = sg.JointPosterior(prior, lik, y, batch_size=batch_size)
                return post.model_spec(num_chains=num_chains, init="map", name="jd")
            """
        )
    )
    spec = load_model(str(model_file), {"num_chains": 2})
    assert spec.param_names == ["mu_unconstrained", "sigma_unconstrained"]
    result = sg.MAMBA(
        # Stable arms (ε × curvature of log π_z ≤ 0.1): the chosen one runs in the driver.
        sg.tuning.grid(step_size=[1e-4, 1e-5, 1e-6]),
        [p[0] for p in spec.init_state],  # MAMBA runs one chain per arm
        sg.tuning.KernelSpec(sg.SGLD, spec.estimator),
        budget=sg.tuning.steps(600),
        progress=False,
        sampling=sg.tuning.ArmSampling(thin=2, jit_compile=False),
    ).run()
    assert result.best_arm["step_size"] in (1e-4, 1e-5, 1e-6)
    run_dir = str(tmp_path / "run")
    sg.sample(
        result.kernel(),
        spec.init_state,
        num_samples=40,
        run_dir=run_dir,
        chunk_size=20,
        seed=1,
        jit_compile=False,
        progress=False,
    )
    from tfp_sgmcmc.cli import main

    args = ["diagnose", "--run-dir", run_dir, "--model", str(model_file), "--max-samples", "40"]
    code = main(args)
    assert code == 0, capsys.readouterr().err
    run = sg.driver.open_run(run_dir)
    assert run.num_written == 40
    assert os.path.exists(os.path.join(run_dir, "samples.h5"))


def test_bad_input():
    y = _y(10)
    with pytest.raises(TypeError, match="prior"):
        sg.JointPosterior(_inverse_gamma(), _lik, y, 5)
    with pytest.raises(TypeError, match="likelihood_fn"):
        sg.JointPosterior(tfd.JointDistributionNamed(dict(v=_inverse_gamma())), None, y, 5)
    with pytest.raises(ValueError, match="observed"):
        sg.JointPosterior(tfd.JointDistributionNamed(dict(v=_inverse_gamma())), _lik, {"y": y}, 5)
    post = sg.JointPosterior(tfd.JointDistributionNamed(dict(v=_inverse_gamma())), _lik, y, 5)
    with pytest.raises(ValueError, match="method"):
        post.initial_state(method="mode")


def test_bad_arguments_name_the_argument():
    y = _y(10).astype(np.float32)
    prior = tfd.JointDistributionNamedAutoBatched(
        dict(mu=tfd.Normal(0.0, 1.0), sigma=tfd.HalfNormal(1.0))
    )

    def lik(p, batch):
        return tfd.Normal(p["mu"][..., None], p["sigma"][..., None])

    for bijector in ["exp", [tfb.Identity(), tfb.Exp()], tfb.Exp()]:
        with pytest.raises(ValueError, match="`bijector`"):
            sg.JointPosterior(prior, lik, y, 5, bijector=bijector)
    custom = tfb.JointMap(dict(mu=tfb.Identity(), sigma=tfb.Softplus()))
    assert sg.JointPosterior(prior, lik, y, 5, bijector=custom).constrain(
        [tf.zeros([]), tf.zeros([])]
    )["sigma"].numpy() == pytest.approx(np.log(2.0))
    with pytest.raises(ValueError, match=r"`observed`.*\['y'\]"):
        sg.JointPosterior(prior, lik, {"y": y}, 5, observed="z")
    with pytest.raises(ValueError, match="`observed`"):
        sg.JointPosterior(prior, lik, (y, y), 5, observed=2)

    post = sg.JointPosterior(prior, lik, y, 5)
    for n in [0, -2, 2.5, "4"]:
        with pytest.raises(ValueError, match="`num_chains`"):
            post.initial_state(n, seed=1)
    assert [p.shape.as_list() for p in post.initial_state(np.int64(3), seed=1)] == [[3], [3]]
    with pytest.raises(ValueError, match=r"`values`.*missing \['sigma'\]"):
        post.unconstrain({"mu": tf.zeros([2])})
    with pytest.raises(ValueError, match=r"`values`.*unexpected \['tau'\]"):
        post.unconstrain({"mu": tf.zeros([2]), "sigma": tf.ones([2]), "tau": tf.ones([2])})
    with pytest.raises(ValueError, match="`values`"):
        post.unconstrain([tf.zeros([2])])
    with pytest.raises(ValueError, match="`state`"):
        post.constrain([tf.zeros([2])] * 3)
    with pytest.raises(ValueError, match="`centre`"):
        post.control_variates(centre=[tf.zeros([])])

    kernel = sg.SGLD(post.estimator, 1e-3)
    as_dict = {"mu": tf.zeros([4]), "sigma": tf.zeros([4])}
    for state in ([tf.zeros([4])], [tf.zeros([4])] * 3, as_dict):
        with pytest.raises(ValueError, match="`init_state`"):
            kernel.bootstrap_results(state)
    with pytest.raises(ValueError, match="`init_state`"):
        sg.SGLD(post.with_batch_size(2), 1e-3).bootstrap_results([tf.zeros([4])])
    kernel.bootstrap_results(post.initial_state(4, seed=1))
    # Parts whose chain dimensions disagree are named (they were TF broadcasting errors).
    for state in ([tf.zeros([4]), tf.zeros([3])], [tf.zeros([4, 2]), tf.zeros([4])]):
        with pytest.raises(ValueError, match="`init_state`: the parts must share their chain"):
            kernel.bootstrap_results(state)
    events = sg.JointPosterior(
        tfd.JointDistributionNamedAutoBatched(
            dict(mu=tfd.Normal(0.0, 1.0), w=tfd.Sample(tfd.Normal(0.0, 1.0), 3))
        ),
        lambda p, b: tfd.Normal(p["mu"][..., None], 1.0), y, 5,
    )
    ev_kernel = sg.SGLD(events.estimator, 1e-3)
    ev_kernel.bootstrap_results([tf.zeros([4]), tf.zeros([4, 3])])  # chains [4] for both
    with pytest.raises(ValueError, match=r"part 'w' has shape \[\], fewer dimensions"):
        ev_kernel.bootstrap_results([tf.zeros([]), tf.zeros([3])[0]])
    with pytest.raises(ValueError, match="share their chain"):
        ev_kernel.bootstrap_results([tf.zeros([4]), tf.zeros([2, 3])])
