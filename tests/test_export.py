"""ArviZ export: groups, shapes, and agreement with our own means and ESS."""

from __future__ import annotations

import collections
import json
import sys

import numpy as np
import pytest
import tensorflow as tf

import tfp_sgmcmc as sg
from tfp_sgmcmc.driver import sample
from tfp_sgmcmc.export import DIAGNOSTICS_FILE, to_arviz

az = pytest.importorskip("arviz")  # the optional extra; installed in CI with [arviz]

CHAINS, D, DRAWS = 4, 3, 2000


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    # SGLD on N(0, diag(1, 4, 9)) with noisy gradients: autocorrelated chains.
    var = tf.constant([1.0, 4.0, 9.0], tf.float64)
    est = sg.NoisyGradientEstimator(lambda x: -0.5 * tf.reduce_sum(x**2 / var, -1), 0.2)
    return sample(
        sg.SGLD(est, 0.3),
        tf.zeros([CHAINS, D], tf.float64),
        DRAWS,
        str(tmp_path_factory.mktemp("export") / "run"),
        seed=5,
        thin=2,
        chunk_size=1000,
        num_burnin_steps=200,
        jit_compile=False,
        progress=False,
        metadata={"param_names": ["beta"]},
    )


def test_groups_and_shapes(run):
    idata = to_arviz(run)
    assert {"posterior", "sample_stats", "sgmcmc_diagnostics"} <= set(idata.groups())
    post = idata.posterior["beta"]
    assert post.shape == (CHAINS, DRAWS, D)
    s = run.samples()  # [draws, chains, d]
    np.testing.assert_array_equal(post.values, np.moveaxis(s, 1, 0))
    st = idata.sample_stats
    np.testing.assert_array_equal(st["lp"].values, run.trace()["target_log_prob"].T)
    assert st["step_size"].shape == (CHAINS, DRAWS) and np.allclose(st["step_size"], 0.3)
    assert st["diverged"].dtype == bool and not st["diverged"].values.any()
    assert idata.posterior.attrs["kernel"] == "SGLD"


def test_summary_matches_our_means_and_ess(run):
    idata = to_arviz(run)
    s = run.samples()
    summary = az.summary(idata, round_to="none")
    # Means: the same numbers (pooled over chains and draws).
    np.testing.assert_allclose(summary["mean"].values, s.mean(axis=(0, 1)), rtol=1e-10)
    ours = idata.sgmcmc_diagnostics["beta_ess"].values
    expected = np.asarray(
        sg.diagnostics.effective_sample_size(tf.constant(s), cross_chain_dims=[1])
    )
    np.testing.assert_allclose(ours, expected)
    # Different estimators (Geyer IPS vs ArviZ's split-chain / rank-normalized):
    # they agree to Monte Carlo error, ~10-20% at a few hundred effective draws.
    ess_mean = az.ess(idata, method="mean")["beta"].values
    ess_bulk = summary["ess_bulk"].values
    assert np.all(ours > 50) and np.all(ours < CHAINS * DRAWS)
    np.testing.assert_allclose(ours, ess_mean, rtol=0.15)
    np.testing.assert_allclose(ours, ess_bulk, rtol=0.2)
    # Power: ESS of a different (more autocorrelated) chain does not pass as this one.
    assert not np.allclose(ours, ess_mean / 2, rtol=0.15)


def test_diagnostics_file_reducers_and_burn(run, tmp_path):
    with open(f"{run.run_dir}/{DIAGNOSTICS_FILE}", "w") as f:
        json.dump({"ksd": 0.25, "fssd": 0.01, "note": "x"}, f)
    try:
        idata = to_arviz(run.run_dir, burn=500, step=5)
    finally:
        import os

        os.remove(f"{run.run_dir}/{DIAGNOSTICS_FILE}")
    assert idata.posterior["beta"].shape == (CHAINS, (DRAWS - 500) // 5, D)
    assert idata.sgmcmc_diagnostics.attrs["ksd"] == 0.25
    assert float(idata.sgmcmc_diagnostics["ksd"]) == 0.25
    assert idata.posterior.attrs["diagnostic_fssd"] == 0.01


def test_raw_samples_list_state_and_errors(monkeypatch):
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(100, 2, 3)), rng.normal(size=(100, 2))
    idata = to_arviz(
        [a, b], trace={"target_log_prob": rng.normal(size=(100, 2)), "step_size": np.full(100, 0.1)}
    )
    assert idata.posterior["theta_0"].shape == (2, 100, 3)
    assert idata.posterior["theta_1"].shape == (2, 100)
    single = to_arviz(a, batch_ndims=0, var_names=["w"], include_ess=False)
    assert single.posterior["w"].shape == (1, 100, 2, 3)
    with pytest.raises(ValueError, match="`var_names`"):
        to_arviz([a, b], var_names=["x"], batch_ndims=1)
    with pytest.raises(ValueError, match="`step`"):
        to_arviz(a, step=0)
    monkeypatch.setitem(sys.modules, "arviz", None)
    with pytest.raises(ImportError, match=r"tfp-sgmcmc\[arviz\]"):
        to_arviz(a, batch_ndims=1)


