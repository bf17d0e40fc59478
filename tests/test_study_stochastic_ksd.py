"""The stochastic-KSD study's quick mode runs end to end and writes a finite table.

Runs ``examples/stochastic_ksd_study.py --quick`` into a temporary folder and reads the
page: one row per arm with four finite, positive KSDs, Spearman's ρ in [−1, 1] for both
metrics, and the figure. At the smallest batch (0.1%, n = 16 rows) the minibatch score's
noise, of variance ∝ N²/n, must make the stochastic KSD larger than the full-data KSD of
the same samples in the unit metric; a study that passed full-data scores as the
stochastic ones (or the reverse) would fail it.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "examples", "stochastic_ksd_study.py")

pytestmark = pytest.mark.slow  # about a minute of sampling


def _table(page: str, header_start: str) -> list[list[str]]:
    lines = page.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith(header_start))
    rows = []
    for ln in lines[i + 2 :]:
        if not ln.startswith("|"):
            break
        rows.append([c.strip() for c in ln.strip("|").split("|")])
    return rows


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    out = tmp_path_factory.mktemp("stochastic_ksd")
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(
        [sys.executable, SCRIPT, "--quick", "--out", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    with open((out / "studies" / "stochastic_ksd_quick").with_suffix(".md"), encoding="utf-8") as f:
        return f.read(), str(out)


def test_every_arm_has_finite_ksds(page: tuple[str, str]) -> None:
    rows = _table(page[0], "| step size |")
    assert len(rows) == 6  # 3 step sizes × 2 batch sizes
    for r in rows:
        values = [float(v) for v in r[3:7]]
        assert all(math.isfinite(v) and v > 0 for v in values), r


def test_summary_is_finite(page: tuple[str, str]) -> None:
    rows = _table(page[0], "| metric |")
    assert [r[0] for r in rows] == ["unit", "sample"]
    for r in rows:
        rhos = [float(v) for v in r[1:4]]
        assert all(-1.0 <= v <= 1.0 for v in rhos), r
        assert r[6] in ("yes", "no")
        assert float(r[8]) >= 1.0  # the stochastic pick's full KSD over the best one
    assert os.path.isfile(os.path.join(page[1], "figures", "stochastic_ksd_quick.png"))


def test_small_batch_noise_inflates_the_stochastic_ksd(page: tuple[str, str]) -> None:
    rows = [r for r in _table(page[0], "| step size |") if r[1] == "0.1%"]
    assert rows
    for r in rows:
        assert float(r[4]) > float(r[3]), r
