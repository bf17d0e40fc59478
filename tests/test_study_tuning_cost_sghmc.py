"""The SGHMC tuning-cost study (``mamba_tuning_cost.py --sampler sghmc``) runs end to end.

Runs its ``--quick`` mode into a temporary folder and reads the page: every MAMBA run
has a finite grid KSD of its pick, no smaller than the grid's best (the grid's pick is
the minimum over the same yardstick, so a smaller value means the pick was looked up
in the wrong arm), MAMBA spends at most its budget T, and the cost ratios are finite
and positive.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "examples", "mamba_tuning_cost.py")
QUICK_BUDGET = 5e6  # the quick mode's T, in gradient evaluations

pytestmark = pytest.mark.slow  # about a minute of tuning


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    out = tmp_path_factory.mktemp("tuning_cost_sghmc")
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(
        [sys.executable, SCRIPT, "--sampler", "sghmc", "--quick", "--out", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    page = (out / "studies" / "mamba_tuning_cost_sghmc_quick").with_suffix(".md")
    with open(page, encoding="utf-8") as f:
        return f.read(), str(out)


def test_table_is_finite_and_consistent(page: tuple[str, str]) -> None:
    text = page[0]
    best = re.search(r"Grid search: pick .*?, KSD ([0-9.e+-]+) ± ([0-9.e+-]+); ([0-9.e+-]+) ", text)
    assert best, text
    best_ksd, grid_spent = float(best.group(1)), float(best.group(3))
    assert math.isfinite(best_ksd) and best_ksd > 0 and grid_spent > 0
    lines = text.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith("| seed |"))
    rows = []
    for ln in lines[i + 2 :]:
        if not ln.startswith("|"):
            break
        rows.append([c.strip() for c in ln.strip("|").split("|")])
    assert [r[1] for r in rows] == ["C = 4", "paper (1 chain)"]
    for r in rows:
        ksd = float(r[3].split("±")[0])
        ratio, spent, speedup = float(r[4]), float(r[6]), float(r[7])
        seconds, time_ratio = float(r[8]), float(r[9])
        assert math.isfinite(ksd) and ksd >= best_ksd, r
        assert ratio >= 1.0 and math.isclose(ratio, ksd / best_ksd, rel_tol=0.02), r
        assert 0 < spent <= QUICK_BUDGET, r
        assert math.isclose(speedup, grid_spent / spent, rel_tol=0.02), r
        assert seconds > 0 and math.isfinite(time_ratio) and time_ratio > 0, r
        assert r[11] in ("yes", "no")
    assert os.path.isfile(os.path.join(page[1], "figures", "mamba_tuning_cost_sghmc_quick.png"))