def test_raw_samples_of_four_chains_are_never_one_chain():
    """``[draws, 4]`` from 4 chains became one chain of a 4-vector (R-hat lost), silently."""
    rng = np.random.default_rng(1)
    draws = rng.normal(size=(200, 4))  # 4 chains of a scalar
    with pytest.raises(ValueError, match="cannot tell the chains.*batch_ndims"):
        to_arviz(draws)
    by_arg = to_arviz(draws, batch_ndims=1, include_ess=False)
    assert by_arg.posterior["theta"].shape == (4, 200)
    # From the final kernel results of the run (one target_log_prob per chain) ...
    results = collections.namedtuple("R", ["target_log_prob"])(np.zeros(4))
    wrapped = collections.namedtuple("W", ["inner_results"])(results)
    for kr in (results, wrapped):
        idata = to_arviz(draws, kernel_results=kr, include_ess=False)
        assert idata.posterior["theta"].shape == (4, 200)
    # ... or from the traced log-density (one per draw and chain).
    idata = to_arviz(draws, trace={"target_log_prob": np.zeros((200, 4))}, include_ess=False)
    assert idata.posterior["theta"].shape == (4, 200)
    # One chain of a vector must be said so; contradictions are refused.
    assert to_arviz(draws, batch_ndims=0, include_ess=False).posterior["theta"].shape == (1, 200, 4)
    with pytest.raises(ValueError, match="disagree"):
        to_arviz(draws, batch_ndims=0, kernel_results=results)
    # [draws] alone is unambiguous.
    assert to_arviz(draws[:, 0], include_ess=False).posterior["theta"].shape == (1, 200)


def test_raw_samples_that_disagree_are_refused():
    """Parts and traces of different lengths or chains were aligned by padding with NaN."""
    a = np.ones((10, 3))
    cases = [
        (([a, np.ones((8, 3))],), dict(batch_ndims=1), "disagree on"),
        (([a, np.ones((10, 4))],), dict(batch_ndims=1), "disagree on"),
        ((a,), dict(batch_ndims=1, trace={"target_log_prob": np.zeros((7, 3))}),
         r"trace\['target_log_prob'\]"),
        ((np.ones((10, 3, 2)),), dict(trace={"target_log_prob": np.zeros((10, 4))}),
         r"trace\['target_log_prob'\]"),
        ((a,), dict(batch_ndims=1, trace={"step_size": np.zeros(9)}), r"trace\['step_size'\]"),
        ((np.ones(10),), dict(batch_ndims=2), "`batch_ndims` = 2"),
        ((a,), dict(kernel_results=collections.namedtuple("R", ["target_log_prob"])(np.zeros(4))),
         "kernel_results.target_log_prob"),
        (({"a": a},), dict(batch_ndims=1), "`run_or_samples` must be a numeric array"),
        (([a, "x"],), dict(batch_ndims=1), r"`run_or_samples\[1\]`"),
        (([],), {}, "empty"),
    ]
    for args, kw, match in cases:
        with pytest.raises(ValueError, match=match):
            to_arviz(*args, **kw)
    # A step size shared by the chains (one per draw) is still broadcast.
    idata = to_arviz(a, batch_ndims=1, include_ess=False, trace={"step_size": np.full(10, 0.1)})
    assert idata.sample_stats["step_size"].shape == (3, 10)


def test_tfp_hmc_results_give_the_chains():
    import tensorflow_probability as tfp

    kernel = tfp.mcmc.HamiltonianMonteCarlo(lambda x: -0.5 * tf.reduce_sum(x**2, -1), 0.5, 3)
    results = kernel.bootstrap_results(tf.zeros([4, 2]))  # target_log_prob in accepted_results
    idata = to_arviz(np.zeros((20, 4, 2)), kernel_results=results, include_ess=False)
    assert dict(idata.posterior["theta"].sizes) == {"chain": 4, "draw": 20, "theta_dim_0": 2}


def test_a_diverged_run_exports_and_saves(tmp_path):
    """Non-finite draws made the ESS step raise (naming `samples`); a diagnostics.json
    boolean made ``to_netcdf`` fail."""
    rng = np.random.default_rng(2)
    draws = rng.normal(size=(30, 2, 3))
    draws[20:, 1] = np.nan  # chain 1 diverged at draw 20
    div = np.zeros((30, 2), bool)
    div[20:, 1] = True
    with pytest.warns(UserWarning, match="non-finite draws"):
        idata = to_arviz(draws, batch_ndims=1, trace={"diverged": div},
                         diagnostics={"independent_chains": True, "ksd": 0.5})
    assert np.all(np.isnan(idata.sgmcmc_diagnostics["theta_ess"].values))
    assert idata.sample_stats["diverged"].values.sum() == 10
    assert idata.posterior.attrs["diagnostic_independent_chains"] == 1
    idata.to_netcdf(str(tmp_path / "x.nc"))
    back = az.from_netcdf(str(tmp_path / "x.nc"))
    assert back.posterior["theta"].shape == (2, 30, 3)
