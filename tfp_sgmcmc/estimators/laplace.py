r"""The posterior's scale from its mode: a robust MAP search and the curvature there.

SG-MCMC needs the posterior's scale twice: the step size must keep the stiffest
direction stable (``ε λ_max < 2`` for SGLD, ``λ_max`` the largest eigenvalue of
``−∇² log π``, which grows with ``N`` and with the predictors' scale), and a
preconditioner must give the other directions the same scale. Both come from
the Laplace approximation at the mode ``m``:

```none
m = argmax_z log π(z)                      (L-BFGS from several starts)
A = −∇² log π(m)                           (Hessian on the full data)
Σ = A⁻¹ = L Lᵀ                             (the Laplace covariance)
```

`find_mode` tries, up to ``polish_max_dim`` coordinates, Newton's method with
the exact Hessian and a backtracking line search from each start in turn
(eigenvalues of a non-concave Hessian floored), and returns the first point
where it converges. Otherwise (or above that dimension) it runs L-BFGS
(``tfp.optimizer.lbfgs_minimize``, on ``log π / N`` so the first trial step has
unit scale) from each start, polishes the best points with Newton's method
where it can, and keeps the best converged point; when none converges it says
so and falls back to Adam on the full-data gradient, then L-BFGS; when that
fails too it raises a ``ValueError``. `laplace_approximation` computes ``A`` by differentiating the
full-data score (one reverse pass per coordinate) for ``d ≤ max_dense_dim``,
or its diagonal by Hutchinson's estimator ``diag A ≈ E[v ⊙ A v]`` with
Rademacher ``v`` (Bekas, Kokiopoulou & Saad 2007) above that. Along a direction
where the dense curvature is not positive definite (a saddle, a flat direction)
the scale is measured where log π has dropped by 1/2 (the width of a Gaussian of
that curvature), else floored, with a note; a non-positive diagonal value is
floored. ``docs/algorithms.md#preconditioning``.

#### References

[1]: Pierre-Simon Laplace. Mémoire sur la probabilité des causes par les
     événements, 1774; see e.g. Bishop, _Pattern Recognition and Machine
     Learning_, Sec. 4.4, 2006.
[2]: Costas Bekas, Effrosyni Kokiopoulou and Yousef Saad. An estimator for the
     diagonal of a matrix. _Applied Numerical Mathematics_ 57, 2007.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf

from tfp_sgmcmc.estimators.base import GradientEstimate, GradientEstimator, WrappingEstimator
from tfp_sgmcmc.estimators.map import find_map
from tfp_sgmcmc.internal.autograph import needs_autograph
from tfp_sgmcmc.internal.util import as_parts

__all__ = [
    "LaplaceApproximation",
    "LocalMode",
    "MIN_DIP",
    "ModeResult",
    "PerExampleEstimator",
    "RUNAWAY_GAIN",
    "find_mode",
    "laplace_approximation",
    "local_modes",
]

#: Two local maxima are distinct modes when ``log π`` on the straight path between
#: them falls this far (nats) below the lower of the two: a barrier a chain must climb.
MIN_DIP = 1.0

#: A Newton search whose ``log π`` rose by more than this over each of its last two
#: windows of `_RUNAWAY_WINDOW` iterations, without slowing down, is running away.
RUNAWAY_GAIN = 1.0
_RUNAWAY_WINDOW = 10


class ModeResult(NamedTuple):
    """Result of `find_mode`.

    Attributes:
      position: the mode (list of parts, no chain dimensions).
      log_prob: the full-data ``log π`` there.
      converged: whether L-BFGS met its tolerance there.
      method: how it was found, e.g. ``"lbfgs from start 0"``.
      notes: what was tried and failed, one sentence each.
      unbounded: whether every search ran away with ``log π`` still rising at a
        steady rate (`RUNAWAY_GAIN`): the density looks unbounded (a scale
        parameter going to zero in a centred hierarchy, say) and has no mode;
        ``position`` is then the first start, not a mode.
    """

    position: list[tf.Tensor]
    log_prob: float
    converged: bool
    method: str
    notes: list[str]
    unbounded: bool = False


class LaplaceApproximation(NamedTuple):
    """Result of `laplace_approximation`.

    Attributes:
      mode: the mode (list of parts, no chain dimensions).
      precision: ``A = −∇² log π(m)`` as float64: ``[d, d]``, or ``[d]``
        (its diagonal) when ``dense`` is ``False``; non-positive-definite
        directions replaced by their measured (or floored) curvature.
      scale: ``L`` with ``Σ = L Lᵀ = A⁻¹``: lower triangular ``[d, d]``, or
        ``[d]`` standard deviations.
      lambda_max: the largest eigenvalue of ``A`` (of its diagonal when not
        dense): the stiffest direction.
      dense: whether ``A`` is the full matrix.
      notes: what was adjusted (measured or floored directions), one sentence each.
    """

    mode: list[tf.Tensor]
    precision: np.ndarray
    scale: np.ndarray
    lambda_max: float
    dense: bool
    notes: list[str]

    @property
    def covariance(self) -> np.ndarray:
        """``Σ = L Lᵀ`` (``[d, d]``), or its diagonal ``[d]``."""
        return self.scale @ self.scale.T if self.dense else self.scale**2


class PerExampleEstimator(WrappingEstimator):
    """``log π / N`` on the full data: the same maximiser, gradients of order one.

    L-BFGS starts with the identity as inverse Hessian, so its first trial step is
    the raw gradient; with ``N`` in the thousands that step overshoots by orders of
    magnitude (in float32, into a flat region where it stalls). Shared by
    `find_mode` and ``JointPosterior.find_map``; it has no stochastic estimate (calling
    it raises ``NotImplementedError``), only ``full_log_prob_and_gradient``.

    Args:
      inner: the estimator whose full-data ``log π`` is scaled.
      num_examples: ``N``, the divisor.
    """

    def __init__(self, inner: GradientEstimator, num_examples: float) -> None:
        super().__init__(inner)
        self._n = float(num_examples)

    def bootstrap(self, state: Any) -> Any:
        return self._base.bootstrap(state)

    def _estimate(self, state: Any, estimator_state: Any, seed: tf.Tensor):
        raise NotImplementedError("only the full-data log-density is used (mode search).")

    def validate_state(self, state: Any, arg_name: str = "init_state") -> None:
        self._base.validate_state(state, arg_name)

    def full_log_prob_and_gradient(self, state: Any) -> GradientEstimate:
        est = self._base.full_log_prob_and_gradient(state)
        scale = tf.constant(1.0 / self._n, est.target_log_prob.dtype)
        return GradientEstimate(
            scale * est.target_log_prob, [scale * g for g in est.grads_target_log_prob]
        )


def _flat_fns(
    estimator: GradientEstimator, like: Sequence[tf.Tensor]
) -> tuple[Callable[[tf.Tensor], tf.Tensor], Callable[[tf.Tensor], list[tf.Tensor]]]:
    shapes = [p.shape for p in like]
    sizes = [int(np.prod(s)) for s in shapes]

    def unflatten(x: tf.Tensor) -> list[tf.Tensor]:
        return [tf.reshape(c, s) for c, s in zip(tf.split(x, sizes), shapes)]

    def flat_grad(x: tf.Tensor) -> tf.Tensor:
        est = estimator.full_log_prob_and_gradient(unflatten(x))
        return tf.concat([tf.reshape(g, [-1]) for g in est.grads_target_log_prob], 0)

    return flat_grad, unflatten


def _full_log_prob(estimator: GradientEstimator, parts: list[tf.Tensor]) -> float:
    return float(estimator.full_log_prob_and_gradient(parts).target_log_prob)


class _Searcher:
    """The flat score, Hessian and log-density of one estimator, traced once each and
    shared by every Newton search of a call (one trace per search would retrace the
    same functions again and again, which is slow and makes TensorFlow warn)."""

    def __init__(self, estimator: GradientEstimator, like: Sequence[tf.Tensor]) -> None:
        self.shapes = [tuple(p.shape) for p in like]
        self.flat_grad, self.unflatten = _flat_fns(estimator, like)
        ag = needs_autograph(estimator)  # the user's functions are converted where called
        self.grad = tf.function(self.flat_grad, autograph=ag)
        jac = _hessian_fn(self.flat_grad, ag)
        self.hessian = lambda x: _finite_hessian(jac, self.grad, x)
        unflatten = self.unflatten
        self.value = tf.function(
            lambda v: estimator.full_log_prob_and_gradient(unflatten(v)).target_log_prob,
            autograph=ag,
        )

    def fits(self, parts: Sequence[tf.Tensor]) -> bool:
        return [tuple(p.shape) for p in parts] == self.shapes


def find_mode(
    estimator: GradientEstimator,
    starts: Sequence[Any],
    num_examples: int | None = None,
    num_steps: int = 300,
    log: Callable[[str], None] | None = None,
    polish_max_dim: int | None = 1000,
) -> ModeResult:
    """The mode of the full-data ``log π`` of ``estimator``, tried from several starts.

    Args:
      estimator: an estimator with a full-data log-density
        (``full_log_prob_and_gradient``).
      starts: candidate starting states (lists of parts, no chain dimensions);
        the first is tried first. Starts where ``log π`` is not finite are
        skipped.
      num_examples: ``N``, to search on ``log π / N``. Default value: ``None``
        (the estimator's ``num_examples``, or 1).
      num_steps: L-BFGS iterations per start. Default value: ``300``.
      log: called with a one-line message for each fallback. Default value:
        ``None`` (silent; the notes are returned).
      polish_max_dim: up to this many coordinates, Newton's method with the
        exact Hessian is tried first from each start, and polishes the best
        L-BFGS results (``None``: never). Default value: ``1000``.

    Returns:
      A `ModeResult`: the first start where Newton's method converged, else the
      start whose L-BFGS run converged to the highest ``log π`` (or, when none
      converged, the Adam-then-L-BFGS fallback). When two Newton searches ran
      away (``log π`` still rising steadily, `RUNAWAY_GAIN`) and none converged,
      the search stops: ``unbounded`` is set and ``position`` is the first start.

    Raises:
      ValueError: ``starts`` is empty, or no start reached a finite ``log π``.
    """
    if not starts:
        raise ValueError("`starts` must hold at least one state.")
    say = log or (lambda _msg: None)
    n = num_examples or getattr(estimator, "num_examples", None) or 1
    scaled = PerExampleEstimator(estimator, n)
    notes: list[str] = []
    found: list[tuple[float, bool, list[tf.Tensor], str]] = []
    small = polish_max_dim is not None and _size(as_parts(starts[0])) <= polish_max_dim
    if small:
        # Newton's method with the exact Hessian, from each start in turn: on the
        # posteriors L-BFGS struggles with (scales spanning orders of magnitude, float32)
        # it converges in a few dozen iterations.
        runaways: list[tuple[int, list[tf.Tensor], float, float]] = []
        tried = 0
        searcher = _Searcher(estimator, [tf.convert_to_tensor(p) for p in as_parts(starts[0])])
        for i, start in enumerate(starts):
            parts = [tf.convert_to_tensor(p) for p in as_parts(start)]
            lp0 = _full_log_prob(estimator, parts)
            if not np.isfinite(lp0):
                notes.append(f"start {i} has no finite log density")
                say(f"mode search: start {i} has no finite log density; skipped")
                continue
            tried += 1
            pos, lp, ok, away = _newton(estimator, parts, lp0, 100, searcher)
            if ok:
                return ModeResult(pos, lp, True, f"Newton from start {i}", notes)
            if away:
                msg = (f"Newton from start {i} ran away: log π rose from {lp0:.6g} to "
                       f"{lp:.6g} without slowing down (no mode in that direction)")
                runaways.append((i, parts, lp0, lp))
            else:
                msg = f"Newton from start {i} did not converge (log π {lp:.6g})"
            notes.append(msg)
            say(f"mode search: {msg}")
            if len(runaways) >= 2 and len(runaways) == tried:
                # Two searches from different starts both climbing without bound: the
                # density has no mode to find, and L-BFGS and Adam would climb as long as
                # their budgets last (minutes). Stop here and say so.
                i0, parts0, lp0, _ = runaways[0]
                msg = (
                    f"no mode: {len(runaways)} Newton searches ran away with log π still "
                    f"rising (to {max(r[3] for r in runaways):.6g}); the density looks "
                    "unbounded (e.g. a scale parameter going to zero in a centred "
                    "hierarchy)"
                )
                notes.append(msg)
                return ModeResult(parts0, lp0, False, f"none (start {i0} kept)", notes, True)
    for i, start in enumerate(starts):
        parts = [tf.convert_to_tensor(p) for p in as_parts(start)]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                res = find_map(scaled, parts, num_steps=num_steps)
            except (ValueError, tf.errors.InvalidArgumentError) as e:
                notes.append(f"L-BFGS from start {i} could not run: {str(e).splitlines()[0]}")
                continue
        pos = list(as_parts(res.position))
        lp = _full_log_prob(estimator, pos)
        if not np.isfinite(lp):
            notes.append(f"L-BFGS from start {i} ended where log π is not finite.")
            continue
        ok = bool(res.converged) and not caught
        if not ok:
            notes.append(f"L-BFGS from start {i} did not converge ({res.num_iterations} its).")
            say(f"mode search: L-BFGS from start {i} did not converge (log π {lp:.6g})")
        found.append((lp, ok, pos, f"L-BFGS from start {i}"))
    if found and small:
        searcher = _Searcher(estimator, found[0][2])
        # L-BFGS stops early on an ill-conditioned posterior (in float32 above all);
        # Newton's method with the exact Hessian does not care about the conditioning.
        # The best points are polished until one converges.
        for k, (lp, ok, pos, how) in sorted(enumerate(found), key=lambda f: -f[1][0])[:2]:
            pos, lp, ok_newton, _ = _newton(estimator, pos, lp, 30, searcher)
            found[k] = (lp, ok or ok_newton, pos, how + (", Newton-polished" if ok_newton else ""))
            if ok_newton:
                break
    converged = [f for f in found if f[1]]
    if converged:
        lp, _, pos, how = max(converged, key=lambda f: f[0])
        return ModeResult(pos, lp, True, how, notes)
    # No start converged: Adam on the full-data gradient from the best point reached
    # (or the first start), then L-BFGS again from there.
    base = max(found, key=lambda f: f[0])[2] if found else list(as_parts(starts[0]))
    say("find_mode: L-BFGS did not converge from any start; falling back to Adam, then L-BFGS.")
    notes.append("fell back to Adam (full-data gradients), then L-BFGS")
    pos = _adam_full(scaled, [tf.convert_to_tensor(p) for p in base], steps=2000)
    lp = _full_log_prob(estimator, pos)
    if np.isfinite(lp):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            res = find_map(scaled, pos, num_steps=num_steps)
        polished = list(as_parts(res.position))
        lp2 = _full_log_prob(estimator, polished)
        if np.isfinite(lp2) and lp2 >= lp:
            ok = bool(res.converged) and not caught
            return ModeResult(polished, lp2, ok, "Adam then L-BFGS", notes)
        return ModeResult(pos, lp, False, "Adam", notes)
    if found:
        lp, _, pos, how = max(found, key=lambda f: f[0])
        return ModeResult(pos, lp, False, how + " (not converged)", notes)
    raise ValueError(
        "no mode found: L-BFGS from every start and the Adam fallback ended where the "
        "log-density is not finite (" + "; ".join(notes) + "). Give a starting state of "
        "positive density."
    )


class LocalMode(NamedTuple):
    """One distinct mode found by `local_modes`.

    Attributes:
      position: the mode (list of parts, no chain dimensions).
      log_prob: the full-data ``log π`` there.
      starts: the indices of the starts whose Newton search ended there.
    """

    position: list[tf.Tensor]
    log_prob: float
    starts: list[int]


def local_modes(
    estimator: GradientEstimator, starts: Sequence[Any], max_iter: int = 30
) -> list[LocalMode]:
    """The distinct strict local maxima of ``log π`` that Newton searches reach from ``starts``.

    From each start, damped Newton ascent (at most ``max_iter`` iterations; `_newton`);
    a point where it converged counts when the Hessian there is negative definite (a
    saddle does not). Two such points are the same mode unless ``log π`` on the straight
    path between them (nine interior points) falls more than `MIN_DIP` below the lower
    of the two: a shallower barrier is crossed by the chains anyway, and a flat ridge
    has none. Starts that do not converge, or have no finite ``log π``, are left out.

    Args:
      estimator: an estimator with a full-data log-density.
      starts: states (lists of parts, no chain dimensions).
      max_iter: Newton iterations per start. Default value: ``30``.

    Returns:
      The modes, highest ``log π`` first, each with the starts that reached it.
    """
    modes: list[tuple[np.ndarray, list[tf.Tensor], float, list[int]]] = []
    searcher: _Searcher | None = None
    for i, start in enumerate(starts):
        parts = [tf.convert_to_tensor(p) for p in as_parts(start)]
        lp0 = _full_log_prob(estimator, parts)
        if not np.isfinite(lp0):
            continue
        if searcher is None or not searcher.fits(parts):
            searcher = _Searcher(estimator, parts)
        pos, lp, ok, _ = _newton(estimator, parts, lp0, max_iter, searcher)
        if not ok:
            continue
        x = np.concatenate([np.reshape(np.asarray(p), [-1]) for p in pos]).astype(np.float64)
        dtype = pos[0].dtype
        h = np.asarray(searcher.hessian(tf.constant(x, dtype)), np.float64)
        if not np.all(np.isfinite(h)) or np.linalg.eigvalsh(0.5 * (h + h.T)).max() >= 0:
            continue  # a saddle or a flat direction: not a strict local maximum

        def value(v: np.ndarray, _f=searcher.value, _t=dtype) -> float:
            return float(_f(tf.constant(v, _t)))

        for k, (y, _, lp_y, members) in enumerate(modes):
            path = [value(y + t * (x - y)) for t in np.linspace(0.0, 1.0, 11)[1:-1]]
            finite = [p for p in path if np.isfinite(p)]
            lowest = min(finite) if len(finite) == len(path) else -np.inf
            if lowest >= min(lp, lp_y) - MIN_DIP:
                members.append(i)
                if lp > lp_y:
                    modes[k] = (x, pos, lp, members)
                break
        else:
            modes.append((x, pos, lp, [i]))
    modes.sort(key=lambda m: -m[2])
    return [LocalMode(pos, lp, members) for _, pos, lp, members in modes]


def _size(parts: Sequence[tf.Tensor]) -> int:
    return int(sum(np.prod(p.shape) for p in parts))


def _newton(
    estimator: GradientEstimator,
    parts: list[tf.Tensor],
    log_prob: float,
    max_iter: int = 30,
    searcher: _Searcher | None = None,
) -> tuple[list[tf.Tensor], float, bool, bool]:
    """Damped Newton ascent ``x ← x + α |A|⁻¹ g`` (``A = −∇² log π``; `_ascent_step`).

    Converged when the Newton decrement ``gᵀ |A|⁻¹ g / 2`` (the predicted gain in
    ``log π``) is below ``10⁻⁶ (1 + d)`` or the dtype's resolution of ``log π``; a step
    that does not increase ``log π`` is halved up to 60 times.

    Returns the point, its ``log π``, whether it converged, and whether it ran away:
    ``log π`` rose by more than `RUNAWAY_GAIN` in each of the last two windows of
    ten iterations, the later gain at least half the earlier. Newton's method is
    affine invariant, so on a density with a mode its gains shrink (quadratically
    near the mode) whatever the parametrisation; steady gains mean ``log π`` grows
    without bound along the path (the search stops there).
    """
    if searcher is None or not searcher.fits(parts):
        searcher = _Searcher(estimator, parts)
    flat_grad, unflatten = searcher.grad, searcher.unflatten
    hessian, value = searcher.hessian, searcher.value
    x = np.concatenate([np.reshape(np.asarray(p), [-1]) for p in parts]).astype(np.float64)
    dtype = parts[0].dtype
    d = x.size
    # The log-density is known to about eps·|log π|: a smaller gain cannot be resolved.
    resolution = 4.0 * float(np.finfo(dtype.as_numpy_dtype).eps) * max(1.0, abs(log_prob))
    tol = max(1e-6 * (1 + d), resolution)

    history = [log_prob]
    w = _RUNAWAY_WINDOW
    for _ in range(max_iter):
        if len(history) > 2 * w:
            late, early = history[-1] - history[-1 - w], history[-1 - w] - history[-1 - 2 * w]
            if late > RUNAWAY_GAIN and early > RUNAWAY_GAIN and late >= 0.5 * early:
                return unflatten(tf.constant(x, dtype)), log_prob, False, True
        xt = tf.constant(x, dtype)
        g = np.asarray(flat_grad(xt), np.float64)
        a = -np.asarray(hessian(xt), np.float64)
        if not (np.all(np.isfinite(g)) and np.all(np.isfinite(a))):
            break
        step = _ascent_step(0.5 * (a + a.T), g)
        decrement = 0.5 * float(g @ step)
        if decrement < tol:
            return unflatten(tf.constant(x, dtype)), log_prob, True, False
        alpha = 1.0
        for _ in range(60):
            trial = x + alpha * step
            lp = float(value(tf.constant(trial, dtype)))
            if np.isfinite(lp) and lp > log_prob:
                x, log_prob = trial, lp
                break
            alpha *= 0.5
        else:
            # No ascent along the Newton direction: the dtype's rounding level. Within
            # about one posterior sd per coordinate of the mode, that is converged.
            near = decrement < 0.5 * d + 1.0
            return unflatten(tf.constant(x, dtype)), log_prob, near, False
        history.append(log_prob)
    return unflatten(tf.constant(x, dtype)), log_prob, False, False


def _ascent_step(a: np.ndarray, g: np.ndarray) -> np.ndarray:
    """``|A|⁻¹ g``: Newton's step with the curvature's eigenvalues taken in absolute value.

    Far from the mode ``A = −∇² log π`` may have negative eigenvalues; flooring them
    would send the step to infinity along those directions, while their absolute values
    keep it an ascent direction of sensible length (saddle-free Newton, Dauphin et al.
    2014). Computed on the diagonally scaled matrix, as `_dense_scale` is.
    """
    dg = np.abs(np.diag(a))
    top = max(float(dg.max()), np.finfo(np.float64).tiny)
    dsq = np.sqrt(np.maximum(dg, 1e-12 * top))
    lam, vec = np.linalg.eigh(a / np.outer(dsq, dsq))
    mag = np.maximum(np.abs(lam), 1e-8 * max(float(np.abs(lam).max()), 1e-300))
    return (vec @ ((vec.T @ (g / dsq)) / mag)) / dsq


def _adam_full(
    estimator: GradientEstimator, parts: list[tf.Tensor], steps: int, lr: float = 1e-2
) -> list[tf.Tensor]:
    """Adam ascent on the full-data ``log π / N`` (deterministic; no minibatches)."""
    flat_grad, unflatten = _flat_fns(estimator, parts)
    x0 = tf.concat([tf.reshape(p, [-1]) for p in parts], 0)

    @tf.function(autograph=needs_autograph(estimator))
    def run(x: tf.Tensor) -> tf.Tensor:
        b1, b2, eps = 0.9, 0.999, 1e-8
        m = tf.zeros_like(x)
        v = tf.zeros_like(x)

        def body(t, x, m, v):
            g = flat_grad(x)
            g = tf.where(tf.math.is_finite(g), g, tf.zeros_like(g))
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * g * g
            tf_ = tf.cast(t + 1, x.dtype)
            mh = m / (1 - b1**tf_)
            vh = v / (1 - b2**tf_)
            return t + 1, x + lr * mh / (tf.sqrt(vh) + eps), m, v

        _, x, _, _ = tf.while_loop(lambda t, *_: t < steps, body, (0, x, m, v))
        return x

    return unflatten(run(x0))


def laplace_approximation(
    estimator: GradientEstimator,
    mode: Any,
    max_dense_dim: int = 1000,
    num_probes: int = 64,
    seed: int = 0,
) -> LaplaceApproximation:
    """``A = −∇² log π(m)`` on the full data, and the Laplace scale ``L`` (module docstring).

    Args:
      estimator: an estimator with a full-data score.
      mode: ``m`` (list of parts, no chain dimensions).
      max_dense_dim: the full matrix up to this many coordinates, its diagonal
        above. Default value: ``1000``.
      num_probes: Rademacher probes of the diagonal estimate. Default value: ``64``.
      seed: seed of the probes. Default value: ``0``.

    Raises:
      ValueError: the curvature is not finite at ``mode``.
    """
    parts = [tf.convert_to_tensor(p) for p in as_parts(mode)]
    flat_grad, unflatten = _flat_fns(estimator, parts)
    x = tf.concat([tf.reshape(p, [-1]) for p in parts], 0)
    d = int(x.shape[0])
    notes: list[str] = []
    if d <= max_dense_dim:
        a = -_hessian(flat_grad, x, needs_autograph(estimator))
        a = 0.5 * (a + a.T)
        if not np.all(np.isfinite(a)):
            raise ValueError("the curvature (Hessian of log π) is not finite at the mode.")
        x64 = np.asarray(x, np.float64)
        top = _full_log_prob(estimator, parts)

        def drop(v: np.ndarray) -> float:
            """``log π(m) − log π(m + v)`` (``+∞`` where not finite)."""
            moved = unflatten(tf.constant(x64 + v, x.dtype))
            value = top - _full_log_prob(estimator, moved)
            return value if math.isfinite(value) else math.inf

        scale, lam_max, floored, measured = _dense_scale(a, drop)
        if floored:
            notes.append(
                f"the curvature at the mode is not positive definite in {floored} "
                "direction(s): their scale was measured where log π drops by 1/2 "
                f"({measured} found; the others floored; a flat or saddle direction)"
            )
        return LaplaceApproximation(parts, a, scale, lam_max, True, notes)
    diag = _hutchinson_diagonal(flat_grad, x, num_probes, seed, needs_autograph(estimator))
    if not np.all(np.isfinite(diag)):
        raise ValueError("the curvature (Hessian of log π) is not finite at the mode.")
    top = max(float(np.max(diag)), np.finfo(np.float64).tiny)
    low = diag < 1e-12 * top
    if np.any(low):
        notes.append(
            f"{int(low.sum())} diagonal curvature value(s) were not positive and were floored"
        )
    diag = np.maximum(diag, 1e-12 * top)
    return LaplaceApproximation(parts, diag, 1.0 / np.sqrt(diag), top, False, notes)


def _hessian_fn(
    flat_grad: Callable[[tf.Tensor], tf.Tensor], autograph: bool = True
) -> Callable[[tf.Tensor], tf.Tensor]:
    """``x -> ∇² log π(x)`` by reverse-mode differentiation of the full-data score,
    traced once (``autograph``: `needs_autograph` of the estimator)."""

    @tf.function(autograph=autograph)
    def jac(x: tf.Tensor) -> tf.Tensor:
        # persistent=True is load-bearing: with a non-persistent outer tape inside
        # tf.function, the score from `tfp.math.value_and_gradient` is differentiated
        # wrongly through lgamma/lbeta terms (a Student-t ν, a negative-binomial
        # total count): e.g. +26.4 where the true ∂²/∂ν² is −4.5.
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            g = flat_grad(x)
        return tape.jacobian(g, x, experimental_use_pfor=False)

    return jac


def _hessian(
    flat_grad: Callable[[tf.Tensor], tf.Tensor], x: tf.Tensor, autograph: bool = True
) -> np.ndarray:
    """``∇² log π(x)`` as a float64 array (`_finite_hessian`)."""
    return _finite_hessian(
        _hessian_fn(flat_grad, autograph), tf.function(flat_grad, autograph=autograph), x)


def _finite_hessian(
    jac: Callable[[tf.Tensor], tf.Tensor],
    grad: Callable[[tf.Tensor], tf.Tensor],
    x: tf.Tensor,
) -> np.ndarray:
    """``∇² log π(x)`` as a float64 array: ``jac``'s (automatic differentiation of the
    score ``grad``), or, where that is not finite but the score is, central differences of
    the score,

    ```none
    H[:, j] ≈ (g(x + h_j e_j) − g(x − h_j e_j)) / (2 h_j),   h_j = ε^{1/3} max(|x_j|, 1)
    ```

    (``ε`` the dtype's resolution; the step balances the truncation error, ``O(h²)``,
    against rounding, ``O(ε / h)``). Automatic differentiation can fail where the score
    does not: TFP's ``Softplus`` bijector, the default map of a positive scale, has a
    second derivative that is NaN in float64 beyond an argument of about 710, where
    ``exp`` overflows, so a scale beyond 710 in its own units (a regression on
    earnings in dollars, whose residual sd is about 19,000) had no Hessian at its mode.
    """
    h = np.asarray(jac(x), np.float64)
    if np.all(np.isfinite(h)):
        return h
    g0 = np.asarray(grad(x), np.float64)
    if not np.all(np.isfinite(g0)):
        return h  # the score is not finite either: nothing to difference
    x64 = np.asarray(x, np.float64)
    step = np.cbrt(np.finfo(x.dtype.as_numpy_dtype).eps) * np.maximum(np.abs(x64), 1.0)
    cols = []
    for j in range(x64.size):
        e = np.zeros_like(x64)
        e[j] = step[j]
        up = np.asarray(grad(tf.constant(x64 + e, x.dtype)), np.float64)
        down = np.asarray(grad(tf.constant(x64 - e, x.dtype)), np.float64)
        cols.append((up - down) / (2.0 * step[j]))
    return np.stack(cols, axis=1)


def _hutchinson_diagonal(
    flat_grad: Callable[[tf.Tensor], tf.Tensor],
    x: tf.Tensor,
    num_probes: int,
    seed: int,
    autograph: bool = True,
) -> np.ndarray:
    """``diag(−∇² log π) ≈ mean_v v ⊙ (−∇² log π) v`` with Rademacher ``v``."""

    @tf.function(autograph=autograph)
    def hvp(x: tf.Tensor, v: tf.Tensor) -> tf.Tensor:
        # persistent=True: see `_hessian_fn` (a non-persistent tape gets lgamma/lbeta
        # second derivatives wrong under tf.function).
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            g = flat_grad(x)
        return tape.gradient(g, x, output_gradients=v)

    rng = np.random.default_rng(seed)
    total = np.zeros(int(x.shape[0]))
    for _ in range(num_probes):
        v = rng.choice([-1.0, 1.0], size=total.shape)
        hv = np.asarray(hvp(x, tf.constant(v, x.dtype)), np.float64)
        total += -v * hv
    return total / num_probes


def _half_width(drop: Callable[[np.ndarray], float], v: np.ndarray) -> float | None:
    """The smaller ``t > 0`` on either side with ``drop(±t v) = 1/2`` (bisection on a
    doubling bracket), or ``None`` when log π does not drop by 1/2 within ``t = 10¹²``."""
    widths = []
    for sign in (1.0, -1.0):
        lo, hi = 0.0, 1.0
        while drop(sign * hi * v) < 0.5:
            lo, hi = hi, 2.0 * hi
            if hi > 1e12:
                break
        else:
            for _ in range(40):
                mid = 0.5 * (lo + hi)
                if drop(sign * mid * v) < 0.5:
                    lo = mid
                else:
                    hi = mid
            widths.append(hi)
    return min(widths) if widths else None


def _dense_scale(
    a: np.ndarray, drop: Callable[[np.ndarray], float] | None = None
) -> tuple[np.ndarray, float, int, int]:
    """``L`` with ``L Lᵀ = A⁻¹``, computed on the diagonally scaled matrix; also
    ``λ_max``, the number of non-positive-definite directions and how many of them
    got a measured scale.

    Scaling by ``D = √diag A`` first makes the eigen-decomposition see the
    correlations, not the scales (which may span ten orders of magnitude). A
    direction ``u`` whose eigenvalue is below ``10⁻¹⁰`` of the largest (flat, or a
    saddle: the Hessian says nothing about its width) gets ``λ = 1/t²`` with ``t``
    where log π has dropped by 1/2 along ``D^{-1/2} u`` (the width of a Gaussian
    with that curvature), when ``drop`` is given; else the floor.
    """
    dg = np.abs(np.diag(a))
    top = max(float(dg.max()), np.finfo(np.float64).tiny)
    dg = np.maximum(dg, 1e-12 * top)
    dsq = np.sqrt(dg)
    c = a / np.outer(dsq, dsq)
    lam, vec = np.linalg.eigh(c)
    floor = 1e-10 * max(float(lam.max()), 1e-300)
    low = np.flatnonzero(lam < floor)
    floored = int(low.size)
    measured = 0
    lam = np.maximum(lam, floor)
    for i in low if drop is not None else ():
        t = _half_width(drop, vec[:, i] / dsq)
        if t is not None:
            lam[i] = max(1.0 / t**2, floor)
            measured += 1
    cov = (vec / lam) @ vec.T / np.outer(dsq, dsq)
    cov = 0.5 * (cov + cov.T)
    try:
        scale = np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:
        # Rounding left it indefinite: the symmetric square root is as good a factor
        # for whitening, made triangular through a QR decomposition.
        root = (vec / np.sqrt(lam)) @ vec.T / dsq[None, :]
        _, r = np.linalg.qr(root)
        scale = (r.T * np.sign(np.diag(r)))
    a_fixed = (vec * lam) @ vec.T * np.outer(dsq, dsq)
    lam_max = float(np.linalg.eigvalsh(0.5 * (a_fixed + a_fixed.T)).max())
    return scale, lam_max, floored, measured
