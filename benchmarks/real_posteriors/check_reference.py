"""NUTS reference summaries of the scikit-learn posteriors (``models.py``).

For each posterior this runs TFP's NUTS in float64 on the full data with a dense metric from
the Laplace fit at the mode (as ``benchmarks/posteriordb/check_nuts.py``'s ``run_dense``,
whose target and Laplace fit it reuses: the chains run on ``w`` with ``z = ẑ + L w``, a
linear map that leaves the target unchanged, and the step size is adapted by dual averaging
towards an acceptance rate of 0.8 during the first 80% of the warm-up). ``z`` is the prior's
default unconstrained space except for the parts a model names in its
``reference_bijectors`` (the Student-t's ``nu`` runs on ``log nu``). It keeps, per scalar
parameter, the ``mean``, ``sd``, ``ess`` and ``mcse = sd / √ess`` over all chains, with the
run's own diagnostics: the smallest ESS, the largest split R-hat, the number of divergent
transitions and the mean leapfrog steps per draw.

A reference is usable when every split R-hat is ≤ 1.01, every ESS ≥ 1,000 and no
transition diverged (``usable`` in the output; the exit status is 1 otherwise). A
reference's Monte Carlo error on a standardised mean is about ``1/√ESS`` (0.03 at ESS =
1,000), far below the 0.2 that ``bench_sample_posterior.py`` allows.

```bash
python -m benchmarks.real_posteriors.check_reference \
    --write benchmarks/real_posteriors/reference.json
python -m benchmarks.real_posteriors.check_reference --posteriors diabetes-linear \
    --num-results 500
```

``--write`` merges the summaries into the reference file (other posteriors' entries are
kept); the JSON document goes to standard output and a table to standard error.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

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

MAX_RHAT = 1.01
MIN_ESS = 1000.0


models = load("real_posteriors.models")
check_nuts = load("posteriordb.check_nuts")
common = load("_common")


def summarise(flat: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    """Per scalar parameter (draws ``[draws, chains]``): mean, sd, ESS, MCSE, split R-hat."""
    out = {}
    for name, v in flat.items():
        v = np.asarray(v, np.float64)
        sd = float(v.std(ddof=1))
        ess = float(
            tfp.mcmc.effective_sample_size(
                v, cross_chain_dims=1, filter_beyond_positive_pairs=True
            ).numpy()
        )
        out[name] = {
            "mean": float(v.mean()),
            "sd": sd,
            "ess": ess,
            "mcse": sd / np.sqrt(ess),
            "rhat": float(tfp.mcmc.potential_scale_reduction(v, split_chains=True).numpy()),
        }
    return out


def run_dense(
    m: Any,
    num_results: int,
    num_chains: int,
    num_warmup: int,
    seed: int,
    target_accept_prob: float = 0.8,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """NUTS on ``w``, ``z = ẑ + L w``, in the coordinates of ``m.reference_bijectors``."""
    target = check_nuts.UnconstrainedTarget(m)
    if m.reference_bijectors:
        target.bijector = tfp.bijectors.JointMap(
            {
                k: m.reference_bijectors.get(k) or d.experimental_default_event_space_bijector()
                for k, d in m.prior.model.items()
            }
        )
    mode, chol = check_nuts.laplace(target)

    def to_z(w: tf.Tensor) -> tf.Tensor:
        return mode + tf.einsum("ij,...j->...i", chol, w)

    def sample(seed: tf.Tensor) -> tuple[dict[str, tf.Tensor], dict[str, tf.Tensor]]:
        init_seed, chain_seed = tfp.random.split_seed(seed)
        w0 = tf.random.stateless_normal([num_chains, target.dim], init_seed, dtype=mode.dtype)
        nuts = tfp.mcmc.NoUTurnSampler(
            lambda w: target(to_z(w)), step_size=tf.constant(0.5, mode.dtype), max_tree_depth=10
        )
        kernel = tfp.mcmc.DualAveragingStepSizeAdaptation(
            nuts,
            num_adaptation_steps=int(0.8 * num_warmup),
            target_accept_prob=target_accept_prob,
        )
        w, trace = tfp.mcmc.sample_chain(
            num_results,
            w0,
            kernel=kernel,
            num_burnin_steps=num_warmup,
            trace_fn=lambda _, r: {
                "diverging": r.inner_results.has_divergence,
                "n_steps": r.inner_results.leapfrogs_taken,
                "step_size": r.inner_results.step_size,
            },
            seed=chain_seed,
        )
        return target.constrain(to_z(w)), trace

    fn = tf.function(sample, jit_compile=True, autograph=False)
    return common.sync(fn(tf.constant([seed, 0], tf.int32)))


def run_one(
    name: str, num_results: int, num_chains: int, num_warmup: int, seed: int
) -> dict[str, Any]:
    """Dense-metric NUTS on posterior ``name`` and its summary."""
    m = models.load(name, dtype=np.float64)
    t0 = time.perf_counter()
    draws, trace = run_dense(m, num_results, num_chains, num_warmup, seed)
    wall = time.perf_counter() - t0
    params = summarise(m.flatten(draws))
    out: dict[str, Any] = {
        "description": m.description,
        "num_examples": m.num_examples,
        "num_parameters": m.num_parameters,
        "nuts": {
            "min_ess": min(p["ess"] for p in params.values()),
            "max_rhat": max(p["rhat"] for p in params.values()),
            "divergences": int(np.sum(trace["diverging"])),
            "mean_leapfrogs": float(np.mean(trace["n_steps"])),
            "step_size": float(np.mean(trace["step_size"])),
            "wall_s": round(wall, 2),
        },
        "parameters": params,
    }
    n = out["nuts"]
    out["usable"] = bool(
        n["max_rhat"] <= MAX_RHAT and n["min_ess"] >= MIN_ESS and n["divergences"] == 0
    )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--posteriors", nargs="+", default=list(models.NAMES), choices=list(models.NAMES)
    )
    parser.add_argument("--num-results", type=int, default=2000, help="draws per chain")
    parser.add_argument("--num-chains", type=int, default=4)
    parser.add_argument("--num-warmup", type=int, default=1000, help="warm-up steps per chain")
    parser.add_argument("--seed", type=int, default=20251127)
    parser.add_argument(
        "--write", default=None, help="merge the summaries into this reference file"
    )
    args = parser.parse_args(argv)

    load_start = common.load_average()
    results = {}
    for name in args.posteriors:
        common.log(
            f"{name}: {args.num_chains} chains x ({args.num_warmup} warm-up + "
            f"{args.num_results}) dense-metric NUTS steps ..."
        )
        results[name] = run_one(name, args.num_results, args.num_chains, args.num_warmup, args.seed)
    config = {
        "sampler": "tfp.mcmc.NoUTurnSampler, dense metric from the Laplace fit, "
        "dual-averaging step size (target acceptance 0.8), max tree depth 10, XLA",
        "num_chains": args.num_chains,
        "num_results": args.num_results,
        "num_warmup": args.num_warmup,
        "dtype": "float64",
        "seed": args.seed,
        "max_rhat": MAX_RHAT,
        "min_ess": MIN_ESS,
    }
    doc = {
        "benchmark": "real_posteriors_reference",
        "what": "TFP NUTS reference summaries of posteriors on scikit-learn's bundled data "
        "sets (benchmarks/real_posteriors/README.md)",
        "config": config,
        "environment": common.environment(),
        "load_average": {"start": load_start, "end": common.load_average()},
        "posteriors": results,
    }
    lines = [
        f"{'posterior':24s} {'N':>4s} {'d':>3s} {'minESS':>7s} {'Rhat':>6s} {'div':>4s} "
        f"{'leapfr':>7s} {'wall s':>7s} usable"
    ]
    for name, r in results.items():
        n = r["nuts"]
        lines.append(
            f"{name:24s} {r['num_examples']:4d} {r['num_parameters']:3d} {n['min_ess']:7.0f} "
            f"{n['max_rhat']:6.3f} {n['divergences']:4d} {n['mean_leapfrogs']:7.1f} "
            f"{n['wall_s']:7.1f} {'yes' if r['usable'] else 'NO'}"
        )
    common.log("\n".join(lines))
    if args.write:
        path = Path(args.write)
        merged = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        posteriors = dict(merged.get("posteriors", {}))
        runs = dict(merged.get("runs", {}))
        for name, r in results.items():
            posteriors[name] = r
            runs[name] = {
                "config": config,
                "environment": doc["environment"],
                "load_average": doc["load_average"],
            }
        out = {"what": doc["what"], "posteriors": posteriors, "runs": runs}
        path.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(doc, indent=2))
    return 0 if all(r["usable"] for r in results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
