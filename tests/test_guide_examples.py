"""The examples of the one-call guide run as written.

``docs/sample_posterior.md`` (a regression through ``sg.sample_posterior``) and the verdict
example of ``docs/diagnostics.md`` (``judge_whitened_draws`` on NumPy draws): each fenced
``python`` block runs in a fresh namespace, and what the page says it prints is checked.
"""

from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _block(page: str, after: str) -> str:
    """The first fenced ``python`` block of ``docs/<page>`` after the text ``after``."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    start = text.index(after)
    match = re.search(r"```python\n(.*?)```", text[start:], flags=re.S)
    assert match is not None, f"no python block after {after!r} in docs/{page}"
    return match.group(1)


def test_verdict_example_runs_and_prints_what_the_page_says(capsys):
    code = _block("diagnostics.md", "## Verdict")
    exec(compile(code, "docs/diagnostics.md:verdict", "exec"), {"__name__": "__doc_example__"})
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "ok"
    assert lines[1].startswith("failed: 1 of 4 chains did not move")
    assert lines[2].startswith("suspect") and "26%" in lines[2]
    assert abs(float(lines[3]) - np.sqrt(1.5 / 0.95)) < 1e-6


@pytest.mark.slow  # the page's blocks also run in CI (test_docs_blocks)
def test_sample_posterior_guide_example_runs():
    code = _block("sample_posterior.md", "## Example")
    scope: dict = {"__name__": "__doc_example__"}
    exec(compile(code, "docs/sample_posterior.md:example", "exec"), scope)
    res = scope["res"]
    assert res.verdict == "ok", res.reasons
    assert res.draws["beta"].shape == (1000, 4, 3)
    truth = {"alpha": 0.3, "beta": np.array([1.0, -2.0, 0.5]), "sigma": 0.5}
    for name, value in truth.items():
        x = res.draws[name].reshape(-1, *np.shape(value))
        # The posterior mean is within a few posterior sds of the simulating values.
        assert np.all(np.abs(x.mean(0) - value) < 5 * x.std(0)), name
    table = res.summary()
    assert "| beta[2] |" in table and "| sigma |" in table
