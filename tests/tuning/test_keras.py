"""Keras 3 models as targets (stateless_call), tf.data, predictive helpers."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from tfp_sgmcmc.keras import KerasPosterior, posterior_predictive_metrics


@pytest.fixture(scope="module")
def setup():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((60, 3)).astype(np.float32)
    y = rng.integers(0, 4, 60).astype(np.int32)
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(5, activation="tanh"),
                              keras.layers.Dense(4)])
    return x, y, model, KerasPosterior(model, (x, y), prior_scale=2.0)


def _numpy_log_post(ws, x, y, scale):
    w1, b1, w2, b2 = [np.asarray(w, np.float64) for w in ws]
    h = np.tanh(x @ w1 + b1)
    z = h @ w2 + b2
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    ll = logp[np.arange(len(y)), y].sum()
    return ll - 0.5 * sum(np.sum(w**2) for w in (w1, b1, w2, b2)) / scale**2


def test_log_density_and_gradient_match_numpy(setup):
    x, y, model, post = setup
    ws = post.init_state()
    assert [tuple(w.shape) for w in ws] == [(3, 5), (5,), (5, 4), (4,)]
    est = post.estimator(batch_size=60)  # full batch: exact
    full = est.full_log_prob_and_gradient(ws)
    ref = _numpy_log_post(ws, x.astype(np.float64), y, 2.0)
    np.testing.assert_allclose(full.target_log_prob.numpy(), ref, rtol=1e-5)
    # Finite-difference check of one gradient entry (float64 numpy reference).
    eps = 1e-4
    wp = [w.numpy().astype(np.float64) for w in ws]
    wp[2][1, 3] += eps
    wm = [w.numpy().astype(np.float64) for w in ws]
    wm[2][1, 3] -= eps
    fd = (_numpy_log_post(wp, x, y, 2.0) - _numpy_log_post(wm, x, y, 2.0)) / (2 * eps)
    np.testing.assert_allclose(full.grads_target_log_prob[2].numpy()[1, 3], fd, rtol=1e-3)
    # Leading chain dims: a block of 3 weight sets gives 3 log-densities.
    block = [tf.stack([w, w * 0.5, w * 0.0]) for w in ws]
    lp = est.full_log_prob_and_gradient(block).target_log_prob.numpy()
    assert lp.shape == (3,)
    np.testing.assert_allclose(lp[0], ref, rtol=1e-5)
    np.testing.assert_allclose(lp[2], 60 * np.log(0.25), rtol=1e-5)


def test_sgld_samples_a_keras_model_under_xla(setup):
    x, y, model, post = setup
    kernel = sg.SGLD(post.estimator(batch_size=20), 1e-3)

    @tf.function(jit_compile=True)
    def run(seed):
        return tfp.mcmc.sample_chain(50, post.init_state(), kernel=kernel,
                                     trace_fn=lambda _, r: r.diverged, seed=seed)

    samples, div = run(tf.constant([1, 2]))
    assert [s.shape[0] for s in samples] == [50] * 4
    assert not div.numpy().any()
    m = posterior_predictive_metrics(post, [s.numpy() for s in samples], x, y)
    assert 0 <= m["accuracy"] <= 1 and 0 <= m["ece"] <= m["mce"] <= 1 and m["log_loss"] > 0


def test_tf_data_pipeline_in_graph_mode(setup):
    x, y, model, _ = setup
    ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(60, seed=0).batch(
        15, drop_remainder=True)
    post = KerasPosterior(model, ds, num_examples=60)
    est = post.estimator()
    assert est.batch_size == 15
    kernel = sg.SGLD(est, 1e-3)

    @tf.function
    def run(seed):
        return tfp.mcmc.sample_chain(8, post.init_state(), kernel=kernel, trace_fn=None,
                                     seed=seed)

    samples = run(tf.constant([3, 4]))
    assert np.all(np.isfinite(samples[0].numpy()))
    with pytest.raises(ValueError, match="`num_examples`"):
        KerasPosterior(model, ds)
    with pytest.raises(ValueError, match="`likelihood`"):
        KerasPosterior(model, (x, y), likelihood="poisson")


# --------------------------------------------------------------------------- #
# The contract: logits, integer labels, any samples (no silent wrong answers)
# --------------------------------------------------------------------------- #
def _softmax_model(final):
    """``final`` is a function building the last layers: built after the seed, their
    initial weights do not depend on what ran before in the process (layers made at
    collection time drew their initializers' seeds then)."""
    keras.utils.set_random_seed(1)
    return keras.Sequential(
        [keras.Input((3,)), keras.layers.Dense(5, activation="tanh"), *final()]
    )


@pytest.mark.parametrize(
    "final",
    [
        lambda: [keras.layers.Dense(4, activation="softmax")],
        lambda: [keras.layers.Dense(4), keras.layers.Softmax()],
        lambda: [keras.layers.Dense(4), keras.layers.Activation("softmax")],
    ],
    ids=["dense_softmax", "softmax_layer", "activation_layer"],
)
def test_final_softmax_is_refused_unless_from_logits_says(setup, final):
    """A softmax output read as logits gave accuracy 0.96 with ECE 0.75, silently: left
    unsaid it is refused; said (``from_logits``), the reading stands, as in
    ``BayesianModel``."""
    x, y, _, ref = setup
    model = _softmax_model(final)
    with pytest.raises(ValueError, match="applies softmax.*from_logits=False"):
        KerasPosterior(model, (x, y))
    as_logits = KerasPosterior(model, (x, y), from_logits=True, prior_scale=2.0)
    post = KerasPosterior(model, (x, y), from_logits=False, prior_scale=2.0)
    # Same weights without the softmax, read as logits: the same log-density.
    logits_model = keras.Sequential(
        [keras.Input((3,)), keras.layers.Dense(5, activation="tanh"), keras.layers.Dense(4)]
    )
    logits_model.set_weights(model.get_weights())
    lp = post.estimator(60).full_log_prob_and_gradient(post.init_state()).target_log_prob
    lp_ref = (
        KerasPosterior(logits_model, (x, y), prior_scale=2.0)
        .estimator(60)
        .full_log_prob_and_gradient(post.init_state())
        .target_log_prob
    )
    np.testing.assert_allclose(lp.numpy(), lp_ref.numpy(), rtol=1e-5)
    # Told to, the probabilities are read as logits: log_softmax of the softmax.
    probs = model(x).numpy().astype(np.float64)
    shifted = probs - np.log(np.exp(probs).sum(1, keepdims=True))
    lp_logits = as_logits.estimator(60).full_log_prob_and_gradient(post.init_state())
    expected = shifted[np.arange(len(y)), y].sum() - sum(
        float(np.sum(np.square(w))) for w in model.get_weights()
    ) / (2 * 2.0**2)
    np.testing.assert_allclose(lp_logits.target_log_prob.numpy(), expected, rtol=1e-4)
    assert abs(lp_logits.target_log_prob.numpy() - lp.numpy()) > 1.0
    samples = [w[None] for w in post.init_state()]
    m = posterior_predictive_metrics(post, samples, x, y)
    m_ref = posterior_predictive_metrics(
        KerasPosterior(logits_model, (x, y)), samples, x, y
    )
    np.testing.assert_allclose(m["log_loss"], m_ref["log_loss"], rtol=1e-5)
    np.testing.assert_allclose(m["ece"], m_ref["ece"], rtol=1e-5)


def test_final_sigmoid_with_bernoulli_is_refused(setup):
    x, _, _, _ = setup
    y = (x[:, 0] > 0).astype(np.int32)
    model = _softmax_model(lambda: [keras.layers.Dense(1, activation="sigmoid")])
    with pytest.raises(ValueError, match="applies sigmoid"):
        KerasPosterior(model, (x, y), likelihood="bernoulli")
    post = KerasPosterior(model, (x, y), likelihood="bernoulli", from_logits=False)
    assert np.isfinite(post.estimator(60).full_log_prob_and_gradient(post.init_state())[0])


def test_labels_one_hot_converted_others_refused(setup):
    x, y, model, post = setup
    one_hot = np.eye(4, dtype=np.float32)[y]
    lp = post.estimator(60).full_log_prob_and_gradient(post.init_state()).target_log_prob
    post_oh = KerasPosterior(model, (x, one_hot), prior_scale=2.0)
    lp_oh = post_oh.estimator(60).full_log_prob_and_gradient(post.init_state()).target_log_prob
    np.testing.assert_allclose(lp_oh.numpy(), lp.numpy(), rtol=1e-6)
    KerasPosterior(model, (x, y.astype(np.float64)))  # float ids are ids
    with pytest.raises(ValueError, match="integer class ids"):
        KerasPosterior(model, (x, y + 0.5))
    with pytest.raises(ValueError, match="one-hot"):
        KerasPosterior(model, (x, one_hot * 0.9))
    with pytest.raises(ValueError, match=r"in \[0, 4\)"):
        KerasPosterior(model, (x, y + 4))


def test_predictive_metrics_take_tensors_and_many_samples(setup):
    """sample_chain's tensors with > max_samples draws raised a TypeError."""
    x, y, _, post = setup
    ws = post.init_state()
    samples = [tf.stack([w + 0.01 * i for i in range(150)]) for w in ws]  # tensors, S = 150
    m = posterior_predictive_metrics(post, samples, x, y)
    m_np = posterior_predictive_metrics(post, [s.numpy() for s in samples], x, y)
    assert m == m_np and 0 <= m["accuracy"] <= 1
    with pytest.raises(ValueError, match="one array per trainable weight"):
        posterior_predictive_metrics(post, samples[:2], x, y)


@pytest.mark.parametrize("as_dict", [False, True], ids=["list", "dict"])
def test_model_with_several_inputs(as_dict):
    """A two-input model: ``x`` as a list or dict of arrays, sampled under XLA, and its
    predictive probabilities; mismatched input rows are refused naming ``data``."""
    from tfp_sgmcmc.keras import predictive_probabilities

    rng = np.random.default_rng(0)
    a, b = keras.Input((3,), name="a"), keras.Input((2,), name="b")
    inputs = {"a": a, "b": b} if as_dict else [a, b]
    keras.utils.set_random_seed(2)
    model = keras.Model(inputs, keras.layers.Dense(2)(keras.layers.Concatenate()([a, b])))
    xa = rng.random((40, 3)).astype(np.float32)
    xb = rng.random((40, 2)).astype(np.float32)
    y = rng.integers(0, 2, 40)
    x = {"a": xa, "b": xb} if as_dict else [xa, xb]
    post = KerasPosterior(model, (x, y))
    # The log-likelihood equals the model's own forward pass on the concatenated inputs.
    w, bias = (np.asarray(t, np.float64) for t in post.init_state())
    z = np.concatenate([xa, xb], 1) @ w + bias
    want = (z - np.log(np.exp(z).sum(-1, keepdims=True)))[np.arange(40), y]
    got = post.log_likelihood_fn(post.init_state(), (x, tf.constant(y)))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5)
    kernel = sg.SGLD(post.estimator(8), 1e-3)

    @tf.function(jit_compile=True)
    def run(seed):
        return tfp.mcmc.sample_chain(20, post.init_state(), kernel=kernel, trace_fn=None,
                                     seed=seed)

    samples = run(tf.constant([1, 2]))
    assert all(np.all(np.isfinite(s.numpy())) for s in samples)
    p = predictive_probabilities(post, [s[-3:] for s in samples], x)
    assert p.shape == (3, 40, 2)
    np.testing.assert_allclose(p.sum(-1), 1.0, rtol=1e-6)
    bad = {"a": xa, "b": xb[:30]} if as_dict else [xa, xb[:30]]
    with pytest.raises(ValueError, match="`data`"):
        KerasPosterior(model, (bad, y))


