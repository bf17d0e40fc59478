"""``sg.sample_posterior`` on the scikit-learn posteriors against their NUTS references.

For each posterior of ``models.py`` and each dtype, one call of ``sample_posterior`` with its
defaults (4 chains x 1,000 draws), compared with the NUTS summary in ``reference.json``
(``check_reference.py``):

* ``max_mean_error``: ``max_j |mean_j - ref mean_j| / ref sd_j`` over the scalar parameters;
* ``sd_ratio_min``, ``sd_ratio_max``: the extremes of ``sd_j / ref sd_j``;
* ``accurate``: ``max_mean_error <= 0.2`` and both sd ratios in ``[0.8, 1.25]``;
* ``acceptable``: accurate, or a verdict other than ``"ok"`` (never ``ok`` with a wrong
  answer); a call that raises (``sample_posterior`` raises a ``RuntimeError`` naming the
  reasons when every tuning arm is disqualified) is recorded with the verdict ``"raised"``
  and its message as the reason, and is acceptable;
* ``verdict``, ``reasons``, ``notes``, the chosen step and batch size, and ``seconds`` (the
  whole call, tracing and XLA compilation included) with its split into phases.

```bash
python -m benchmarks.real_posteriors.bench_sample_posterior \
    --json benchmarks/real_posteriors/sample_posterior.json
python -m benchmarks.real_posteriors.bench_sample_posterior --posteriors diabetes-linear \
    --dtypes float32
```

The JSON goes to standard output (and to ``--json``), a Markdown table to standard error.
The exit status is 1 when a run is not acceptable.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

try:
    from benchmarks._load import load
except ImportError:  # run by path: the repository root is not on sys.path
    _spec = importlib.util.spec_from_file_location(
        "_benchmarks__load", Path(__file__).resolve().parents[1] / "_load.py"
    )
    _loader = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_loader)
    load = _loader.load

HERE = Path(__file__).resolve().parent

MEAN_TOLERANCE = 0.2
SD_RATIO_RANGE = (0.8, 1.25)


models = load("real_posteriors.models")
common = load("_common")


def accuracy(
    model: Any, draws: dict[str, np.ndarray], reference: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Worst standardised mean error and the range of sd ratios against the reference."""
    reference = model.reference if reference is None else reference
    flat = model.flatten(draws)
    if set(flat) != set(reference):
        raise ValueError(f"{model.name}: draws {sorted(flat)} != reference {sorted(reference)}")
    errs = {
        k: abs(float(np.mean(flat[k], dtype=np.float64)) - r.mean) / r.sd
        for k, r in reference.items()
    }
    ratios = {
        k: float(np.std(np.asarray(flat[k], np.float64))) / r.sd for k, r in reference.items()
    }
    worst = max(errs, key=errs.__getitem__)
    lo, hi = min(ratios, key=ratios.__getitem__), max(ratios, key=ratios.__getitem__)
    return {
        "max_mean_error": errs[worst],
        "max_mean_error_at": worst,
        "sd_ratio_min": ratios[lo],
        "sd_ratio_min_at": lo,
        "sd_ratio_max": ratios[hi],
        "sd_ratio_max_at": hi,
        "accurate": bool(
            errs[worst] <= MEAN_TOLERANCE
            and SD_RATIO_RANGE[0] <= ratios[lo]
            and ratios[hi] <= SD_RATIO_RANGE[1]
        ),
    }


def run_one(name: str, dtype: str, seed: int, num_results: int = 1000) -> dict[str, Any]:
    """One ``sample_posterior`` call on posterior ``name`` in ``dtype``, and its accuracy."""
    import tfp_sgmcmc as sg

    model = models.load(name, dtype=np.dtype(dtype))
    post = sg.JointPosterior(model.prior, model.likelihood_fn, model.data, batch_size=32)
    t0 = time.perf_counter()
    try:
        res = sg.sample_posterior(
            post, num_results=num_results, num_chains=4, seed=seed, progress=False
        )
    except RuntimeError as e:
        return {
            "posterior": name,
            "dtype": dtype,
            "N": model.num_examples,
            "d": model.num_parameters,
            "verdict": "raised",
            "reasons": [str(e)],
            "seconds": round(time.perf_counter() - t0, 2),
            "accurate": False,
            "acceptable": True,
        }
    wall = time.perf_counter() - t0
    out: dict[str, Any] = {
        "posterior": name,
        "dtype": dtype,
        "N": model.num_examples,
        "d": model.num_parameters,
        "verdict": res.verdict,
        "reasons": list(res.reasons),
        "step_size": float(res.step_size),
        "batch_size": int(res.batch_size),
        "seconds": round(wall, 2),
        **{f"seconds_{k}": round(float(v), 2) for k, v in res.timings.items()},
        **accuracy(model, res.draws),
        "diagnostics": {
            k: float(v)
            for k, v in res.diagnostics.items()
            if np.ndim(v) == 0 and isinstance(v, int | float | np.number)
        },
        "notes": list(res.notes),
    }
    out["acceptable"] = bool(out["accurate"] or res.verdict != "ok")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--posteriors", nargs="+", default=list(models.NAMES), choices=list(models.NAMES)
    )
    parser.add_argument(
        "--dtypes", nargs="+", default=["float64", "float32"], choices=["float64", "float32"]
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-results", type=int, default=1000)
    parser.add_argument("--json", default=None, help="also write the JSON document here")
    args = parser.parse_args(argv)

    load_start = common.load_average()
    rows = []
    for name in args.posteriors:
        for dtype in args.dtypes:
            common.log(f"{name} ({dtype}) ...")
            r = run_one(name, dtype, args.seed, args.num_results)
            if r["verdict"] == "raised":
                common.log(f"  raised after {r['seconds']:.1f} s: {r['reasons'][0]}")
            else:
                common.log(
                    f"  {r['verdict']}, mean error {r['max_mean_error']:.3f}, sd ratio "
                    f"{r['sd_ratio_min']:.2f}-{r['sd_ratio_max']:.2f}, "
                    f"{r['seconds']:.1f} s"
                )
            rows.append(r)
    doc = {
        "benchmark": "real_posteriors_sample_posterior",
        "what": "sg.sample_posterior (defaults, 4 chains x num_results) on posteriors of "
        "scikit-learn's bundled data sets against dense-metric NUTS references "
        "(benchmarks/real_posteriors/README.md)",
        "config": {
            "seed": args.seed,
            "num_results": args.num_results,
            "num_chains": 4,
            "mean_tolerance": MEAN_TOLERANCE,
            "sd_ratio_range": list(SD_RATIO_RANGE),
        },
        "environment": common.environment(),
        "load_average": {"start": load_start, "end": common.load_average()},
        "results": rows,
        "all_acceptable": all(r["acceptable"] for r in rows),
    }
    print(json.dumps(doc, indent=2))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            f.write(json.dumps(doc, indent=2) + "\n")
    print(
        "| posterior | dtype | verdict | max mean err | sd ratio | s | reasons |", file=sys.stderr
    )
    for r in rows:
        err = f"{r['max_mean_error']:.3f}" if "max_mean_error" in r else "-"
        sd = f"{r['sd_ratio_min']:.2f}-{r['sd_ratio_max']:.2f}" if "sd_ratio_min" in r else "-"
        print(
            f"| {r['posterior']} | {r['dtype']} | {r['verdict']} | {err} | {sd} | "
            f"{r['seconds']:.1f} | {'; '.join(r['reasons'])} |",
            file=sys.stderr,
        )
    return 0 if doc["all_acceptable"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
