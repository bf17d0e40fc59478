"""The posteriordb table (``benchmarks/posteriordb/table.py``): its accuracy rule and counts,
the documentation page against the JSON it was made from, a fast CI subset of the table's
own code path, and the whole table in the slow tier.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from _benchmarks import load_file

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "posteriordb_table.json"
PAGE = ROOT / "docs" / "posteriordb.md"


table = load_file("_posteriordb_table", "benchmarks/posteriordb/table.py")

#: Non-regression posteriors of the table that ``sample_posterior`` got right and ``ok``
#: (minutes on a loaded machine, so in the slow tier; the regressions' fast counterpart is
#: ``tests/test_posteriordb_sample_posterior.py``).
SUBSET = ("arK-arK", "gp_pois_regr-gp_regr")


def _ref(mean: float, sd: float) -> SimpleNamespace:
    return SimpleNamespace(mean=mean, sd=sd)


def test_accuracy_rule():
    rng = np.random.default_rng(0)
    draws = {"a": rng.normal(1.0, 2.0, 40_000), "b": rng.normal(-3.0, 0.5, 40_000)}
    right = {"a": _ref(1.0, 2.0), "b": _ref(-3.0, 0.5)}
    out = table.accuracy(draws, right)
    assert out["accurate"] and out["max_abs_z"] < 0.03
    assert 0.97 < out["sd_ratio_min"] <= out["sd_ratio_max"] < 1.03
    # Power: a mean 0.3 sd off, or an sd 30% too small, is not accurate.
    assert not table.accuracy(draws, {**right, "a": _ref(1.6, 2.0)})["accurate"]
    shrunk = table.accuracy(draws, {**right, "b": _ref(-3.0, 0.5 / 0.7)})
    assert not shrunk["accurate"] and shrunk["sd_ratio_min_at"] == "b"
    # Non-finite draws are never accurate.
    assert not table.accuracy({**draws, "a": np.full(10, np.nan)}, right)["accurate"]


def _summary(chains: np.ndarray) -> SimpleNamespace:
    """A reference record of ``chains`` ([10, 1000] draws), as ``make_reference`` writes."""
    sds = chains.std(axis=1, ddof=1)
    return SimpleNamespace(
        mean=chains.mean(), sd=chains.std(ddof=1), mcse=0.0,
        quantiles=tuple(np.quantile(chains, (0.05, 0.25, 0.5, 0.75, 0.95))),
        chain_sd_cv=sds.std(ddof=1) / sds.mean(),
    )


def test_heavy_tailed_parameters_are_judged_by_quantiles():
    """A parameter whose sd rare tail draws set (Student-t, 2.2 degrees of freedom: finite
    variance, infinite fourth moment) is judged by its median and ranges, and a light one
    by its mean and sd; both rules have power."""
    rng = np.random.default_rng(1)
    heavy_ref = _summary(rng.standard_t(2.2, (10, 1000)))
    light_ref = _summary(rng.normal(0.0, 1.0, (10, 1000)))
    assert table.sd_error(heavy_ref, 4000) > table.SD_MEASURABLE
    assert table.sd_error(light_ref, 4000) < 0.05
    right = {"h": rng.standard_t(2.2, 4000), "l": rng.normal(0.0, 1.0, 4000)}
    refs = {"h": heavy_ref, "l": light_ref}
    out = table.accuracy(right, refs)
    assert out["accurate"], out
    assert set(out["quantile_judged"]) == {"h"} and out["max_abs_z_at"] == "l"
    # Power: the heavy parameter 30% too narrow, or shifted by 0.4 robust sds, fails...
    assert not table.accuracy({**right, "h": 0.7 * right["h"]}, refs)["accurate"]
    assert not table.accuracy({**right, "h": right["h"] + 0.4}, refs)["accurate"]
    # ... and so does the light one 30% too narrow.
    assert not table.accuracy({**right, "l": 0.7 * right["l"]}, refs)["accurate"]
    # The page marks the row and says which parameter was judged so, with its figures.
    row = {"posterior": "p", "verdict": "ok", "seconds": 1.0, **out}
    assert "| yes ‡ |" in table.markdown_table([row])
    note = table.quantile_notes([row])
    assert "`p`, `h`: sd ratio" in note and "`l`" not in note
    assert table.quantile_notes([{**row, "quantile_judged": {}}]) == ""


def test_counts_never_call_a_wrong_ok_row_right():
    rows = [
        {"posterior": "p1", "verdict": "ok", "accurate": True, "seconds": 5.0,
         "nuts": {"status": "done", "seconds": 20.0, "accurate": True}},
        {"posterior": "p2", "verdict": "ok", "accurate": False, "seconds": 5.0,
         "nuts": {"status": "done", "seconds": 2.0, "accurate": True}},
        {"posterior": "p3", "verdict": "suspect", "accurate": True, "seconds": 5.0,
         "nuts": {"status": "timed out", "seconds": 900.0}},
        {"posterior": "p4", "verdict": "error", "accurate": False, "seconds": 1.0},
    ]
    assert table.counts(rows) == {
        "posteriors": 4, "accurate_and_ok": 1, "flagged": 2, "flagged_but_accurate": 1,
        "wrong_and_ok": 1, "faster_than_nuts": 2, "nuts_compared": 3, "nuts_accurate": 2,
    }


def test_docs_page_is_the_json():
    """docs/posteriordb.md is exactly what the table's JSON renders to (rerun
    ``python -m benchmarks.posteriordb.table --render --docs docs/posteriordb.md`` after
    a run)."""
    doc = json.loads(RESULTS.read_text())
    assert PAGE.read_text() == table.page(doc)
    # The counts on the page come from the rows.
    c = table.counts(doc["results"])
    assert f"accurate and `ok`: **{c['accurate_and_ok']}**" in PAGE.read_text()


@pytest.mark.slow
@pytest.mark.statistical
@pytest.mark.parametrize("name", SUBSET)
def test_subset(name, tmp_path):
    """The table's own child run (``sample_posterior`` with its defaults, no NUTS) on a
    fast posterior: accurate and ``ok``, or flagged; never ``ok`` and wrong."""
    out = tmp_path / "row.json"
    table.child(name, 0, out, nuts=False)
    row = json.loads(out.read_text())
    assert row["posterior"] == name and row["N"] >= 1 and row["d"] >= 1
    assert not (row["verdict"] == "ok" and not row["accurate"]), row
    assert row["accurate"] or row["verdict"] in ("suspect", "failed"), row


@pytest.mark.slow
def test_full_table(tmp_path):
    """Every posterior, with NUTS beside it: none ``ok`` and wrong."""
    out = tmp_path / "table.json"
    subprocess.run(
        [sys.executable, "-m", "benchmarks.posteriordb.table", "--json", str(out)],
        cwd=ROOT, check=True,
    )
    rows = json.loads(out.read_text())["results"]
    models = load_file("_posteriordb_models", "benchmarks/posteriordb/models.py")
    assert len(rows) == len(models.NAMES)
    assert table.counts(rows)["wrong_and_ok"] == 0


def test_markdown_rows_show_nuts_and_time_outs():
    base = {"family": "regression", "N": 10, "d": 3, "reasons": [], "max_abs_z": 0.05,
            "sd_ratio_min": 0.95, "sd_ratio_max": 1.1, "accurate": True, "seconds": 12.3,
            "timings": {"map": 2.0, "sampling": 4.0, "verdict": 0.1}}
    rows = [
        {**base, "posterior": "a", "verdict": "ok",
         "nuts": {"status": "done", "seconds": 40.2, "max_abs_z": 0.03, "sd_ratio_min": 0.97,
                  "sd_ratio_max": 1.02, "accurate": True, "separate_process": True}},
        {**base, "posterior": "b", "verdict": "suspect", "reasons": ["a | b"],
         "nuts": {"status": "timed out", "seconds": 900.0}},
    ]
    lines = table.markdown_table(rows).splitlines()
    assert len(lines) == 4
    assert lines[2] == (
        "| a | regression | 10 | 3 | ok | 0.05 | 0.95–1.10 | yes | 12 | mode 2, sample 4 "
        "| 40 † | 0.03 | 0.97–1.02 | yes |"
    )
    # A reason's "|" would split the cell; a NUTS time-out shows its limit.
    assert "suspect: a / b" in lines[3] and "> 900 (timed out)" in lines[3]
    # NUTS run without XLA (which could not compile it) says so.
    no_xla = {**rows[0], "nuts": {**rows[0]["nuts"], "separate_process": False, "xla": False}}
    assert "| 40 (no XLA) | 0.03 |" in table.markdown_table([no_xla])


def test_keyword_parts_get_a_field_name_and_back():
    """Stan's ``lambda`` cannot be a namedtuple field of TFP's pinned distribution."""
    check_nuts = load_file("_posteriordb_check_nuts", "benchmarks/posteriordb/check_nuts.py")
    assert check_nuts._field("lambda") == "lambda_"  # noqa: SLF001
    assert check_nuts._field("theta1") == "theta1"  # noqa: SLF001