class _Subclassed(keras.Model):
    """A subclassed model (no ``outputs``) whose ``call`` takes ``**kwargs``."""

    def __init__(self, units: int):
        super().__init__()
        self.dense = keras.layers.Dense(units)

    def call(self, x, **kwargs):
        return self.dense(x)


class _NoTrainingArg(keras.Model):
    def __init__(self, units: int):
        super().__init__()
        self.dense = keras.layers.Dense(units)

    def call(self, x):
        return self.dense(x)


def test_subclassed_model_labels_are_range_checked(setup):
    """Without ``model.outputs`` the class count comes from a forward pass on one row."""
    x, y, _, _ = setup
    model = _Subclassed(4)
    model(x[:2])
    with pytest.raises(ValueError, match=r"in \[0, 4\)"):
        KerasPosterior(model, (x, y + 4))
    KerasPosterior(model, (x, y))


def test_call_without_training_argument_is_evaluated(setup):
    x, y, _, _ = setup
    model = _NoTrainingArg(4)
    model(x[:2])
    post = KerasPosterior(model, (x, y))
    lp = post.estimator(60).full_log_prob_and_gradient(post.init_state()).target_log_prob
    assert np.isfinite(lp.numpy())


def test_several_outputs_need_a_callable_likelihood(setup):
    x, y, _, _ = setup
    inp = keras.Input((3,))
    h = keras.layers.Dense(4)(inp)
    model = keras.Model(inp, [keras.layers.Dense(4)(h), keras.layers.Dense(5)(h)])
    with pytest.raises(ValueError, match="2 outputs.*callable `likelihood`"):
        KerasPosterior(model, (x, y))

    def first_head(labels, outputs):
        logp = tf.nn.log_softmax(outputs[0])
        return tf.gather(logp, tf.cast(labels, tf.int32), axis=-1, batch_dims=1)

    post = KerasPosterior(model, (x, y), likelihood=first_head)
    assert np.isfinite(post.estimator(60).full_log_prob_and_gradient(post.init_state())[0])


