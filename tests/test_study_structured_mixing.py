"""The structured-mixing study's quick run writes a page whose table holds finite numbers.

Slow (about a minute): it runs ``examples/structured_mixing.py --quick`` into a temporary
folder. Beyond finiteness it checks what the study's design makes exact: S-SGLD with one
group is SGLD (identical rows), SGLD's fixed-point variance ratio is 1, and splitting
the correlated pairs raises the ESS per step.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _numbers(cell: str) -> list[float]:
    return [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", cell.replace(",", ""))]


@pytest.mark.slow
def test_quick_run_writes_a_finite_table(tmp_path: Path) -> None:
    res = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "structured_mixing.py"), "--quick"]
        + ["--out", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    (page_path,) = (tmp_path / "studies").glob("*.md")  # the quick page
    page = page_path.read_text()
    (figure,) = (tmp_path / "figures").glob("*.png")
    assert page_path.stem.endswith("_quick") and figure.stat().st_size > 0
    assert page.index("![") < page.index("| sampler |")  # the plot above the table
    rows = {}
    for line in page.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| ") and "SGLD" in cells[0] and "sampler" not in cells[0]:
            rows[cells[0]] = [_numbers(c) for c in cells[1:]]
    assert len(rows) == 7, rows.keys()
    for name, cells in rows.items():
        assert all(cells) and all(math.isfinite(v) for c in cells for v in c), name
    assert rows["S-SGLD, M = 1"] == rows["SGLD"]
    assert rows["SGLD"][5] == [1.0]
    # Splitting the correlated pairs mixes faster (mean ESS per 1,000 steps).
    assert rows["S-SGLD, M = 2"][0][0] > 2 * rows["SGLD"][0][0]
