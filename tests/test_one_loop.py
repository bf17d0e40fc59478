"""One loop, one seed rule: the same kernel and seed give the same chain everywhere.

Step ``t`` of a chain takes ``stateless_fold_in(seed, t)`` in every entry point
(``tfp_sgmcmc.loop``), so ``sg.sample_chain``, the driver's ``ChunkedChain`` with any
chunk size, the streamed driver ``sample`` interrupted and resumed, a tuner arm's first
round, the final draws from a tuner's compiled program (``ArmRunner.sample``) and
``sg.sample_posterior``'s final chains (run in several calls; SGLD's, or MALA's at full
batches) and ``BayesianModel.fit``'s sampler (the library's SGLD on its
``KerasPosterior``, fed blocks of minibatches by the host, in a graph or under XLA: ``fit``
always compiles its steps, as ``model.fit`` does, so it has no eager mode) all return one
chain. The programs differ (burn-in split off or not, thinning, what they record), so XLA
may fuse a step's arithmetic differently in each: the chains are compared to a rounding
tolerance, and a changed seed (the power check) must miss it by far.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg
from tfp_sgmcmc import tuning as tu
from tfp_sgmcmc.driver import ChunkedChain, chunks, sample, sampler
from tfp_sgmcmc.loop import chain_seed, run_steps, step_seed
from tfp_sgmcmc.models.logistic_regression import log_likelihood, log_prior
from tfp_sgmcmc.tuning.runner import ArmRunner

N, D, BATCH, STEP = 400, 3, 10, 2e-3
SEED = 5  # an int seed maps to the pair [0, 5]
NUM, BURNIN, THIN = 24, 6, 2  # draw r: the state after BURNIN + (r + 1)·THIN steps
TOL = dict(rtol=1e-5, atol=1e-6)


def _estimator(scheme: str = "epoch", batch: int = BATCH) -> sg.MinibatchEstimator:
    rng = np.random.default_rng(4)
    x = rng.normal(size=(N, D)).astype(np.float32)
    y = (rng.uniform(size=N) < 1.0 / (1.0 + np.exp(-x @ np.ones(D)))).astype(np.float32)
    return sg.MinibatchEstimator(
        log_likelihood, sg.InMemoryData((x, y), scheme=scheme), batch, log_prior
    )


def _sample_chain(kernel, seed) -> np.ndarray:
    """``sg.sample_chain`` laid out as the driver's draws (see NUM, BURNIN, THIN)."""

    @tf.function(jit_compile=True, autograph=False)
    def run(seed):
        return sg.sample_chain(
            NUM,
            tf.zeros([D]),
            kernel=kernel,
            seed=seed,
            num_burnin_steps=BURNIN + THIN - 1,
            num_steps_between_results=THIN - 1,
        )

    return run(tf.constant(chain_seed(seed))).numpy()


@pytest.fixture(scope="module")
def kernel():
    return sg.SGLD(_estimator(), STEP)


@pytest.fixture(scope="module")
def reference(kernel):
    return _sample_chain(kernel, SEED)


def test_seed_rule_is_fold_in_of_the_step_index():
    seed = chain_seed(SEED)
    np.testing.assert_array_equal(seed, [0, 5])
    with pytest.raises(ValueError, match=r"`seed` must be .*\[0, 2\*\*31\)"):
        chain_seed(2**31 + 3)  # more than 31 bits: refused, not cut to another int's pair
    want = tf.random.experimental.stateless_fold_in(tf.constant([0, 5]), 17, alg="philox")
    np.testing.assert_array_equal(step_seed(seed, 17), want)
    np.testing.assert_array_equal(chunks.chunk_seed(SEED, 17), want)


def test_power_a_changed_seed_is_another_chain(kernel, reference):
    other = _sample_chain(kernel, SEED + 1)
    assert np.abs(other - reference).max() > 1e3 * TOL["atol"]
    assert float(np.abs(np.diff(reference, axis=0)).max()) > 1e-3  # the chain moves


@pytest.mark.parametrize("chunk_size", [1, 5, 7, NUM])
def test_chunked_chain_with_any_chunk_size(kernel, reference, chunk_size):
    out = ChunkedChain(kernel, chunk_size=chunk_size, thin=THIN).run(
        tf.zeros([D]), NUM, seed=SEED, num_burnin_steps=BURNIN
    )
    np.testing.assert_allclose(out.states, reference, **TOL)


def test_streamed_driver_interrupted_and_resumed(kernel, reference, tmp_path, monkeypatch):
    args = dict(
        num_samples=NUM,
        seed=SEED,
        thin=THIN,
        num_burnin_steps=BURNIN,
        chunk_size=5,
        progress=False,
        run_dir=str(tmp_path / "run"),
    )
    real_run_chunk, calls = sampler._run_chunk, []

    def interrupt_third(run, program, index):
        calls.append(index)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real_run_chunk(run, program, index)

    monkeypatch.setattr(sampler, "_run_chunk", interrupt_third)
    with pytest.raises(KeyboardInterrupt):
        sample(kernel, tf.zeros([D]), **args)
    monkeypatch.setattr(sampler, "_run_chunk", real_run_chunk)
    run = sample(kernel, tf.zeros([D]), resume=True, **args)
    assert run.complete
    np.testing.assert_allclose(run.samples(), reference, **TOL)