def test_data_follow_the_weights_dtype():
    """float64 arrays with a float32 model, and a float64 model with float64 data."""
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((20, 3)), rng.standard_normal(20)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    post = KerasPosterior(model, (x, y), likelihood="gaussian")
    assert post.data.float_dtype == tf.float32
    model64 = keras.Sequential(
        [keras.Input((3,), dtype="float64"), keras.layers.Dense(3, dtype="float64")]
    )
    post64 = KerasPosterior(model64, (x, rng.integers(0, 3, 20)))
    assert post64.data.float_dtype == tf.float64
    kernel = sg.SGLD(post64.estimator(5), 1e-3)
    kernel.bootstrap_results(post64.init_state())


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(noise_scale=0.0), "noise_scale"),
        (dict(noise_scale=-1.0), "noise_scale"),
        (dict(noise_scale=float("nan")), "noise_scale"),
        (dict(prior_scale=None), "prior_scale"),
        (dict(prior_scale="abc"), "prior_scale"),
        (dict(prior_scale=np.array([1.0, 2.0])), "prior_scale"),
        (dict(num_examples=1000), "num_examples"),
    ],
)
def test_bad_scales_and_num_examples_are_refused(setup, kwargs, name):
    x, _, _, _ = setup
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    y = np.zeros(60, np.float32)
    with pytest.raises(ValueError, match=f"`{name}`"):
        KerasPosterior(model, (x, y), likelihood="gaussian", **kwargs)


