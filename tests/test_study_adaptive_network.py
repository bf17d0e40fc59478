"""The adaptive-drift network study's quick run writes a page whose table holds finite numbers.

Slow (one to two minutes): it runs ``examples/adaptive_drift_network.py --quick`` into a
temporary folder and reads the results table back.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_quick_run_writes_a_finite_table(tmp_path: Path) -> None:
    res = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "adaptive_drift_network.py"), "--quick"]
        + ["--out", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    (page_path,) = (tmp_path / "studies").glob("*.md")  # the quick page
    page = page_path.read_text()
    (figure,) = (tmp_path / "figures").glob("*.png")
    assert page_path.stem.endswith("_quick") and figure.stat().st_size > 0
    assert page.index("![") < page.index("| setting |")  # the plot above the table
    rows = [
        [c.strip() for c in line.strip("|").split("|")]
        for line in page.splitlines()
        if line.startswith("| paper |") or line.startswith("| tuned |")
    ]
    assert sorted((r[0], r[1]) for r in rows) == sorted(
        (s, n) for s in ("paper", "tuned") for n in ("SGLD", "MSGLD", "ASGLD")
    )
    for r in rows:
        early, acc, nll = (re.findall(r"\d+\.\d+", c) for c in r[3:6])
        assert len(early) == len(acc) == len(nll) == 2, r
        values = [float(v) for v in early + acc + nll]
        assert all(math.isfinite(v) for v in values), r
        # A trained classifier on ten classes: better than chance, NLL below log(10).
        assert float(acc[0]) > 50 and float(nll[0]) < math.log(10), r
