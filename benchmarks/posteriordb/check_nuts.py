"""Check the TFP transcriptions of the posteriordb posteriors with TFP's NUTS.

For each posterior of `models` this runs NUTS in float64 on the full data and compares its
draws with posteriordb's reference summary (``<name>/reference.json``, 10 x 1,000 Stan NUTS
draws):

* ``max_abs_z_mean``: the largest ``|mean - ref mean| / ref sd`` over the parameters;
* ``min_sd_ratio``, ``max_sd_ratio``: the extremes of ``sd / ref sd``;
* ``wall_s``: wall-clock seconds of the whole check of one posterior (the Laplace fit, and
  tracing, XLA compilation and sampling in one call of a compiled function);
* diagnostics of the NUTS run itself: the smallest ESS and largest split R-hat over the
  parameters, the number of divergent transitions after warm-up, the mean number of
  leapfrog steps per draw and the adapted step size.

A transcription passes when ``max_abs_z_mean <= 0.1`` and both sd ratios lie in
``[0.9, 1.1]``. NUTS's own Monte Carlo error on one parameter is about ``1/sqrt(ESS)`` on a
standardised mean and ``1/sqrt(2 ESS)`` on an sd ratio (0.016 and 0.011 at ESS = 4,000).

The target is written here from the transcription's ``prior`` and ``likelihood_fn`` alone,
independently of ``tfp_sgmcmc``: ``log p(θ) + Σ_i log p(y_i | θ, x_i)`` on the unconstrained
space of the prior's default event-space bijectors, with their log-det-Jacobian (the space
and density ``tfp_sgmcmc.JointPosterior`` samples; ``tests/test_posteriordb_models.py``
checks that the two densities agree). Two samplers (``--method``):

* ``dense`` (default): ``tfp.mcmc.NoUTurnSampler`` (tree depth up to 10) with a dense
  metric: the chains run on ``w`` with ``z = ẑ + L w``, ``ẑ`` the mode of the unconstrained
  density (damped Newton) and ``L Lᵀ`` the inverse of minus its Hessian there (the Laplace
  covariance), the step size adapted by dual averaging (target acceptance 0.8) during the
  first 80% of the warm-up. The map is linear, so the target is unchanged;
  only the sampler's efficiency depends on how well ``L`` fits.
* ``windowed``: ``tfp.experimental.mcmc.windowed_adaptive_nuts`` (diagonal metric and step
  size adapted in windows) on the same model as a pinned joint distribution
  (`posterior_model`). Fine on the three small posteriors; on ``diamonds-diamonds``, whose
  24 centred predictors are strongly correlated, a diagonal metric leaves NUTS at its
  maximum tree depth (1,023 leapfrog steps per draw) with an ESS in the tens: far beyond a
  few minutes on two cores.

```bash
python -m benchmarks.posteriordb.check_nuts --json benchmarks/results/posteriordb_nuts.json
python -m benchmarks.posteriordb.check_nuts --posteriors sblrc-blr --num-results 200
python -m benchmarks.posteriordb.check_nuts --method windowed --posteriors sblrc-blr nes2000-nes
python -m benchmarks.posteriordb.check_nuts --posteriors nes1972-nes nes1976-nes \
    --json benchmarks/results/posteriordb_nuts.json --merge
```

The JSON goes to stdout (and to ``--json``), a table to stderr. With ``--merge`` the rows of
this run replace those of the same posteriors in the existing ``--json`` file and the others
are kept (the configurations must agree), so the posteriors can be checked a few at a time.
The exit status is 1 when a posterior of this run misses the tolerances.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import keyword
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

tfd = tfp.distributions

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


models = load("posteriordb.models")
common = load("_common")

MEAN_TOLERANCE = 0.1
SD_RATIO_RANGE = (0.9, 1.1)
METHODS = ("dense", "windowed")


# -- the target ---------------------------------------------------------------- #
class UnconstrainedTarget:
    """``log π_z(z)`` of a transcription on a flat unconstrained vector ``z`` (``[..., D]``).

    ``z`` concatenates the parts in the prior's order (``m.prior.model``), each mapped to
    its support by the prior's default event-space bijector.
    """

    def __init__(self, m: Any) -> None:
        self.m = m
        self.names = list(m.prior.model)
        self.bijector = event_space_bijector(m.prior)
        # Each part's unconstrained shape: a simplex of K has K - 1 free coordinates.
        shapes = self.bijector.inverse_event_shape(
            {k: tf.TensorShape(s) for k, s in m.event_shapes.items()}
        )
        self.shapes = [tuple(tf.TensorShape(shapes[k]).as_list()) for k in self.names]
        self.sizes = [int(np.prod(s, dtype=np.int64)) for s in self.shapes]
        self.dim = sum(self.sizes)
        self.x, self.y = (tf.constant(a) for a in m.data)

    def split(self, z: tf.Tensor) -> dict[str, tf.Tensor]:
        """The flat ``z`` as a dict of unconstrained parts."""
        pieces = tf.split(z, self.sizes, axis=-1)
        batch = tf.shape(z)[:-1]
        return {
            k: tf.reshape(p, tf.concat([batch, tf.constant(s, tf.int32)], 0))
            for k, p, s in zip(self.names, pieces, self.shapes)
        }

    def constrain(self, z: tf.Tensor) -> dict[str, tf.Tensor]:
        """``θ = f(z)`` by part name."""
        return dict(self.bijector.forward(self.split(z)))

    def __call__(self, z: tf.Tensor) -> tf.Tensor:
        parts = self.split(z)
        theta = self.bijector.forward(parts)
        ldj = self.bijector.forward_log_det_jacobian(
            parts, event_ndims={k: len(s) for k, s in zip(self.names, self.shapes)}
        )
        log_lik = tf.reduce_sum(
            self.m.likelihood_fn(theta, (self.x, self.y)).log_prob(self.y), axis=-1
        )
        return self.m.prior.log_prob(theta) + log_lik + ldj


def event_space_bijector(prior: Any) -> Any:
    """The prior's default event-space bijector, taken part by part where it can be.

    A ``JointDistributionNamedAutoBatched`` vectorises its bijector over the chains with
    ``pfor``, and there the gradient of a softplus (the bijector of a positive scale) is
    NaN once its argument is in the thousands (``earnings-earn_height``'s ``sigma`` is
    about 19,000 dollars): NUTS then diverges on every step. When the parts are independent
    distributions, the same maps are the bijectors of ``tfd.JointDistributionNamed`` over
    the same parts, which broadcast over the chains without ``pfor``.
    """
    parts = getattr(prior, "model", None)
    if isinstance(prior, tfd.JointDistributionNamedAutoBatched) and all(
        isinstance(d, tfd.Distribution) for d in parts.values()
    ):
        return tfd.JointDistributionNamed(dict(parts)).experimental_default_event_space_bijector()
    return prior.experimental_default_event_space_bijector()


def laplace(target: UnconstrainedTarget, max_iterations: int = 200) -> tuple[tf.Tensor, tf.Tensor]:
    """The mode ``ẑ`` of ``target`` and the Cholesky factor ``L`` of ``(-∇² log π_z(ẑ))⁻¹``.

    Damped Newton from ``z = 0`` (Levenberg-Marquardt: ``-∇²`` plus ``λ I`` until it is
    positive definite, then a backtracking line search), stopped when the Newton decrement
    ``gᵀ(-∇²)⁻¹g`` falls under ``max(1e-12, 1e-14 |log π|)``.
    L-BFGS from the same start overshoots to absurd
    scales on ``kidiq`` and ``sblrc`` (a scale of ``softplus(0)`` against residuals in the
    tens); with 5 to 26 parameters the exact Hessian is cheap.

    Where automatic differentiation gives a Hessian that is not finite, it is replaced by
    central differences of the (automatic) gradient, `_difference_hessian`: the second
    derivative of ``tfp.bijectors.Softplus`` (the default bijector of a positive scale) is
    NaN in float64 for arguments beyond about 710, where ``exp`` overflows, so a scale
    beyond 710 in its own units (``earnings-earn_height``'s ``sigma`` is about 19,000
    dollars) has no autodiff Hessian on the way to the mode or at it.

    Raises:
      FloatingPointError: no mode within ``max_iterations`` steps.
    """
    dtype = target.y.dtype.as_numpy_dtype

    @tf.function(autograph=False)
    def value(z: tf.Tensor) -> tf.Tensor:
        return target(z)

    @tf.function(autograph=False)
    def gradient(z: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            tape.watch(z)
            lp = target(z)
        return tape.gradient(lp, z)

    @tf.function(autograph=False)
    def autodiff_derivatives(z: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        with tf.GradientTape() as outer:
            outer.watch(z)
            with tf.GradientTape() as inner:
                inner.watch(z)
                lp = target(z)
            g = inner.gradient(lp, z)
        h = outer.jacobian(g, z)
        return lp, g, 0.5 * (h + tf.transpose(h))

    no_autodiff_hessian: list[bool] = []  # set once the automatic Hessian has failed

    def derivatives(z: tf.Tensor) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        try:
            if no_autodiff_hessian:
                raise ValueError("known")
            f, g, h = (t.numpy() for t in autodiff_derivatives(z))
        except ValueError:
            # The Jacobian's vectorisation cannot see through a loop in the target (the
            # ODE models' tf.scan): the Hessian by differences of the gradient instead.
            no_autodiff_hessian.append(True)
            f, g = float(value(z)), gradient(z).numpy()
            h = np.full((g.size, g.size), np.nan)
        if np.all(np.isfinite(g)) and not np.all(np.isfinite(h)):
            h = _difference_hessian(lambda v: gradient(tf.constant(v)).numpy(), z.numpy())
        return f, g, h

    def damped_precision(h: np.ndarray) -> np.ndarray:
        """Cholesky factor of ``-h + λ I`` for the smallest tried ``λ`` that makes it PD."""
        a, eye = -h, np.eye(h.shape[0])
        lam = 0.0
        while True:
            try:
                return np.linalg.cholesky(a + lam * eye)
            except np.linalg.LinAlgError:
                lam = max(2.0 * lam, 1e-6 * max(np.abs(np.diag(a)).max(), 1.0))

    z = np.zeros(target.dim, dtype)
    for _ in range(max_iterations):
        f, g, h = derivatives(tf.constant(z))
        c = damped_precision(h)
        step = np.linalg.solve(c.T, np.linalg.solve(c, g))
        decrement = float(g @ step)
        # 1e-12, or the float64 resolution of a log-density of |f| nats (10^6 rows).
        if decrement < max(1e-12, 1e-14 * abs(float(f))):
            break
        t = 1.0
        while t > 1e-12:
            f_new = float(value(tf.constant(z + t * step)))
            if np.isfinite(f_new) and f_new >= f + 1e-4 * t * decrement:
                break
            t *= 0.5
        z = z + t * step
    else:
        raise FloatingPointError(f"{target.m.name}: no mode after {max_iterations} steps")
    _, _, h = derivatives(tf.constant(z))
    try:
        chol = np.linalg.cholesky(np.linalg.inv(-h))
    except np.linalg.LinAlgError:
        raise FloatingPointError(
            f"{target.m.name}: the Hessian at the mode is not negative definite"
        ) from None
    return tf.constant(z), tf.constant(chol)


def _difference_hessian(gradient: Callable[[np.ndarray], np.ndarray], z: np.ndarray) -> np.ndarray:
    """The symmetrised Hessian at ``z`` by central differences of ``gradient``:
    ``H[:, i] = (∇(z + ε_i e_i) - ∇(z - ε_i e_i)) / (2 ε_i)``, ``ε_i = 1e-5 max(1, |z_i|)``
    (error ``O(ε²)`` from the third derivative plus ``O(δ / ε)`` from the gradient's
    rounding ``δ``; the dense metric only needs the Hessian roughly, the target is exact)."""
    h = np.empty((z.size, z.size), z.dtype)
    for i in range(z.size):
        eps = 1e-5 * max(1.0, abs(float(z[i])))
        e = np.zeros_like(z)
        e[i] = eps
        h[:, i] = (gradient(z + e) - gradient(z - e)) / (2.0 * eps)
    return 0.5 * (h + h.T)


# -- the samplers ------------------------------------------------------------------ #
def run_dense(
    m: Any, num_results: int, num_chains: int, num_warmup: int, seed: int, jit: bool
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """NUTS on ``w``, ``z = ẑ + L w`` (a dense metric from the Laplace fit)."""
    target = UnconstrainedTarget(m)
    mode, chol = laplace(target)

    def to_z(w: tf.Tensor) -> tf.Tensor:
        return mode + tf.einsum("ij,...j->...i", chol, w)

    def target_w(w: tf.Tensor) -> tf.Tensor:
        return target(to_z(w))

    def sample(seed: tf.Tensor) -> tuple[dict[str, tf.Tensor], dict[str, tf.Tensor]]:
        init_seed, chain_seed = tfp.random.split_seed(seed)
        w0 = tf.random.stateless_normal([num_chains, target.dim], init_seed, dtype=mode.dtype)
        nuts = tfp.mcmc.NoUTurnSampler(
            target_w, step_size=tf.constant(0.5, mode.dtype), max_tree_depth=10
        )
        kernel = tfp.mcmc.DualAveragingStepSizeAdaptation(
            nuts, num_adaptation_steps=int(0.8 * num_warmup), target_accept_prob=0.8
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

    fn = tf.function(sample, jit_compile=jit, autograph=False)
    return common.sync(fn(tf.constant([seed, 0], tf.int32)))


def _field(name: str) -> str:
    """A part's name as a field of the pinned distribution's namedtuple: a Python keyword
    (Stan's ``lambda``) gets a trailing underscore, as a namedtuple field cannot be one."""
    return name + "_" if keyword.iskeyword(name) else name


def posterior_model(m: Any) -> tfd.JointDistributionCoroutineAutoBatched:
    """``p(θ, y)`` as one joint distribution: the prior's parts, then ``y`` given them.

    Pin ``y`` to the observations (``windowed_adaptive_nuts(..., y=y)``) for the posterior.
    A prior part that depends on earlier parts (a callable) is called with them. A part
    named by a Python keyword is named `_field` in the distribution.
    """
    x, y = (tf.constant(a) for a in m.data)
    parts = m.prior.model

    def generative() -> Any:
        params = {}
        for name, dist in parts.items():
            if not isinstance(dist, tfd.Distribution):
                # A part that depends on earlier ones: called with them by argument name,
                # as `tfd.JointDistributionNamed` calls it.
                args = inspect.signature(dist).parameters
                dist = dist(**{a: params[a] for a in args})
            params[name] = yield dist.copy(name=_field(name))
        yield m.likelihood_fn(params, (x, y)).copy(name="y")

    return tfd.JointDistributionCoroutineAutoBatched(generative)


def run_windowed(
    m: Any, num_results: int, num_chains: int, num_warmup: int, seed: int, jit: bool
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """``tfp.experimental.mcmc.windowed_adaptive_nuts`` on the pinned `posterior_model`.

    Where XLA cannot compile the sampler (TFP's automatic batching of a model with a
    ``tf.while_loop`` over a ``TensorArray``, as the hidden Markov models' forward
    algorithm, has no XLA kernel), it runs as a plain ``tf.function``, as a user would
    then; the trace's ``"xla"`` says which ran.
    """
    model = posterior_model(m)
    y = tf.constant(m.data[1])

    def sample(seed: tf.Tensor) -> Any:
        return tfp.experimental.mcmc.windowed_adaptive_nuts(
            num_results,
            model,
            n_chains=num_chains,
            num_adaptation_steps=num_warmup,
            seed=seed,
            y=y,
        )

    def run(xla: bool) -> Any:
        fn = tf.function(sample, jit_compile=xla, autograph=False)
        return common.sync(fn(tf.constant([seed, 0], tf.int32)))

    try:
        states, trace = run(jit)
    except tf.errors.InvalidArgumentError as e:
        if not (jit and "XLA" in str(e)):
            raise
        jit = False
        states, trace = run(jit)
    keep = ("diverging", "n_steps", "step_size")
    names = {_field(n): n for n in m.prior.model}
    draws = {names.get(k, k): v for k, v in states._asdict().items()}
    return draws, {**{k: trace[k] for k in keep}, "xla": np.asarray(jit)}


SAMPLERS: dict[str, Callable[..., tuple[dict[str, np.ndarray], dict[str, np.ndarray]]]] = {
    "dense": run_dense,
    "windowed": run_windowed,
}


# -- the comparison ------------------------------------------------------------------ #
def summarise(m: Any, draws: dict[str, np.ndarray]) -> dict[str, Any]:
    """Per-parameter and worst-case agreement of ``draws`` (``[draws, chains, ...]`` by part
    name) with ``m.reference``."""
    flat = m.flatten(draws)  # Stan name -> [draws, chains]
    per_param = {}
    for name, ref in m.reference.items():
        if name not in flat:
            continue  # a generated quantity of the Stan program, not a parameter
        v = flat[name]
        sd = float(v.std(ddof=1))
        per_param[name] = {
            "mean": float(v.mean()),
            "sd": sd,
            "z_mean": float((v.mean() - ref.mean) / ref.sd),
            "sd_ratio": sd / ref.sd,
            "ess": float(
                tfp.mcmc.effective_sample_size(
                    v, cross_chain_dims=1, filter_beyond_positive_pairs=True
                ).numpy()
            ),
            "rhat": float(tfp.mcmc.potential_scale_reduction(v, split_chains=True).numpy()),
        }
    missing = sorted(set(flat) - set(per_param))
    if missing:
        raise ValueError(f"{m.name}: no reference for {missing}")
    z = {k: abs(p["z_mean"]) for k, p in per_param.items()}
    r = {k: p["sd_ratio"] for k, p in per_param.items()}
    worst_z = max(z, key=z.__getitem__)
    lo, hi = min(r, key=r.__getitem__), max(r, key=r.__getitem__)
    out: dict[str, Any] = {
        "max_abs_z_mean": z[worst_z],
        "max_abs_z_mean_at": worst_z,
        "min_sd_ratio": r[lo],
        "min_sd_ratio_at": lo,
        "max_sd_ratio": r[hi],
        "max_sd_ratio_at": hi,
        "min_ess": min(p["ess"] for p in per_param.values()),
        "max_rhat": max(p["rhat"] for p in per_param.values()),
    }
    out["passed"] = bool(
        out["max_abs_z_mean"] <= MEAN_TOLERANCE
        and SD_RATIO_RANGE[0] <= out["min_sd_ratio"]
        and out["max_sd_ratio"] <= SD_RATIO_RANGE[1]
    )
    out["parameters"] = per_param
    return out


def run_one(
    name: str,
    method: str,
    num_results: int,
    num_chains: int,
    num_warmup: int,
    seed: int,
    jit: bool,
) -> dict[str, Any]:
    """NUTS on posterior ``name`` and its comparison with the reference."""
    m = models.load(name, dtype=np.float64)
    t0 = time.perf_counter()
    draws, trace = SAMPLERS[method](m, num_results, num_chains, num_warmup, seed, jit)
    wall = time.perf_counter() - t0
    out: dict[str, Any] = {
        "name": name,
        "method": method,
        "num_examples": m.num_examples,
        "num_parameters": len(m.flatten({k: v[:1] for k, v in draws.items()})),
        "wall_s": round(wall, 2),
    }
    out.update(summarise(m, draws))
    out["divergences"] = int(np.sum(trace["diverging"]))
    out["mean_leapfrogs"] = float(np.mean(trace["n_steps"]))
    out["step_size"] = float(np.mean(trace["step_size"]))
    # Merged files gather runs made at different times: keep each row's machine load.
    out["load_average"] = common.load_average()
    return out


def merge(previous: dict[str, Any], doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with ``previous``'s results for the posteriors ``doc`` did not run.

    Rows are ordered as `models.NAMES` (unknown names last, in their previous order);
    ``all_passed`` covers every row.

    Raises:
      ValueError: the two documents' ``config`` differ (their rows would not be comparable).
    """
    if previous.get("config") != doc["config"]:
        raise ValueError(
            f"--merge: the existing file's config {previous.get('config')} differs from this "
            f"run's {doc['config']}; rerun with the same options or write another --json file"
        )
    rows = {r["name"]: r for r in previous.get("results", [])}
    rows.update({r["name"]: r for r in doc["results"]})
    order = {name: i for i, name in enumerate(models.NAMES)}
    results = sorted(rows.values(), key=lambda r: order.get(r["name"], len(order)))
    out = dict(doc)
    out["results"] = results
    out["all_passed"] = all(r["passed"] for r in results)
    return out


def table(results: list[dict[str, Any]]) -> str:
    """The per-posterior figures as a fixed-width table."""
    w = max([len("posterior")] + [len(r["name"]) for r in results])
    head = (
        f"{'posterior':{w}s} {'method':8s} {'N':>5s} {'d':>3s} {'max|z|':>7s} {'sd min':>7s} "
        f"{'sd max':>7s} {'minESS':>7s} {'Rhat':>6s} {'div':>4s} {'leapfr':>7s} {'wall s':>7s} ok"
    )
    lines = [head]
    for r in results:
        lines.append(
            f"{r['name']:{w}s} {r['method']:8s} {r['num_examples']:5d} {r['num_parameters']:3d} "
            f"{r['max_abs_z_mean']:7.3f} {r['min_sd_ratio']:7.3f} {r['max_sd_ratio']:7.3f} "
            f"{r['min_ess']:7.0f} {r['max_rhat']:6.3f} {r['divergences']:4d} "
            f"{r['mean_leapfrogs']:7.1f} {r['wall_s']:7.1f} {'yes' if r['passed'] else 'NO'}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--posteriors", nargs="+", default=list(models.NAMES), choices=list(models.NAMES)
    )
    parser.add_argument("--method", default="dense", choices=METHODS)
    parser.add_argument("--num-results", type=int, default=1000, help="draws per chain")
    parser.add_argument("--num-chains", type=int, default=4)
    parser.add_argument("--num-warmup", type=int, default=1000, help="warm-up steps per chain")
    parser.add_argument("--seed", type=int, default=20250429)
    parser.add_argument("--no-jit", action="store_true", help="plain tf.function, no XLA")
    parser.add_argument("--json", default=None, help="also write the JSON document here")
    parser.add_argument(
        "--merge",
        action="store_true",
        help="merge this run's rows into the existing --json file instead of replacing it",
    )
    args = parser.parse_args(argv)
    if args.merge and args.json is None:
        parser.error("--merge needs --json FILE (the file to merge into)")

    load_start = common.load_average()
    results = []
    for name in args.posteriors:
        common.log(
            f"{name}: {args.method}, {args.num_chains} chains x ({args.num_warmup} "
            f"warm-up + {args.num_results}) NUTS steps ..."
        )
        r = run_one(
            name,
            args.method,
            args.num_results,
            args.num_chains,
            args.num_warmup,
            args.seed,
            jit=not args.no_jit,
        )
        common.log(
            f"  {r['wall_s']:.1f} s, max|z| {r['max_abs_z_mean']:.3f}, sd ratio "
            f"[{r['min_sd_ratio']:.3f}, {r['max_sd_ratio']:.3f}]"
        )
        results.append(r)
    common.log(table(results))
    doc = {
        "benchmark": "posteriordb_nuts",
        "what": "TFP NUTS on the TFP transcriptions of posteriordb posteriors against "
        "posteriordb's reference draws (benchmarks/posteriordb/README.md)",
        "config": {
            "method": args.method,
            "num_chains": args.num_chains,
            "num_results": args.num_results,
            "num_warmup": args.num_warmup,
            "dtype": "float64",
            "jit_compile": not args.no_jit,
            "seed": args.seed,
            "mean_tolerance": MEAN_TOLERANCE,
            "sd_ratio_range": list(SD_RATIO_RANGE),
        },
        "environment": common.environment(),
        "load_average": {"start": load_start, "end": common.load_average()},
        "results": results,
        "all_passed": all(r["passed"] for r in results),
    }
    this_run_passed = doc["all_passed"]
    if args.merge and Path(args.json).is_file():
        with open(args.json, encoding="utf-8") as f:
            doc = merge(json.load(f), doc)
    common.dump_json(doc, args.json)
    return 0 if this_run_passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
