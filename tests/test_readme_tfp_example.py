"""The README's TFP-user example (JointDistribution → sample_posterior → ArviZ) runs."""

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


@pytest.mark.slow  # the README page's blocks also run in CI (test_docs_blocks)
def test_readme_tfp_example_runs():
    pytest.importorskip("arviz")
    code = _example(README, "<!-- tfp-model-example")
    assert len([ln for ln in code.splitlines() if ln.strip()]) <= 20
    scope: dict = {}
    exec(compile(code, "README.md:tfp-model-example", "exec"), scope)
    idata, res, y = scope["idata"], scope["res"], scope["y"]
    mu = idata.posterior["mu"].values
    sigma = idata.posterior["sigma"].values
    assert mu.shape == (4, 1000) and np.all(sigma > 0)
    # N = 20,000: the posterior is close to N(ȳ, s²/N) for mu and N(s, s²/2N) for sigma.
    n = y.size
    assert abs(mu.mean() - y.mean()) < 0.2 * y.std() / np.sqrt(n)
    assert abs(mu.std() / (y.std() / np.sqrt(n)) - 1) < 0.1
    assert abs(sigma.mean() - y.std()) < 0.2 * y.std() / np.sqrt(2 * n)
    assert res.verdict == "ok", res.reasons
    assert res.batch_size < n  # minibatches, not the full data
