r"""A fixed affine preconditioner for any kernel: sample ``w`` with ``z = m + L w``.

Stochastic-gradient samplers take one step size for every coordinate, so on a
posterior whose scales differ by orders of magnitude the step that is stable
for the stiffest direction (``ε λ_max < 2`` for SGLD) leaves the others frozen.
Preconditioning with a fixed matrix removes this: given a centre ``m`` and a
factor ``L`` of a covariance ``Σ = L Lᵀ`` (usually the Laplace covariance
``(−∇² log π(m))⁻¹`` at the mode), the sampler runs on

```none
z = m + L w                                  (L lower triangular, or diagonal)
log π_w(w) = log π_z(m + L w) + log |det L|
∇_w log π_w(w) = Lᵀ ∇_z log π_z(m + L w)
```

where ``π_w`` is close to ``N(0, I)`` when the Laplace approximation is good:
every direction then has scale one and the step size is dimensionless. Any
kernel takes it, because the transform lives in the estimator (the minibatch
sequence is the inner estimator's, unchanged). This is the fixed-matrix
preconditioning of Girolami & Calderhead (2011, Sec. 4) and of the mass matrix
of HMC (Neal 2011, Sec. 4.1), used by Stan's and TFP's adaptation.

The state is one tensor ``[*chains, d]``; the inner estimator's state is the
list of parts ``z`` it was written for (`WhitenedEstimator.unwhiten` maps
draws back). ``docs/algorithms.md#preconditioning``.

#### References

[1]: Mark Girolami and Ben Calderhead. Riemann manifold Langevin and
     Hamiltonian Monte Carlo methods. _JRSS-B_ 73(2), 2011.
[2]: Radford M. Neal. MCMC using Hamiltonian dynamics. In _Handbook of Markov
     Chain Monte Carlo_, 2011.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.stats
import tensorflow as tf

from tfp_sgmcmc.estimators.base import (
    ChangeOfVariablesEstimator,
    GradientEstimate,
    GradientEstimator,
)
from tfp_sgmcmc.internal.util import as_parts

__all__ = ["WhitenedEstimator", "runaway_threshold"]


def runaway_threshold(dimension: int) -> float:
    """``q = 16 χ²_d(1 − 10⁻⁶)``: whitened squared radii beyond it left the posterior.

    Under the Laplace approximation ``‖w‖² ~ χ²_d``, so a draw of the posterior lies
    beyond ``χ²_d(1 − 10⁻⁶)`` once in a million; the factor 16 (four times the
    radius) leaves room for a posterior whose tails are wider than its Laplace fit
    (an exponential tail, as of the log of a Gamma variable with shape ½, reaches
    it with probability about ``10⁻⁶``), while a chain that ran away passes it by
    orders of magnitude.
    """
    return 16.0 * float(scipy.stats.chi2.isf(1e-6, dimension))


def _checked_scale(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(L, diag L)`` for a ``[d]`` or ``[d, d]`` scale (its lower triangle), or a
    ``ValueError`` when it is not finite with a positive diagonal."""
    diag = s if s.ndim == 1 else np.diag(s)
    if not (np.all(np.isfinite(s)) and np.all(diag > 0)):
        raise ValueError("`scale` must be finite with a positive diagonal.")
    return (np.tril(s) if s.ndim == 2 else s), diag