def test_a_learned_noise_is_the_last_part_with_a_flat_prior(setup):
    """``noise_scale=None``: the state ends with ``log σ``; the density is
    ``Σ log N(y; f, σ²)`` plus the weights' prior only (power: σ = 1 differs)."""
    x, _, _, _ = setup
    keras.utils.set_random_seed(2)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    y = (x @ np.array([1.0, -2.0, 0.5]) + 0.3).astype(np.float32)
    post = KerasPosterior(model, (x, y), likelihood="gaussian", noise_scale=None)
    state = post.init_state()
    assert post.num_parameters == 5 and float(state[-1]) == 0.0
    state[-1] = tf.constant(np.log(0.7), tf.float32)
    lp = post.estimator(60).full_log_prob_and_gradient(state).target_log_prob
    w, b = [np.asarray(v, np.float64) for v in model.get_weights()]
    r = y - (x @ w + b)[:, 0]
    ll = np.sum(-0.5 * (r / 0.7) ** 2 - np.log(0.7) - 0.5 * np.log(2 * np.pi))
    expected = ll - 0.5 * (np.sum(w**2) + np.sum(b**2))
    np.testing.assert_allclose(lp.numpy(), expected, rtol=1e-5)
    fixed = KerasPosterior(model, (x, y), likelihood="gaussian", noise_scale=1.0)
    lp1 = fixed.estimator(60).full_log_prob_and_gradient(fixed.init_state()).target_log_prob
    assert abs(lp1.numpy() - lp.numpy()) > 1.0
    with pytest.raises(ValueError, match="`noise_scale=None`.*gaussian"):
        KerasPosterior(model, (x, y.astype(np.int32) % 2), likelihood="bernoulli",
                       noise_scale=None)


