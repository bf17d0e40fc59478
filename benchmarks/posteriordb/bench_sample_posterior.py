"""``sg.sample_posterior`` on the posteriordb posteriors: accuracy, verdict and where time goes.

For each posterior, one call of ``sample_posterior`` (4 chains x 1,000 draws, defaults
otherwise) and, in the same process, TFP's NUTS (``check_nuts``'s dense-metric NUTS),
both against posteriordb's reference summary. Prints JSON (and a Markdown table on
standard error); run from the repository root:

```bash
python -m benchmarks.posteriordb.bench_sample_posterior --json out.json
```

Columns: ``max_mean_error`` is ``max_j |mean_j - ref_j| / sd_j`` over the Stan scalars,
``sd_ratio`` the range of ``sd_j / ref_sd_j``, ``verdict`` the library's own, and the
``seconds_*`` fields the phases of ``sample_posterior`` (mode search, curvature, tuning
sampling, tuning metric, sampling, verdict).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import numpy as np

from benchmarks.posteriordb import models


def accuracy(model: models.Posterior, draws: dict[str, np.ndarray]) -> dict[str, Any]:
    """Worst standardised mean error and the range of sd ratios against the reference."""
    flat = model.flatten(draws)
    errs, ratios = [], []
    for name, ref in model.reference.items():
        x = np.asarray(flat[name], np.float64).ravel()
        errs.append(abs(x.mean() - ref.mean) / ref.sd)
        ratios.append(x.std() / ref.sd)
    return {
        "max_mean_error": float(max(errs)),
        "sd_ratio_min": float(min(ratios)),
        "sd_ratio_max": float(max(ratios)),
        "accurate": bool(max(errs) <= 0.2 and 0.8 <= min(ratios) and max(ratios) <= 1.25),
    }


def run_one(name: str, dtype: Any, seed: int, nuts: str | None) -> dict[str, Any]:
    import tfp_sgmcmc as sg

    model = models.load(name, dtype=dtype)
    # Batches of 32, or the full data where it has fewer rows (eight schools: 8).
    batch = min(32, model.num_examples)
    post = sg.JointPosterior(model.prior, model.likelihood_fn, model.data, batch_size=batch)
    t0 = time.perf_counter()
    res = sg.sample_posterior(post, num_results=1000, num_chains=4, seed=seed)
    wall = time.perf_counter() - t0
    out: dict[str, Any] = {
        "posterior": name,
        "N": model.num_examples,
        "d": int(res.whitened.shape[-1]),
        "verdict": res.verdict,
        "reasons": res.reasons,
        "step_size": res.step_size,
        "batch_size": res.batch_size,
        "seconds": wall,
        **{f"seconds_{k}": v for k, v in res.timings.items()},
        **accuracy(model, res.draws),
    }
    if nuts:
        from benchmarks.posteriordb import check_nuts

        report = check_nuts.run_one(name, nuts, 1000, 4, 1000, seed, True)
        out["nuts_method"] = nuts
        out["nuts_seconds"] = report["wall_s"]
        out["nuts_max_mean_error"] = report["max_abs_z_mean"]
        out["nuts_sd_ratio_min"] = report["min_sd_ratio"]
        out["nuts_sd_ratio_max"] = report["max_sd_ratio"]
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posteriors", nargs="+", default=list(models.NAMES))
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float64")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--nuts", choices=["dense", "windowed", "none"], default="dense",
        help="TFP's NUTS beside it: with a Laplace-dense metric (default), "
        "windowed_adaptive_nuts, or none",
    )
    parser.add_argument("--json", help="also write the JSON document here")
    args = parser.parse_args(argv)
    nuts = None if args.nuts == "none" else args.nuts
    rows = [run_one(n, np.dtype(args.dtype), args.seed, nuts) for n in args.posteriors]
    doc = json.dumps({"dtype": args.dtype, "seed": args.seed, "results": rows}, indent=2)
    print(doc)
    if args.json:
        with open(args.json, "w") as f:
            f.write(doc + "\n")
    print("| posterior | verdict | max mean err | sd ratio | s | NUTS s |", file=sys.stderr)
    for r in rows:
        print(
            f"| {r['posterior']} | {r['verdict']} | {r['max_mean_error']:.3f} | "
            f"{r['sd_ratio_min']:.2f}-{r['sd_ratio_max']:.2f} | {r['seconds']:.1f} | "
            f"{r.get('nuts_seconds', float('nan')):.1f} |",
            file=sys.stderr,
        )


if __name__ == "__main__":
    main()