class WhitenedEstimator(ChangeOfVariablesEstimator):
    """The estimate of ``log π_w`` and its score for ``z = m + L w`` (module docstring).

    Args:
      estimator: the inner estimator, on states shaped like ``centre`` (a list
        of parts) with optional leading chain dimensions.
      centre: ``m``, a list of parts without chain dimensions.
      scale: ``L``: a ``[d]`` vector of positive scales (diagonal
        preconditioner) or a ``[d, d]`` lower-triangular matrix, ``d`` the
        total size of ``centre``'s parts (flattened in order, row-major).
      flag_runaway_steps: whether `left_posterior` reports states beyond
        `runaway_threshold` (``‖w‖² > q``), so that kernels mark those steps
        ``diverged``. Default value: ``True``. `tfp_sgmcmc.sample_posterior`
        turns it off and judges its kept draws by their log-density instead
        (`judge_whitened_draws`'s ``log_density_drop``): a posterior whose tail
        is heavier than its Laplace fit reaches the radius in a long run
        without having left the posterior.

    Raises:
      ValueError: ``scale`` has the wrong shape, a non-positive or non-finite
        entry on its diagonal, or ``centre`` is not finite.
    """

    def __init__(
        self,
        estimator: GradientEstimator,
        centre: Any,
        scale: Any,
        *,
        flag_runaway_steps: bool = True,
    ) -> None:
        super().__init__(estimator)
        parts = [tf.convert_to_tensor(p) for p in as_parts(centre)]
        dtype = parts[0].dtype
        self._shapes = [p.shape for p in parts]
        self._sizes = [int(np.prod(s)) for s in self._shapes]
        d = sum(self._sizes)
        m = np.concatenate([np.reshape(p.numpy(), [-1]) for p in parts]).astype(np.float64)
        if not np.all(np.isfinite(m)):
            raise ValueError("`centre` must be finite.")
        s = np.asarray(scale, np.float64)
        if s.shape not in ((d,), (d, d)):
            raise ValueError(
                f"`scale` must have shape [{d}] (diagonal) or [{d}, {d}] (lower triangular) "
                f"for a centre of {d} coordinates, got {list(s.shape)}."
            )
        s, diag = _checked_scale(s)
        self._dense = s.ndim == 2
        self._m = tf.constant(m, dtype)
        # Variables, so that `set_scale` changes the map inside a compiled chain
        # without a new trace (burn-in adaptation reuses the program).
        self._scale = tf.Variable(s, dtype=dtype, trainable=False, name="whitening_scale")
        self._log_det_var = tf.Variable(
            float(np.sum(np.log(diag))), dtype=dtype, trainable=False, name="log_det_scale"
        )
        self._scale64 = s
        self._m64 = m
        self._log_det = float(np.sum(np.log(diag)))
        self._runaway = runaway_threshold(d)
        self._flag_runaway_steps = bool(flag_runaway_steps)
        self.gradient_evaluations_per_call = estimator.gradient_evaluations_per_call

    @property
    def dimension(self) -> int:
        """``d``, the number of coordinates of ``w``."""
        return sum(self._sizes)

    @property
    def centre(self) -> np.ndarray:
        """``m`` as a flat float64 vector."""
        return self._m64.copy()

    @property
    def scale(self) -> np.ndarray:
        """``L`` as float64: ``[d]`` (diagonal) or ``[d, d]`` (lower triangular)."""
        return self._scale64.copy()

    @property
    def log_det_scale(self) -> tf.Variable:
        """``log |det L|``, the density's shift ``log π_w(w) − log π_z(m + L w)``: a
        variable, so a compiled program reads the value `set_scale` last gave."""
        return self._log_det_var

    @property
    def covariance(self) -> np.ndarray:
        """``Σ = L Lᵀ`` as a float64 ``[d, d]`` matrix."""
        s = self._scale64
        return s @ s.T if self._dense else np.diag(s**2)

    def set_scale(self, scale: Any) -> None:
        """Replace ``L`` by ``scale`` of the same kind (diagonal ``[d]`` or dense
        ``[d, d]``), in place: compiled chains that use this estimator see the new
        map at their next call, without retracing.

        Raises:
          ValueError: ``scale`` has another shape, or is not finite with a
            positive diagonal.
        """
        s = np.asarray(scale, np.float64)
        if s.shape != self._scale64.shape:
            raise ValueError(
                f"`scale` must have shape {list(self._scale64.shape)}, got {list(s.shape)}."
            )
        s, diag = _checked_scale(s)
        self._scale.assign(tf.constant(s, self._scale.dtype))
        self._log_det = float(np.sum(np.log(diag)))
        self._log_det_var.assign(self._log_det)
        self._scale64 = s

    # -- the map ------------------------------------------------------------- #
    def _flat_to_parts(self, flat: tf.Tensor) -> list[tf.Tensor]:
        chains = tf.shape(flat)[:-1]
        pieces = tf.split(flat, self._sizes, axis=-1)
        return [
            tf.reshape(c, tf.concat([chains, tf.constant(s.as_list(), tf.int32)], 0))
            for c, s in zip(pieces, self._shapes)
        ]

    def _parts_to_flat(self, parts: Sequence[tf.Tensor], chain_ndims: int) -> tf.Tensor:
        flat = []
        for p in parts:
            lead = tf.shape(p)[:chain_ndims]
            flat.append(tf.reshape(p, tf.concat([lead, [-1]], 0)))
        return tf.concat(flat, -1)

    def _apply_scale(self, w: tf.Tensor, transpose: bool) -> tf.Tensor:
        if not self._dense:
            return w * self._scale
        # w @ Lᵀ (forward: rows of w are vectors) or g @ L (pull-back of a score).
        return tf.linalg.matmul(w, self._scale, transpose_b=not transpose)

    def unwhiten(self, w: Any) -> list[tf.Tensor]:
        """``z = m + L w`` as the inner estimator's list of parts (chain dims kept)."""
        w = tf.convert_to_tensor(w, self._m.dtype)
        return self._flat_to_parts(self._m + self._apply_scale(w, transpose=False))

    def whiten(self, parts: Any) -> tf.Tensor:
        """``w = L⁻¹ (z − m)`` for a list of parts ``z`` (chain dims kept)."""
        parts = [tf.convert_to_tensor(p, self._m.dtype) for p in as_parts(parts)]
        chain_ndims = parts[0].shape.rank - self._shapes[0].rank
        r = self._parts_to_flat(parts, chain_ndims) - self._m
        if not self._dense:
            return r / self._scale
        lead = tf.shape(r)[:-1]
        flat = tf.reshape(r, [-1, self.dimension])
        w = tf.linalg.triangular_solve(self._scale, tf.transpose(flat), lower=True)
        return tf.reshape(tf.transpose(w), tf.concat([lead, [self.dimension]], 0))

    def _pull_back(self, state: Any, evaluate: Any) -> tuple[GradientEstimate, Any]:
        w = as_parts(state)[0]
        parts = self.unwhiten(w)
        est, extra = evaluate(parts)
        chain_ndims = w.shape.rank - 1
        g = self._parts_to_flat(est.grads_target_log_prob, chain_ndims)
        log_det = tf.cast(self._log_det_var, est.target_log_prob.dtype)
        score = self._apply_scale(g, transpose=True)
        return GradientEstimate(est.target_log_prob + log_det, [score]), extra

    def with_batch_size(self, batch_size: int) -> WhitenedEstimator:
        """The same preconditioner around the inner estimator at another batch size."""
        return WhitenedEstimator(
            self._base.with_batch_size(batch_size), self._flat_to_parts(self._m), self._scale64,
            flag_runaway_steps=self._flag_runaway_steps,
        )

    # -- protocol ------------------------------------------------------------ #
    def validate_state(self, state: Any, arg_name: str = "init_state") -> None:
        parts = as_parts(state)
        if len(parts) != 1:
            raise ValueError(
                f"`{arg_name}` must be one tensor [*chains, {self.dimension}] of whitened "
                f"coordinates, got {len(parts)} parts."
            )
        w = parts[0]
        if w.shape.rank is not None and (
            w.shape.rank < 1 or w.shape[-1] not in (None, self.dimension)
        ):
            raise ValueError(
                f"`{arg_name}` must have shape [*chains, {self.dimension}], got "
                f"{w.shape.as_list()}."
            )
        super().validate_state(parts, arg_name)

    def bootstrap(self, state: Any) -> Any:
        return self._base.bootstrap(self.unwhiten(as_parts(state)[0]))

    def left_posterior(self, state: Any) -> tf.Tensor | None:
        """Per chain: ``‖w‖² > runaway_threshold(d)``, a state the posterior has no mass at;
        ``None`` (no check) when built with ``flag_runaway_steps=False``."""
        if not self._flag_runaway_steps:
            return None
        w = as_parts(state)[0]
        radius2 = tf.reduce_sum(tf.square(w), axis=-1)
        return radius2 > tf.constant(self._runaway, radius2.dtype)

    def __repr__(self) -> str:
        kind = "dense" if self._dense else "diagonal"
        return f"WhitenedEstimator({self._base!r}, d={self.dimension}, {kind})"
