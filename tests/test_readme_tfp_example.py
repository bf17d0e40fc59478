"""The README's TFP-user example (JointDistribution → MAMBA → sample → ArviZ, KSD) runs."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

README = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "README.md")
DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "tfp_models.md")


def _example(path: str, after: str) -> str:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    start = text.index(after)
    match = re.search(r"```python\n(.*?)```", text[start:], flags=re.S)
    assert match is not None, f"no python block after {after!r} in {path}"
    return match.group(1)


def test_readme_and_guide_show_the_same_example():
    readme = _example(README, "<!-- tfp-model-example")
    guide = _example(DOC, "## From a TFP model to a diagnosed posterior")
    assert readme == guide


def test_readme_tfp_example_runs():
    pytest.importorskip("arviz")
    code = _example(README, "<!-- tfp-model-example")
    assert len([ln for ln in code.splitlines() if ln.strip()]) <= 20
    scope: dict = {}
    exec(compile(code, "README.md:tfp-model-example", "exec"), scope)
    idata, ksd, y = scope["idata"], scope["ksd"], scope["y"]
    mu = idata.posterior["mu"].values
    sigma = idata.posterior["sigma"].values
    assert mu.shape == (4, 1000) and np.all(sigma > 0)
    # N = 5000: the posterior concentrates at the sample mean and sd (sd of mu ≈ 0.03).
    assert abs(mu[:, 200:].mean() - y.mean()) < 0.1
    assert abs(sigma[:, 200:].mean() - y.std()) < 0.1
    assert np.isfinite(float(ksd)) and float(ksd) > 0
