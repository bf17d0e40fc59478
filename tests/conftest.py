"""Shared pytest configuration for the tfp-sgmcmc test suite.

* ``--seed=N`` fixes the seed every random test derives its stateless seeds
  from (default 17, as in the style guide); ``--vary-seed`` draws a fresh one
  per session (printed in the header) to probe that statistical tests do not
  pass only for one lucky seed.
* ``TF_CPP_MIN_LOG_LEVEL`` is set before TensorFlow is imported, so C++ log
  lines do not bury the test output.

* ``SLOW_IN_CI``: single tests (or parameter cases) that take the longest and
  check a property a faster CI test also checks; they run in the slow tier
  (``pytest -m slow``) so CI keeps its time budget.

Keep this file small and general: sampler-specific helpers live next to the
tests that use them.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import secrets  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

DEFAULT_SEED = 17

#: The slowest cases of the CI tier (10-60 s each on a 2-core machine), each beside a
#: faster test of the same property that stays in CI (named after the id): marked
#: ``slow`` at collection, so ``-m slow`` runs them and CI does not.
SLOW_IN_CI: dict[str, str] = {
    "tests/estimators/test_transformed.py::test_structured_estimator_through_the_transformed_kernel":
        "the other transformed-kernel tests of the file",
    "tests/estimators/test_distributed.py::test_driver_run_under_strategy_reproduces_single_device_run":
        "test_one_device_strategy_matches_base_and_full_data_is_delegated",
    "tests/diagnostics/test_fssd.py::test_fssd_equals_bruteforce[4096-gaussian]":
        "the smaller cases of test_fssd_equals_bruteforce",
    "tests/diagnostics/test_fssd.py::test_fssd_with_run_time_sample_count_and_one_location":
        "test_fssd_parts_and_default_bandwidth",
    "tests/kernels/test_adaptive.py::test_zero_bias_factor_is_the_base_sampler":
        "test_sample_chain_parts_chains_schedules and the exact-covariance tests",
    "tests/kernels/test_adaptive.py::test_msgld_stationary_covariance_exact[0.01]":
        "test_msgld_stationary_covariance_exact[1.0]",
    "tests/test_data_stream.py::test_chunked_xla_program_follows_the_same_minibatches[fed-xla]":
        "the [fed-xla-started] case",
    "tests/test_data_stream.py::test_mamba_tunes_on_a_tf_data_source":
        "tests/tuning/test_tf_data.py",
    "tests/test_adaptation.py::test_sample_posterior_adapts_on_a_skewed_posterior":
        "the other adaptation tests of the file",
    "tests/diagnostics/test_gradient_noise.py::test_driver_warns_on_the_old_cli_example_settings":
        "test_ratio_matches_the_exact_minibatch_variance",
    "tests/diagnostics/test_gradient_noise.py::test_laplace_reference_is_the_ksd_of_exact_samples":
        "tests/test_laplace_curvature.py",
    "tests/test_flat_chain.py::test_same_chain_as_tfp_sample_chain_under_xla[sghmc-3]":
        "the [sghmc-0] case",
    "tests/test_flat_chain.py::test_same_chain_as_tfp_sample_chain_under_xla[sgld-3]":
        "the [sgld-0..2] cases",
    "tests/test_flat_chain.py::test_same_chain_as_tfp_sample_chain_under_xla[sgld-4]":
        "the [sgld-0..2] cases",
    "tests/kernels/test_contract.py::test_runs_in_sample_chain_and_sample_fold_under_xla[sghmc-L3-chen-keep]":
        "the other SGHMC cases of the test",
    "tests/test_quick_pages.py::test_quick_page_is_regenerated_by_the_current_code[mamba_pmf_study.py]":
        "the [mamba_tuning_cost.py] case and test_comparison_fails_on_a_changed_page",
    "tests/test_quick_pages.py::test_quick_page_is_regenerated_by_the_current_code[mamba_logistic_study.py]":
        "the [mamba_tuning_cost.py] case and test_comparison_fails_on_a_changed_page",
    "tests/test_quick_pages.py::test_quick_page_is_regenerated_by_the_current_code[mamba_bnn_digits.py]":
        "the [mamba_tuning_cost.py] case and test_comparison_fails_on_a_changed_page",
    **{
        f"tests/test_flat_chain.py::test_same_chain_as_tfp_sample_chain_under_xla[{case}]":
            "the [sgld-0], [sghmc-0] and [tfp_hmc-0] cases"
        for case in ("sgld-1", "sgld-2", "sgld-5", "tfp_hmc-1", "tfp_hmc-2", "tfp_hmc-3",
                     "tfp_hmc-4", "tfp_hmc-5")
    },
    **{
        f"tests/diagnostics/test_reducers.py::test_rbf_median_bandwidth_matches_batch_function[{case}]":
            "the [wrapped] and [partly-filled-chains] cases"
        for case in ("wrapped-large", "partly-filled", "wrapped-chains")
    },
    "tests/diagnostics/test_reducers.py::test_every_kernel_float32_parts[SGHMC]":
        "the [SGNHT] case (a momentum kernel) and the SGLD and pSGLD cases",
    "tests/test_data.py::test_chains_agree_with_and_without_the_packed_copy[sghmc]":
        "the [csgld] case",
    "tests/tuning/test_tf_data.py::test_fed_xla_arm_follows_the_same_minibatches[sghmc]":
        "the [sgld] case",
    "tests/tuning/test_compile_once.py::test_step_t_draws_the_same_randomness_however_the_steps_are_split[epoch]":
        "the [random_window] case",
    "tests/test_one_loop.py::test_chunked_chain_with_any_chunk_size[5]":
        "the [1] and [24] cases",
    "tests/test_one_loop.py::test_chunked_chain_with_any_chunk_size[7]":
        "the [1] and [24] cases",
    "tests/test_data_stream.py::test_chunked_graph_program_runs_the_step_by_step_chain[sghmc-fed-graph]":
        "the [sghmc-fed-graph-started] case",
    "tests/test_posteriordb_sample_posterior.py::test_posteriordb[nes2000-nes]":
        "the [kidiq-kidscore_interaction] case and tests/test_real_posteriors_sklearn.py",
    "tests/test_posteriordb_sample_posterior.py::test_posteriordb[sblrc-blr]":
        "the [kidiq-kidscore_interaction] case and tests/test_real_posteriors_sklearn.py",
    "tests/test_quick_pages.py::test_quick_page_is_regenerated_by_the_current_code[mamba_tuning_cost.py]":
        "test_comparison_fails_on_a_changed_page (the slow tier regenerates every page)",
    **{
        f"tests/kernels/test_contract.py::test_runs_in_sample_chain_and_sample_fold_under_xla[{case}]":
            "the [sgld], [sgld-cv], [psgld], [sghmc-L1-explicit-refresh] and [sgld-sa] cases"
        for case in ("sgld-prefetch", "sgnht", "msgld", "psgld-adam")
    },
    **{
        f"tests/test_posteriordb_models.py::test_joint_posterior_density_is_the_transcription[{case}]":
            "the other cases of the test, and test_reference_means_beat_three_sd_moves (every "
            "posterior's own density)"
        for case in ("bball_drive_event_1-hmm_drive_1", "hmm_example-hmm_example",
                     "diamonds-diamonds", "low_dim_gauss_mix-low_dim_gauss_mix", "garch-garch11")
    },
    "tests/test_quiet_start.py::test_example_starts_quietly_and_leaves_the_checkout_clean":
        "test_cli_run_prints_no_tensorflow_log_line and test_import_prints_nothing",
}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    collected = {item.nodeid for item in items}
    functions = {nodeid.split("[", 1)[0] for nodeid in collected}
    # A SLOW_IN_CI case whose test was collected but not the case itself is a typo or a
    # renamed parameter: it would silently stay in CI, so it stops the run.
    stale = sorted(
        k for k in SLOW_IN_CI if k not in collected and k.split("[", 1)[0] in functions
    )
    if stale:
        raise pytest.UsageError(
            "SLOW_IN_CI (tests/conftest.py) names cases that do not exist: " + ", ".join(stale)
        )
    for item in items:
        if item.nodeid in SLOW_IN_CI:
            item.add_marker(pytest.mark.slow)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tfp-sgmcmc")
    group.addoption(
        "--seed",
        action="store",
        type=int,
        default=None,
        help=f"Seed for every random test (default {DEFAULT_SEED}).",
    )
    group.addoption(
        "--vary-seed",
        action="store_true",
        default=False,
        help="Use a fresh random seed for this session (printed in the header).",
    )


def _session_seed(config: pytest.Config) -> int:
    if not hasattr(config, "_tfp_sgmcmc_seed"):
        seed = config.getoption("--seed")
        if seed is None:
            seed = secrets.randbelow(2**31 - 1) if config.getoption("--vary-seed") else DEFAULT_SEED
        config._tfp_sgmcmc_seed = int(seed)  # type: ignore[attr-defined]
    return config._tfp_sgmcmc_seed  # type: ignore[attr-defined]


def pytest_report_header(config: pytest.Config) -> str:
    return f"tfp-sgmcmc test seed: {_session_seed(config)} (reproduce with --seed=N)"


@pytest.fixture(scope="session")
def seed(pytestconfig: pytest.Config) -> int:
    """The session's integer seed (``--seed``; default 17)."""
    return _session_seed(pytestconfig)


@pytest.fixture
def rng(seed: int) -> np.random.Generator:
    """A NumPy generator seeded from the session seed (fresh for every test)."""
    return np.random.default_rng(seed)


@pytest.fixture
def tf_seed(seed: int) -> tf.Tensor:
    """A stateless TF seed (``int32[2]``) derived from the session seed."""
    return tf.constant([seed, 0], tf.int32)


@pytest.fixture(params=[tf.float32, tf.float64], ids=["float32", "float64"])
def float_dtype(request: pytest.FixtureRequest) -> tf.DType:
    """Both float dtypes the samplers must preserve."""
    return request.param