def test_fed_masked_batches_give_the_weighted_mean_over_real_rows(setup):
    """On a ``FedBatches`` source a batch is ``(x, y, mask)``: the estimator's density is
    ``N Σ_i w_i log p(y_i|x_i) / n_real + log p(W)``, padding rows (mask −1) dropped and
    zero-weight rows counted (power: the unmasked sum differs); BatchNormalization's
    statistics move only in training mode."""
    from tfp_sgmcmc.data.fed import FedBatches

    x, y, model, ref = setup
    n, big_n = 8, 600
    mask = np.array([1.0, 2.0, 0.0, 0.5, 1.0, 1.0, -1.0, -1.0], np.float32)
    post = KerasPosterior(model, FedBatches(big_n, n, tf.float32), prior_scale=2.0)
    est = post.estimator(n)
    state = post.init_state()
    block = (x[None, :n], y[None, :n], mask[None])
    with post.data.feeding(tuple(tf.constant(b) for b in block)):
        lp = est(state, est.bootstrap(state), tf.constant([0, 1]))[0]
    z = model(x[:n]).numpy().astype(np.float64)
    logp = (z - np.log(np.exp(z).sum(-1, keepdims=True)))[np.arange(n), y[:n]]
    real = mask >= 0
    mean = np.sum(np.where(mask > 0, mask * logp, 0.0)) / real.sum()
    prior = -0.5 * sum(np.sum(np.square(w)) for w in model.get_weights()) / 4.0
    np.testing.assert_allclose(lp.target_log_prob.numpy(), big_n * mean + prior, rtol=1e-5)
    unmasked = big_n * logp.mean() + prior
    assert abs(unmasked - lp.target_log_prob.numpy()) > 1.0
    # Training mode moves BatchNormalization's statistics; inference mode does not.
    bn = keras.Sequential([keras.Input((3,)), keras.layers.BatchNormalization(),
                           keras.layers.Dense(4)])
    bn_post = KerasPosterior(bn, FedBatches(big_n, n, tf.float32))
    batch = (tf.constant(x[:n]), tf.constant(y[:n]), tf.constant(mask))
    _, moved = bn_post.row_log_likelihood(bn_post.init_state(), batch, training=True)
    _, kept = bn_post.row_log_likelihood(bn_post.init_state(), batch)
    before = [np.asarray(v) for v in bn_post.model_state]
    assert not np.allclose(np.asarray(moved[0]), before[0])
    np.testing.assert_array_equal(np.asarray(kept[0]), before[0])
    bn_post.set_model_state(moved)
    np.testing.assert_array_equal(np.asarray(bn_post.model_state[0]), np.asarray(moved[0]))
    with pytest.raises(ValueError, match="`values`"):
        bn_post.set_model_state(moved[:1])


def test_scheme_and_num_examples_with_a_data_source(setup):
    from tfp_sgmcmc.data import InMemoryData

    x, y, model, _ = setup
    data = InMemoryData((x, y))
    with pytest.raises(ValueError, match="`scheme`"):
        KerasPosterior(model, data, scheme="with_replacement")
    with pytest.raises(ValueError, match="`num_examples`"):
        KerasPosterior(model, data, num_examples=1000)
    post = KerasPosterior(model, data.with_scheme("with_replacement"), num_examples=60)
    assert post.data.scheme == "with_replacement"
    assert KerasPosterior(model, (x, y), scheme="random_window").data.scheme == "random_window"
