"""Shared pytest configuration for the tfp-sgmcmc test suite.

* ``--seed=N`` fixes the seed every random test derives its stateless seeds
  from (default 17, as in the style guide); ``--vary-seed`` draws a fresh one
  per session (printed in the header) to probe that statistical tests do not
  pass only for one lucky seed.
* ``TF_CPP_MIN_LOG_LEVEL`` is set before TensorFlow is imported, so C++ log
  lines do not bury the test output.

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
