"""Where SG-MCMC earns its keep: ``sample_posterior`` against TFP's NUTS on N ≥ 10⁵ rows.

Two models (``--model``), each run by both samplers in this process, 4 chains each:

* ``regression`` (default, N = 10⁶): a conjugate normal-inverse-gamma linear regression
  shaped like posteriordb's diamonds (an intercept and 25 correlated predictors on scales
  from 10⁻² to 10³, uncentred), whose posterior marginals are exact (Student-t
  coefficients, an inverse-gamma variance). NUTS runs on the full data with a dense metric
  from the Laplace fit at the mode (``benchmarks/posteriordb/check_nuts.py``'s
  ``run_dense``, with the mode and the metric from the library's ``find_mode`` and
  ``laplace_approximation``: the mode, the metric, the dual-averaging warm-up and the draws
  all count in its wall time).
* ``hier-logistic`` (use ``--num-examples 100000``): a hierarchical logistic regression in
  50 groups (`HierLogistic`, 57 parameters). NUTS is TFP's
  ``tfp.experimental.mcmc.windowed_adaptive_nuts`` (1,000 warm-up and 1,000 kept draws,
  XLA), as a TFP user would call it; its draws, with their split R-hat and ESS, are the
  reference.

``sg.sample_posterior`` runs with its defaults. Run from the repository root. Prints one
JSON document: wall seconds, the worst standardised mean error and the range of sd ratios
against the reference for each, and the wall-time ratio:

```bash
python -m benchmarks.bench_sample_posterior_large --num-examples 1000000
python -m benchmarks.bench_sample_posterior_large --model hier-logistic --num-examples 100000
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


class HierLogistic:
    """A hierarchical logistic regression: ``N`` rows in ``G`` groups, ``K`` predictors.

    ``mu ~ N(0, 2)``, ``tau ~ HalfNormal(1)``, ``alpha_g ~ N(mu, tau)`` (centred: each
    group holds ``N / G`` rows, so the data pin every ``alpha_g``), ``beta ~ N(0, 1)``
    (``K`` coefficients) and ``y_i ~ Bernoulli(logit⁻¹(alpha_{g_i} + x_i · beta))``. The
    predictors are correlated (0.5) on scales from 0.3 to 3 and uncentred. The features
    handed to the samplers are ``[g_i, x_i]`` (the group index as the first column).

    Its posterior has no closed form: the reference is the timed ``windowed_adaptive_nuts``
    run itself (`nuts_reference`), its own split R-hat, ESS and divergences recorded beside
    it (``"reference_converged"``: R-hat at most 1.01, ESS at least 400, no divergence).
    """

    name = "hier-logistic"

    def __init__(self, num_examples: int, num_groups: int, num_features: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        scales = np.logspace(np.log10(0.3), np.log10(3.0), num_features)
        corr = np.linalg.cholesky(0.5 * np.ones((num_features,) * 2) + 0.5 * np.eye(num_features))
        x = (rng.standard_normal((num_examples, num_features)) @ corr.T) * scales + 0.5 * scales
        groups = rng.integers(0, num_groups, num_examples)
        alpha = -0.5 + 0.7 * rng.standard_normal(num_groups)
        beta = rng.standard_normal(num_features) / (2.0 * scales)
        logits = alpha[groups] + x @ beta
        y = (rng.uniform(size=num_examples) < 1.0 / (1.0 + np.exp(-logits))).astype(np.float64)
        self.num_groups, self.num_features = num_groups, num_features
        one = np.float64(1.0)
        self.prior = tfd.JointDistributionNamedAutoBatched(
            dict(
                mu=tfd.Normal(np.float64(0.0), 2.0 * one),
                tau=tfd.HalfNormal(one),
                alpha=lambda mu, tau: tfd.Sample(tfd.Normal(mu, tau), num_groups),
                beta=tfd.Sample(tfd.Normal(np.float64(0.0), one), num_features),
            )
        )
        self.data = (np.column_stack([groups.astype(np.float64), x]), y)
        self.event_shapes = {"mu": (), "tau": (), "alpha": (num_groups,), "beta": (num_features,)}
        self.truth: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    @staticmethod
    def likelihood_fn(p: Any, batch: Any) -> tfd.Distribution:
        features, _ = batch
        groups = tf.cast(features[:, 0], tf.int32)
        intercept = tf.gather(p["alpha"], groups, axis=-1)  # [..., n]
        logits = intercept + tf.einsum("nk,...k->...n", features[:, 1:], p["beta"])
        return tfd.Bernoulli(logits=logits, dtype=features.dtype)

    def set_reference(self, reference: dict[str, Any]) -> None:
        """``truth`` from a `nuts_reference` document."""
        self.truth = {
            k: (np.asarray(v["mean"]), np.asarray(v["sd"]))
            for k, v in reference["parameters"].items()
        }

    accuracy = Regression.accuracy


def nuts_reference(draws: dict[str, Any], trace: dict[str, Any]) -> dict[str, Any]:
    """NUTS draws (``[draws, chains, ...]`` by part) as a reference: each part's mean and sd,
    with the worst rank-normalised split R-hat and the smallest bulk ESS over all scalars
    (``tfp.mcmc``'s estimators) and the divergences, so the reader can see it converged."""
    params, rhats, esss = {}, [], []
    for k, v in draws.items():
        v = np.asarray(v, np.float64)
        flat = v.reshape(v.shape[0] * v.shape[1], -1)
        params[k] = {
            "mean": flat.mean(0).reshape(v.shape[2:]).tolist(),
            "sd": flat.std(0).reshape(v.shape[2:]).tolist(),
        }
        rhats.append(float(np.max(tfp.mcmc.potential_scale_reduction(v, split_chains=True))))
        ess = tfp.mcmc.effective_sample_size(
            v, cross_chain_dims=1, filter_beyond_positive_pairs=True
        )
        esss.append(float(np.min(ess)))
    return {
        "max_split_rhat": max(rhats),
        "min_ess": min(esss),
        "divergences": int(np.sum(trace["diverging"])),
        "parameters": params,
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


def _nuts_record(seconds: float, warmup: int, results: int, trace: Any) -> dict[str, Any]:
    """A NUTS run's wall time, draw counts and mean leapfrog steps an iteration."""
    return {
        "seconds": seconds,
        "num_warmup": warmup,
        "num_results": results,
        "mean_leapfrogs": float(np.mean(trace["n_steps"])),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("regression", "hier-logistic"), default="regression")
    parser.add_argument("--num-examples", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=26, help="regression: predictors")
    parser.add_argument("--num-groups", type=int, default=50, help="hier-logistic: groups")
    parser.add_argument("--num-features", type=int, default=5, help="hier-logistic: predictors")
    parser.add_argument("--num-results", type=int, default=1000)
    parser.add_argument(
        "--nuts-warmup",
        type=int,
        default=None,
        help="default 500 (regression) or 1000 (hier-logistic)",
    )
    parser.add_argument(
        "--nuts-results",
        type=int,
        default=None,
        help="default 500 (regression) or 1000 (hier-logistic)",
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    import tfp_sgmcmc as sg

    hier = args.model == "hier-logistic"
    nuts_warmup = args.nuts_warmup or (1000 if hier else 500)
    nuts_results = args.nuts_results or (1000 if hier else 500)
    out: dict[str, Any] = {"model": args.model, "num_examples": args.num_examples}
    if hier:
        model: Any = HierLogistic(args.num_examples, args.num_groups, args.num_features, args.seed)
        dim = 2 + args.num_groups + args.num_features
        # NUTS first: its draws are the reference sample_posterior is measured against.
        t0 = time.perf_counter()
        draws, trace = check_nuts.run_windowed(model, nuts_results, 4, nuts_warmup, args.seed, True)
        nuts_wall = time.perf_counter() - t0
        reference = nuts_reference(draws, trace)
        model.set_reference(reference)
        out["nuts_windowed"] = {
            **_nuts_record(nuts_wall, nuts_warmup, nuts_results, trace),
            **{k: v for k, v in reference.items() if k != "parameters"},
            "reference_converged": bool(
                reference["max_split_rhat"] <= 1.01
                and reference["min_ess"] >= 400
                and reference["divergences"] == 0
            ),
        }
    else:
        model = Regression(args.num_examples, args.dim, args.seed)
        dim = args.dim + 1
    post = sg.JointPosterior(model.prior, model.likelihood_fn, model.data, batch_size=1000)
    t0 = time.perf_counter()
    res = sg.sample_posterior(post, num_results=args.num_results, seed=args.seed)
    sg_wall = time.perf_counter() - t0
    out["dim"] = dim
    out["sample_posterior"] = {
        "seconds": sg_wall,
        "timings": res.timings,
        "verdict": res.verdict,
        "reasons": res.reasons,
        "notes": res.notes,
        "step_size": res.step_size,
        "batch_size": res.batch_size,
        **model.accuracy(res.draws),
    }
    if not hier:
        t0 = time.perf_counter()
        # check_nuts's own Newton search stalls on 10^6 rows with predictor scales 10^6
        # apart; NUTS gets its mode and dense metric from the library's (timed as NUTS's).
        check_nuts.laplace = lambda target: _library_laplace(post, target)
        draws, trace = check_nuts.run_dense(model, nuts_results, 4, nuts_warmup, args.seed, True)
        nuts_wall = time.perf_counter() - t0
        out["nuts_dense"] = {
            **_nuts_record(nuts_wall, nuts_warmup, nuts_results, trace),
            **model.accuracy(draws),
        }
    out["wall_ratio_sample_posterior_over_nuts"] = sg_wall / nuts_wall
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
