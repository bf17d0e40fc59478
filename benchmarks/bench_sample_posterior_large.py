"""Where SG-MCMC earns its keep: ``sample_posterior`` against TFP's NUTS on N = 10⁶ rows.

A conjugate normal-inverse-gamma linear regression shaped like posteriordb's diamonds
(an intercept and 25 correlated predictors on scales from 10⁻² to 10³, uncentred), whose
posterior marginals are exact (Student-t coefficients, an inverse-gamma variance). Both
samplers run in this process on the same model, 4 chains each:

* ``sg.sample_posterior`` with its defaults (1% and 5% minibatches tried);
* TFP's NUTS on the full data with a dense metric from the Laplace fit at the mode
  (``benchmarks/posteriordb/check_nuts.py``'s ``run_dense``, with the mode and the metric
  from the library's ``find_mode`` and ``laplace_approximation``: the mode, the metric, the
  dual-averaging warm-up and the draws all count in its wall time).

Run from the repository root. Prints one JSON document: wall seconds, the worst
standardised mean error and the range of sd ratios against the exact marginals for each,
and the wall-time ratio:

```bash
python -m benchmarks.bench_sample_posterior_large --num-examples 1000000
```
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp
from scipy import stats

from benchmarks.posteriordb import check_nuts

tfd = tfp.distributions


class Regression:
    """The model in the form ``check_nuts`` reads, plus its exact marginal moments."""

    name = "nig-regression"

    def __init__(self, num_examples: int, dim: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        scales = np.logspace(-2, 3, dim)
        corr = np.linalg.cholesky(0.5 * np.ones((dim, dim)) + 0.5 * np.eye(dim))
        x = (rng.standard_normal((num_examples, dim)) @ corr.T) * scales + 2.0 * scales
        x[:, 0] = 1.0
        beta = rng.standard_normal(dim) / scales
        y = x @ beta + 0.5 * rng.standard_normal(num_examples)
        a0, b0 = 3.0, 1.0
        tau = 10.0 / scales
        lam = x.T @ x + np.diag(tau**-2)
        mu = np.linalg.solve(lam, x.T @ y)
        a_n = a0 + num_examples / 2
        b_n = b0 + 0.5 * (y @ y - mu @ lam @ mu)
        nu = 2 * a_n
        sd = np.sqrt(b_n / a_n * np.diag(np.linalg.inv(lam)) * nu / (nu - 2))
        ig = stats.invgamma(a_n, scale=b_n)
        self.truth = {"beta": (mu, sd), "sigma2": (np.array(ig.mean()), np.array(ig.std()))}
        self.prior = tfd.JointDistributionNamedAutoBatched(
            dict(
                sigma2=tfd.InverseGamma(np.float64(a0), np.float64(b0)),
                beta=lambda sigma2: tfd.MultivariateNormalDiag(
                    tf.zeros(dim, tf.float64), tf.sqrt(sigma2)[..., None] * tau
                ),
            )
        )
        self.data = (x, y)
        self.event_shapes = {"sigma2": (), "beta": (dim,)}

    @staticmethod
    def likelihood_fn(p: Any, batch: Any) -> tfd.Distribution:
        features, _ = batch
        mean = tf.einsum("nd,...d->...n", features, p["beta"])
        return tfd.Normal(mean, tf.sqrt(p["sigma2"])[..., None])

    def accuracy(self, draws: dict[str, Any]) -> dict[str, float]:
        errs, ratios = [], []
        for name, (mean, sd) in self.truth.items():
            x = np.asarray(draws[name], np.float64)
            x = x.reshape((-1,) + x.shape[2:])
            errs.append(np.max(np.abs(x.mean(0) - mean) / sd))
            ratios += list(np.atleast_1d(x.std(0) / sd))
        return {
            "max_mean_error": float(max(errs)),
            "sd_ratio_min": float(min(ratios)),
            "sd_ratio_max": float(max(ratios)),
        }


def _library_laplace(post: Any, target: Any) -> tuple[tf.Tensor, tf.Tensor]:
    """The mode and Laplace Cholesky factor in ``target``'s flat order (``prior.model``'s),
    from the library's `find_mode` and `laplace_approximation` on ``post``."""
    from tfp_sgmcmc.estimators import laplace_approximation
    from tfp_sgmcmc.estimators.laplace import find_mode

    origin = [tf.zeros_like(p) for p in post.initial_state(seed=0)]
    mode = find_mode(post.estimator, [origin], post.num_examples).position
    lap = laplace_approximation(post.estimator, mode)
    sizes = {n: int(np.prod(p.shape)) for n, p in zip(post.names, mode)}
    starts = dict(zip(post.names, np.cumsum([0] + [sizes[n] for n in post.names])))
    order = np.concatenate([np.arange(starts[n], starts[n] + sizes[n]) for n in target.names])
    flat = np.concatenate([np.reshape(np.asarray(p), [-1]) for p in mode])[order]
    cov = lap.covariance[np.ix_(order, order)]
    return tf.constant(flat), tf.constant(np.linalg.cholesky(cov))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-examples", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=26)
    parser.add_argument("--num-results", type=int, default=1000)
    parser.add_argument("--nuts-warmup", type=int, default=500)
    parser.add_argument("--nuts-results", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    import tfp_sgmcmc as sg

    model = Regression(args.num_examples, args.dim, args.seed)
    post = sg.JointPosterior(model.prior, model.likelihood_fn, model.data, batch_size=1000)
    t0 = time.perf_counter()
    res = sg.sample_posterior(post, num_results=args.num_results, seed=args.seed)
    sg_wall = time.perf_counter() - t0
    out: dict[str, Any] = {
        "num_examples": args.num_examples,
        "dim": args.dim + 1,
        "sample_posterior": {
            "seconds": sg_wall,
            "timings": res.timings,
            "verdict": res.verdict,
            "reasons": res.reasons,
            "step_size": res.step_size,
            "batch_size": res.batch_size,
            **model.accuracy(res.draws),
        },
    }
    t0 = time.perf_counter()
    # check_nuts's own Newton search stalls on 10^6 rows with predictor scales 10^6
    # apart; NUTS gets its mode and dense metric from the library's (timed as NUTS's).
    check_nuts.laplace = lambda target: _library_laplace(post, target)
    draws, trace = check_nuts.run_dense(
        model, args.nuts_results, 4, args.nuts_warmup, args.seed, True
    )
    nuts_wall = time.perf_counter() - t0
    out["nuts_dense"] = {
        "seconds": nuts_wall,
        "num_warmup": args.nuts_warmup,
        "num_results": args.nuts_results,
        "mean_leapfrogs": float(np.mean(trace["n_steps"])),
        **model.accuracy(draws),
    }
    out["wall_ratio_sample_posterior_over_nuts"] = sg_wall / nuts_wall
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
