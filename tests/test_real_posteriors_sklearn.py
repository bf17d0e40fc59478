"""``sg.sample_posterior`` on posteriors of scikit-learn's bundled data sets.

The models are in ``benchmarks/real_posteriors/models.py`` (raw, unstandardised predictors
where the data come that way), their reference summaries from dense-metric NUTS in
``benchmarks/real_posteriors/reference.json``, so no NUTS runs here. Each run must be
accurate (every mean within 0.2 reference sd, every sd within [0.8, 1.25] of the
reference's) or end with a verdict other than ``ok`` that gives its reasons, or raise the
error that names why every tuning arm was disqualified: never ``ok`` with a wrong answer.
The larger posteriors are in the slow tier.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

import tfp_sgmcmc as sg

pytest.importorskip("sklearn")

ROOT = Path(__file__).resolve().parents[1]


def _load_models():
    """benchmarks/real_posteriors/models.py, loaded by path (benchmarks/ is not a package
    the library installs)."""
    name = "_real_posteriors_models"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, ROOT / "benchmarks" / "real_posteriors" / "models.py"
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


models = _load_models()


def _check(name: str, dtype) -> None:
    model = models.load(name, dtype=dtype)
    reference = model.reference
    post = sg.JointPosterior(model.prior, model.likelihood_fn, model.data, batch_size=32)
    try:
        res = sg.sample_posterior(post, num_results=1000, num_chains=4, seed=0, progress=False)
    except RuntimeError as e:
        # Refusing with the reasons (every tuning arm disqualified) is an honest answer.
        assert "disqualified" in str(e), str(e)
        return
    flat = model.flatten(res.draws)
    assert set(flat) == set(reference)
    errs = {
        k: abs(np.mean(flat[k], dtype=np.float64) - r.mean) / r.sd
        for k, r in reference.items()
    }
    ratios = {k: np.std(np.asarray(flat[k], np.float64)) / r.sd for k, r in reference.items()}
    accurate = (
        max(errs.values()) <= 0.2
        and 0.8 <= min(ratios.values())
        and max(ratios.values()) <= 1.25
    )
    report = (res.verdict, res.reasons, errs, ratios)
    assert accurate or res.verdict != "ok", report
    assert res.verdict == "ok" or res.reasons, report


def test_reference_is_usable():
    """Every stored reference passed its NUTS checks (R-hat, ESS, no divergences)."""
    import json

    doc = json.loads((ROOT / "benchmarks" / "real_posteriors" / "reference.json").read_text())
    assert set(doc["posteriors"]) == set(models.NAMES)
    for name, entry in doc["posteriors"].items():
        nuts = entry["nuts"]
        assert nuts["max_rhat"] <= 1.01 and nuts["min_ess"] >= 1000, name
        assert nuts["divergences"] == 0, name
        assert set(entry["parameters"]) == set(models.load(name).flatten(
            {k: np.zeros(s) for k, s in models.load(name).event_shapes.items()}
        )), name


@pytest.mark.statistical
@pytest.mark.parametrize(
    "name, dtype",
    [("diabetes-linear", np.float64), ("diabetes-raw-linear", np.float32)],
)
def test_sample_posterior_sklearn(name, dtype):
    _check(name, dtype)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize(
    "name", ["diabetes-raw-student", "breast-cancer-logistic", "wine-softmax"]
)
def test_sample_posterior_sklearn_slow(name, dtype):
    _check(name, dtype)
