"""The README's TFP-user example (JointDistribution → sample_posterior → draws) runs after the
README's own install: no optional extra (ArviZ is named in a comment, for the reader to add)."""

from __future__ import annotations

import os
import re
import sys

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


#: What in a line of code needs the ``arviz`` extra, which the README's install leaves out.
_NEEDS_ARVIZ = re.compile(r"\bto_arviz\(|^\s*(?:import|from)\s+arviz\b")


def _code_lines(code: str) -> list[str]:
    """``code``'s lines without their comments (a ``#`` outside a string literal is rare
    enough in these blocks that a plain split is exact for them)."""
    return [ln.split("#", 1)[0] for ln in code.splitlines()]


def test_readme_tfp_example_needs_no_extra():
    """The block runs to its end after ``pip install -e . -c constraints.txt``: none of its
    code calls ArviZ (a reader who wants ArviZ reads the extra in the last comment).
    Power check: the block as it was, ending in ``idata = res.to_arviz()``, fails."""
    code = _example(README, "<!-- tfp-model-example")
    assert [ln for ln in _code_lines(code) if _NEEDS_ARVIZ.search(ln)] == []
    was = code + "idata = res.to_arviz()  # needs pip install \"tfp-sgmcmc[arviz]\"\n"
    assert [ln for ln in _code_lines(was) if _NEEDS_ARVIZ.search(ln)] != []


@pytest.mark.slow  # the README page's blocks also run in CI (test_docs_blocks)
def test_readme_tfp_example_runs(monkeypatch):
    code = _example(README, "<!-- tfp-model-example")
    assert len([ln for ln in code.splitlines() if ln.strip()]) <= 20
    scope: dict = {}
    with monkeypatch.context() as m:
        m.setitem(sys.modules, "arviz", None)  # as after the README's install: no ArviZ
        exec(compile(code, "README.md:tfp-model-example", "exec"), scope)
    pytest.importorskip("arviz")
    res, y = scope["res"], scope["y"]
    assert set(scope["draws"]) == {"mu", "sigma"}
    idata = res.to_arviz()
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