def test_tuner_arm_first_round_and_final_draws(reference):
    est = _estimator()
    runner = ArmRunner(
        lambda step_size: sg.SGLD(est, step_size),
        [{"step_size": 1e-2}, {"step_size": STEP}],
        tf.zeros([D]),
        thin=THIN,
        seed=SEED,
        max_steps_per_call=10,  # the round runs in several calls
    )
    # Arm 1's chain has the seed [SEED, 1]; sample_chain with that seed is its chain.
    out = runner.run(1, BURNIN + NUM * THIN, tu.steps(1))
    want = _sample_chain(sg.SGLD(est, STEP), [SEED, 1])
    # The arm keeps every THIN-th state from its start: the driver's draws after
    # BURNIN steps are its draws from BURNIN // THIN on.
    got = out.samples[0][BURNIN // THIN :]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, **TOL)

    # The final draws from the arm's tuning program (run in calls of at most its
    # 6-slot buffer) are sample_chain's chain from the same start and seed; the
    # program is not traced again.
    traces = runner.num_traces
    final = runner.sample(
        1, NUM, SEED, initial_state=tf.zeros([D]), num_burnin_steps=BURNIN + THIN - 1, thin=THIN
    )
    assert runner.num_traces == traces == 1
    assert final.steps == BURNIN + THIN - 1 + (NUM - 1) * THIN + 1 and not final.diverged
    np.testing.assert_allclose(final.draws[0], reference, **TOL)
    np.testing.assert_allclose(final.final_state[0], reference[-1], **TOL)


def test_loop_records_the_stated_steps_and_folds_the_step_index(kernel):
    """Slot j holds the state after loop step (j + 1)·thin - offset - 1, each step
    taking stateless_fold_in(seed, first_step + i), in a graph and eagerly."""
    init = tf.zeros([D])
    seed = tf.constant([0, SEED], tf.int32)
    state, results = init, kernel.bootstrap_results(init)
    visited = []
    for t in range(11, 11 + 9):
        state, results = kernel.one_step(state, results, seed=step_seed(seed, t))
        visited.append(state.numpy())
    for thin, offset in [(1, 0), (3, 0), (3, 2)]:
        slots = (offset + 9 - 1) // thin + 1
        out = run_steps(
            kernel,
            init,
            kernel.bootstrap_results(init),
            9,
            seed,
            first_step=11,
            thin=thin,
            offset=offset,
        )
        kept = [(j + 1) * thin - offset - 1 for j in range(slots)]
        full = [k for k in kept if k < 9]
        np.testing.assert_allclose(
            out.draws.numpy()[: len(full)], np.stack([visited[k] for k in full]), **TOL
        )
        assert int(out.num_steps) == 9
    np.testing.assert_allclose(out.state, visited[-1], **TOL)


def test_one_program_serves_every_seed_and_first_step():
    """The chunk program's seed and first step are runtime inputs: one XLA program
    (compared as HLO) for every call, also for the "random_window" minibatch whose
    slice start is drawn from the step's seed."""
    kernel = sg.SGLD(_estimator("random_window"), STEP)
    program = chunks.compile_chunk(kernel, "sample", 4, thin=2)
    init = tf.zeros([D])
    results = kernel.bootstrap_results(init)
    calls = [
        (init, results, {}, tf.constant(chain_seed(s), tf.int32), tf.constant(t, tf.int32))
        for s, t in [(1, 0), (2, 8), (3, 40), (1, 1000)]
    ]
    hlo = {program.fn.experimental_get_compiler_ir(*a)(stage="hlo") for a in calls}
    assert len(hlo) == 1
    first = chunks.run_chunk(program, init, results, {}, 1, 0).draws
    again = chunks.run_chunk(program, init, results, {}, 1, 8).draws
    assert not np.allclose(first, again)  # the first step reaches the seeds


@pytest.mark.parametrize("metropolis_adjust", [True, False], ids=["mala", "sgld"])
def test_sample_posterior_draws_are_the_loops_chain(metropolis_adjust):
    """``sample_posterior``'s final chains, run in several calls (its first draws, then
    the chunks that lengthen the run), are ``sample_chain``'s chain for its kernel (MALA
    at full batches, or SGLD), its ``init_state`` and its seed; another seed is another
    chain (the power check)."""
    res = sg.sample_posterior(
        _estimator(batch=N), 8, num_chains=2, seed=SEED, initial_state=tf.zeros([D]),
        step_sizes=[0.1], adapt=False, tuning_steps=20, max_gradient_evaluations=1500,
        metropolis_adjust=metropolis_adjust, progress=False,
    )
    kind = "MetropolisAdjustedLangevinAlgorithm" if metropolis_adjust else "SGLD"
    assert type(res.kernel).__name__ == kind
    thin = res.num_steps_between_results
    assert len(res.whitened) > 8  # the run was lengthened: more than one call

    @tf.function(jit_compile=True, autograph=False)
    def run(seed):
        return sg.sample_chain(
            len(res.whitened),
            tf.constant(res.init_state),
            kernel=res.kernel,
            seed=seed,
            num_burnin_steps=res.num_burnin_steps + thin - 1,
            num_steps_between_results=thin - 1,
        )

    np.testing.assert_allclose(run(tf.constant(chain_seed(SEED))), res.whitened, **TOL)
    other = run(tf.constant(chain_seed(SEED + 1))).numpy()
    assert np.abs(other - res.whitened).max() > 1e3 * TOL["atol"]


class _CountingKernel(tfp.mcmc.TransitionKernel):
    """``x ← x + 1``; the step that reaches ``x = 5`` alone flags ``diverged``."""

    is_calibrated = True

    def one_step(self, current_state, previous_kernel_results, seed=None):
        x = current_state + 1.0
        return x, _Flag(tf.equal(x, 5.0))

    def bootstrap_results(self, init_state):
        return _Flag(tf.constant(False))


class _Flag(NamedTuple):
    diverged: tf.Tensor


@pytest.mark.parametrize("mode", ["none", "track", "stop"])
def test_a_divergence_between_kept_steps_is_tracked_or_stops_the_loop(mode):
    """Thinned by 4, the kept states are x = 4, 8, 12: the flag at x = 5 is on a step no
    trace records. ``track_divergence`` reports it and runs on; ``stop_on_divergence``
    stops after it; with neither the loop cannot know (the power check)."""
    out = run_steps(
        _CountingKernel(), tf.constant(0.0), _Flag(tf.constant(False)), 12, None, thin=4,
        track_divergence=mode == "track", stop_on_divergence=mode == "stop",
    )
    steps = 5 if mode == "stop" else 12
    assert int(out.num_steps) == steps and bool(out.diverged) == (mode != "none")
    np.testing.assert_array_equal(out.draws.numpy()[: steps // 4], [4.0, 8.0, 12.0][: steps // 4])


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_bayesian_model_samples_the_loops_chain(jit_compile):
    """``BayesianModel.fit``'s MAP search is ``sample_chain``'s chain for its Adam kernel
    (``AdamAscent``) from the model's weights, fed the epoch's batches; its draws are
    ``sample_chain``'s chain for its sampler's kernel (SGLD on the preconditioned
    posterior), the start ``w = 0`` (the MAP) and its seed, fed the batches ``fit`` fed:
    the first batch for the bootstrap, then one per step (unshuffled here, so their order
    is known). Another seed is another chain, and another batch order another MAP (the
    power checks)."""
    import keras

    from tfp_sgmcmc.keras import BayesianModel

    n, batch, epochs = 64, 16, 2
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 4)).astype(np.float32)
    y = (x[:, 0] - x[:, 1] > 0).astype(np.int64)
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(5, activation="tanh"),
                              keras.layers.Dense(2)])
    steps = epochs * n // batch
    theta0 = np.concatenate([np.reshape(w, [-1]) for w in model.get_weights()])
    bm = BayesianModel(model, num_draws=steps, seed=SEED, jit_compile=jit_compile)
    bm.fit(x, y, batch_size=batch, epochs=1, sample_epochs=epochs, shuffle=False, verbose=0)

    # The MAP search (one epoch: four steps) is the library's Adam kernel in its loop.
    adam = bm._programs[(False, jit_compile)]
    adam.learning_rate.assign(bm.learning_rate)  # the curvature pass left it at 0
    rows = np.stack([np.arange(k * batch, (k + 1) * batch) for k in range(n // batch)])
    fed = (tf.constant(x[rows]), tf.constant(y[rows]), tf.ones(rows.shape, tf.float32))

    @tf.function(jit_compile=True, autograph=False)
    def map_search():
        with adam.data.feeding(fed):
            return sg.sample_chain(n // batch, [tf.constant(theta0)], kernel=adam.kernel,
                                   seed=tf.constant(chain_seed(SEED)))[0][-1]

    np.testing.assert_allclose(map_search().numpy(), bm.sampler.weights(0.0), rtol=1e-4,
                               atol=1e-5)
    kept = bm._flat_draws  # the states after steps 2 … 8 (a burn-in of one step)
    assert kept.shape[0] == steps - 1

    order = [0] + [k % (n // batch) for k in range(steps)]  # the bootstrap's, then each step's
    rows = np.stack([np.arange(k * batch, (k + 1) * batch) for k in order])
    block = (tf.constant(x[rows]), tf.constant(y[rows]), tf.ones(rows.shape, tf.float32))
    sampler = bm.sampler

    def chain(seed):
        @tf.function(jit_compile=True, autograph=False)
        def run():
            with sampler.data.feeding(block):
                return sg.sample_chain(
                    steps, tf.zeros([sampler.dimension]), kernel=sampler.kernel,
                    seed=tf.constant(chain_seed(seed)),
                )

        return np.stack([sampler.weights(w) for w in run().numpy()[1:]])

    np.testing.assert_allclose(chain(SEED), kept, rtol=1e-4, atol=1e-5)
    other = chain(SEED + 1)
    assert np.abs(other - kept).max() > 1e3 * 1e-5
