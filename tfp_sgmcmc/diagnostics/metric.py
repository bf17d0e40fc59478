r"""The metric of a preconditioned Stein discrepancy: an affine whitening map.

The Stein kernels of [`stein_kernels`][tfp_sgmcmc.diagnostics.stein_kernels] measure
distances with a unit length scale (IMQ ``c = 1``), in the parameters' own units.
For a posterior with standard deviation ``σ ≪ 1`` the score is of order ``1/σ``: ``n``
exact draws have ``KSD² ≈ d/(σ²n)`` while a point mass at the mode has ``KSD² = d``
(its score is zero and only the kernel's divergence term remains), so a chain that
never moved beats exact draws until ``n`` is of order ``1/σ²``. For ``σ ≫ 1`` every
sample is far apart in kernel units and the statistic loses its power the other way.

**The preconditioned discrepancy** measures the sample in a metric ``Σ = L Lᵀ``
(symmetric positive definite, ideally close to the posterior covariance). With
``m`` the sample mean, the whitening map and its effect on the target are

``w = L⁻¹(x − m)``,  ``π_w(w) = |det L| π(m + L w)``,  ``∇_w log π_w(w) = Lᵀ ∇_x log π(x)``

(the chain rule with ``∂x/∂w = L``; the Jacobian ``|det L|`` is constant). The
preconditioned KSD (and FSSD) is the ordinary Langevin statistic of the whitened
samples ``w_i`` with the whitened scores ``s_{w,i} = Lᵀ s_i``:

``KSD²_Σ = (1/n²) Σ_{i,j} k_{π_w}(w_i, w_j)``,
``k_{π_w}(w, w') = s_wᵀs_{w'} k + s_wᵀ∇_{w'}k + s_{w'}ᵀ∇_w k + ∇_w·∇_{w'}k``,
``k(w, w') = (c² + ‖w − w'‖²)^β``.

Written in the original coordinates (``∇_x = L⁻ᵀ∇_w``) the Stein kernel is

``k_{π,Σ}(x, y) = s_xᵀ Σ s_y k + s_xᵀ Σ ∇_y k + s_yᵀ Σ ∇_x k + tr(Σ ∇_x ∇_yᵀ k)``,
``k(x, y) = (c² + (x − y)ᵀ Σ⁻¹ (x − y))^β``,

the Stein kernel of the diffusion Stein operator ``(T g)(x) = π(x)⁻¹ ∇·(π(x) M g(x))``
with the constant matrix ``M`` (``M Mᵀ = Σ``; ``L`` or ``Σ^{1/2}``) of Gorham, Duncan,
Vollmer & Mackey (2019) [2], with the IMQ base kernel of Gorham & Mackey (2017) [3]
in the Mahalanobis distance of ``Σ``. It is a Stein discrepancy of the push-forward of
the target through the whitening map, so it keeps the convergence-control properties
of [3] for a fixed ``Σ`` (an affine map is a bijection with constant Jacobian).

**Affine invariance.** Under ``x → a + B x`` (``B`` invertible) the scores become
``B⁻ᵀ s`` and a covariance ``Σ`` becomes ``B Σ Bᵀ``, whose square roots are
``B L Q`` for an orthogonal ``Q``; then ``w → Qᵀ w`` and ``s_w → Qᵀ s_w``, and the
radial kernel does not see ``Q`` (which is also why any square root ``L`` of ``Σ``,
Cholesky or symmetric, gives the same value). The value is therefore dimensionless and the
same for every affine reparametrisation when ``Σ`` transforms with the samples, as
the sample covariance (``preconditioner="sample"``) and the posterior covariance do.

Riabiz et al. (2022) [1] precondition the base kernel of the Langevin Stein kernel
only (``s_xᵀ s_y`` stays unscaled), with the sample covariance among their choices of
``Σ``; scaling the scores as well, as here, is what makes the value invariant.

**The curvature metric** (``preconditioner="curvature"``). With ``d`` far above the
number of samples ``n`` there is no sample covariance, and the per-coordinate sample
standard deviations measure each sample in its own spread: a chain frozen near the
mode (spread ``ε ≪ σ``) is whitened to unit spread with scores ``≈ ε/σ ≈ 0`` and wins
(``KSD² ≈ d/n`` against ``2d/n`` for exact draws). The curvature metric takes the
scale of coordinate ``j`` from the target instead: the diagonal Gaussian whose score
``−(x_j − m_j)/σ_j²`` best fits the scores at the samples in least squares (a
diagonal Gaussian fitted by score matching, Hyvärinen 2005 [4]; Modi et al. 2023 [5])
has

``1/σ_j² = v_j / Var_n(x_j)``,  ``v_j = −(1/n) Σ_i (x_ij − x̄_j) s_ij``,

``v_j`` being the Stein moment of
[`stein_moments`][tfp_sgmcmc.diagnostics.validity.stein_moments] (``E_π[v_j] = 1`` by
Stein's identity). For a Gaussian target with diagonal covariance the score is linear
and ``σ_j`` is the posterior's standard deviation exactly, **whatever the spread of the
sample** (a frozen, an over-dispersed and an exact sample are all measured in the
posterior's own metric); for a correlated Gaussian and exact draws it is the marginal
standard deviation. The metric is diagonal, ``L = diag(σ)``, costs ``O(n d)`` and needs
no sample covariance; a coordinate with zero variance or ``v_j ≤ 0`` (the scores do
not fall along it: no Gaussian fits) has no metric and the statistic is ``+inf``, as
for a singular sample metric. ``"auto"`` is ``"sample"`` up to
``SAMPLE_DENSE_MAX_DIM`` flattened coordinates (a dense covariance exists) and
``"curvature"`` above.

What no KSD sees with ``n ≪ d``: in the posterior's metric a Gaussian sample of
spread ``a`` (relative to the posterior's) has ``KSD² ≈ (1 + a²) d/n`` from the
diagonal terms ``k_π(x_i, x_i)`` plus off-diagonal terms of order
``(1 − a²)²/(a³√d)``, so exact draws (``2d/n``) beat a frozen chain (``a → 0``,
``KSD² → d``) and an over-dispersed one, but a sample only somewhat under-dispersed
(``0.1 ≲ a < 1``) scores lower than exact draws until ``n`` is of order ``√d``. The
validity check of the tuner's metric (spread under ``0.1`` of the posterior's, by
Stein's identity) is what disqualifies the lower end of that range.

#### References

1. M. Riabiz, W. Y. Chen, J. Cockayne, P. Swietach, S. A. Niederer, L. Mackey,
   C. J. Oates. Optimal thinning of MCMC output. Journal of the Royal Statistical
   Society Series B 84(4), 2022.
2. J. Gorham, A. B. Duncan, S. J. Vollmer, L. Mackey. Measuring sample quality
   with diffusions. Annals of Applied Probability 29(5), 2019.
3. J. Gorham, L. Mackey. Measuring sample quality with kernels. ICML 2017.
4. A. Hyvärinen. Estimation of non-normalized statistical models by score matching.
   Journal of Machine Learning Research 6, 2005.
5. C. Modi, R. M. Gower, C. Margossian, Y. Yao, D. Blei, L. K. Saul. Variational
   inference with Gaussian score matching. NeurIPS 2023.
"""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf

__all__ = [
    "SAMPLE_DENSE_MAX_DIM",
    "ADAPTIVE_METRICS",
    "FixedMetric",
    "Whitening",
    "check_preconditioner",
    "whitening_map",
    "whiten",
    "warn_if_degenerate",
]

#: Up to this dimension ``preconditioner="sample"`` whitens by the dense sample
#: covariance (a ``d × d`` square root); above it by the per-coordinate standard
#: deviations only, so that the cost stays O(n·d) and a covariance estimated from
#: fewer samples than dimensions is never inverted.
SAMPLE_DENSE_MAX_DIM = 100

#: Floor on the eigenvalues of the sample correlation matrix, relative to the
#: largest. A sample spanning fewer than ``d`` dimensions (``n ≤ d``, or coordinates
#: that move together exactly) has a singular correlation matrix whose computed
#: eigenvalues are rounding noise of either sign; the floor (float64) lies above that
#: noise and far below any correlation a sample can resolve, so unlike a jitter added
#: to every eigenvalue it leaves strongly correlated samples (and the invariance)
#: untouched.
_EIGENVALUE_FLOOR = 1e-12

#: The preconditioners estimated from the samples (and, for ``"curvature"``, their
#: scores) rather than fixed in advance.
ADAPTIVE_METRICS = ("sample", "curvature", "auto")


class FixedMetric(NamedTuple):
    """A validated fixed preconditioner (as returned by `check_preconditioner`).

    Attributes:
      factor: float64 ``[d]`` standard deviations (``L = diag(factor)``) or
        ``[d, d]`` lower-triangular Cholesky factor ``L`` of ``Σ = L Lᵀ``.
      inverse: float64 ``1/factor`` or ``L⁻¹``.
    """

    factor: np.ndarray
    inverse: np.ndarray


class Whitening(NamedTuple):
    """The affine map ``w = L⁻¹(x − shift)`` and its score map ``s_w = Lᵀ s``.

    Attributes:
      shift: ``[d]`` (float64).
      factor: ``[d]`` scales (``L`` diagonal) or a ``[d, d]`` square root ``L`` of
        ``Σ = L Lᵀ`` (float64).
      inverse: ``1/factor`` or ``L⁻¹`` (float64).
      degenerate: scalar bool tensor: the sample covariance was asked for and some
        coordinate of the samples has zero variance (see `whitening_map`).
      zero_variance: ``[d]`` bool tensor marking those coordinates (all ``False`` for
        a fixed preconditioner); for ``"curvature"``, the coordinates with zero
        variance or a Stein moment ``v_j ≤ 0``.
      kind: ``"sample"``, ``"curvature"`` or ``"fixed"``: how the map was estimated.
    """

    shift: tf.Tensor
    factor: tf.Tensor
    inverse: tf.Tensor
    degenerate: tf.Tensor
    zero_variance: tf.Tensor
    kind: str = "sample"

    def samples(self, x: tf.Tensor) -> tf.Tensor:
        """``L⁻¹(x − shift)`` row by row, for ``x`` of shape ``[..., d]`` (``x``'s dtype)."""
        # Centred first: the whitened values keep their digits far from the origin.
        xc = tf.cast(x, tf.float64) - self.shift
        if self.factor.shape.rank == 1:
            w = xc * self.inverse
        else:
            flat = tf.reshape(xc, [-1, tf.shape(xc)[-1]])
            w = tf.reshape(tf.matmul(flat, self.inverse, transpose_b=True), tf.shape(xc))
        return tf.cast(w, x.dtype)

    def scores(self, s: tf.Tensor) -> tf.Tensor:
        """``Lᵀ s`` row by row (``sᵀ L`` for row vectors), in ``s``'s dtype."""
        s64 = tf.cast(s, tf.float64)
        if self.factor.shape.rank == 1:
            sw = s64 * self.factor
        else:
            flat = tf.reshape(s64, [-1, tf.shape(s64)[-1]])
            sw = tf.reshape(tf.matmul(flat, self.factor), tf.shape(s64))
        return tf.cast(sw, s.dtype)


def check_preconditioner(preconditioner: Any, dim: int | None = None) -> Any:
    """Validate ``preconditioner``; return ``None``, a name or a `FixedMetric`.

    Accepted: ``None`` (unit metric), ``"sample"`` (the samples' covariance),
    ``"curvature"`` (the diagonal fitted to the scores, module docstring), ``"auto"``
    (``"sample"`` up to ``SAMPLE_DENSE_MAX_DIM`` coordinates, ``"curvature"`` above;
    resolved when ``dim`` is given), a 1-D
    array of ``d`` positive standard deviations, or a ``[d, d]`` symmetric
    positive-definite covariance matrix ``Σ`` (factored here as ``Σ = L Lᵀ``). A
    `FixedMetric` passes through. Arrays must be concrete (NumPy, or an eager tensor).

    Args:
      preconditioner: the value to check.
      dim: the flattened dimension ``d`` of the samples, checked when given.
        Default value: ``None``.

    Raises:
      ValueError: naming ``preconditioner``: an unknown string, a symbolic tensor, a
        wrong shape or dimension, non-finite values, a non-positive scale, a matrix
        that is not symmetric or not positive definite.
    """
    if preconditioner is None:
        return None
    if isinstance(preconditioner, str):
        if preconditioner not in ADAPTIVE_METRICS:
            raise ValueError(
                "`preconditioner` must be None, 'sample', 'curvature', 'auto', a 1-D array of "
                f"positive scales or a [d, d] covariance matrix, got the string "
                f"{preconditioner!r}."
            )
        if preconditioner == "auto" and dim is not None:
            return "sample" if dim <= SAMPLE_DENSE_MAX_DIM else "curvature"
        return preconditioner
    if isinstance(preconditioner, FixedMetric):
        _check_dim(preconditioner.factor.shape[0], dim)
        return preconditioner
    if isinstance(preconditioner, (tf.Tensor, tf.Variable)):
        if not hasattr(preconditioner, "numpy") or not tf.executing_eagerly():
            raise ValueError(
                "`preconditioner` must be a concrete array (NumPy or an eager tensor), "
                "not a symbolic tensor: the metric is checked and factored when the "
                "statistic is built, so capture it as a constant in a traced function "
                "instead of passing it as a `tf.function` argument."
            )
        preconditioner = preconditioner.numpy()
    try:
        p = np.asarray(preconditioner, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(
            f"`preconditioner` must be a numeric array, got {type(preconditioner).__name__}."
        ) from err
    if p.ndim not in (1, 2) or p.shape[0] == 0 or (p.ndim == 2 and p.shape[0] != p.shape[1]):
        raise ValueError(
            "`preconditioner` must be a 1-D array of d scales or a square [d, d] covariance "
            f"matrix, got shape {p.shape}."
        )
    _check_dim(p.shape[0], dim)
    if not np.all(np.isfinite(p)):
        raise ValueError("`preconditioner` contains non-finite values (NaN or Inf).")
    if p.ndim == 1:
        if np.any(p <= 0):
            raise ValueError(f"`preconditioner` scales must be > 0, got minimum {p.min()!r}.")
        return FixedMetric(p, 1.0 / p)
    # Symmetric up to rounding relative to the matrix's own size.
    tol = 1e-10 * np.max(np.abs(p))
    if np.max(np.abs(p - p.T)) > tol:
        raise ValueError(
            "`preconditioner` must be a symmetric covariance matrix; it differs from its "
            f"transpose by up to {np.max(np.abs(p - p.T))!r}."
        )
    try:
        factor = np.linalg.cholesky(0.5 * (p + p.T))
    except np.linalg.LinAlgError as err:
        raise ValueError(
            "`preconditioner` must be positive definite; its Cholesky factorisation failed "
            f"(smallest eigenvalue {np.linalg.eigvalsh(0.5 * (p + p.T)).min()!r})."
        ) from err
    if not np.all(np.diag(factor) > 0):
        raise ValueError("`preconditioner` must be positive definite (a zero pivot).")
    inverse = np.linalg.solve(factor, np.eye(factor.shape[0]))
    return FixedMetric(factor, inverse)


def _check_dim(size: int, dim: int | None) -> None:
    if dim is not None and size != dim:
        raise ValueError(
            f"`preconditioner` has dimension {size} but the flattened samples have {dim}."
        )


def whitening_map(
    x: tf.Tensor, preconditioner: Any, weights: Any = None, scores: Any = None
) -> Whitening:
    """The `Whitening` of ``x`` (``[n, d]``) for a preconditioner.

    The shift is the (weighted) mean of ``x``: the Stein kernels depend on ``x − y``
    only, so any shift gives the same statistic, and the mean removes the
    cancellation of a chain far from the origin. Moments are computed in float64.

    ``"sample"``: ``Σ`` is the covariance of ``x`` (divisor ``n``): dense for
    ``d ≤ SAMPLE_DENSE_MAX_DIM``, factored as ``L = D V Λ^{1/2}`` with ``D`` the
    standard deviations and ``R = V Λ Vᵀ`` the eigendecomposition of the correlation
    matrix, its eigenvalues floored at ``1e-12`` of the largest (a sample spanning
    fewer than ``d`` dimensions stays finite; any square root of ``Σ`` gives the same
    statistic); diagonal (``L = D``) above.

    ``"curvature"``: ``L = diag(σ)`` with ``σ_j² = Var(x_j) / v_j``,
    ``v_j = −mean_i (x_ij − x̄_j) s_ij`` (the diagonal Gaussian fitted to the
    ``scores`` by least squares, module docstring); a coordinate with zero variance or
    ``v_j ≤ 0`` makes the map ``degenerate``. ``"auto"``: ``"sample"`` for
    ``d ≤ SAMPLE_DENSE_MAX_DIM``, ``"curvature"`` above.

    **A coordinate with zero variance** (a chain that did not move there; a single
    sample) has no sample metric: ``degenerate`` is then ``True``,
    that coordinate is given unit scale so the map stays finite, and the Stein
    functions return ``+inf`` (they rank such a chain last instead of measuring it in
    an arbitrary floor metric). The variances are computed after subtracting the first
    row, so bitwise-constant coordinates give exactly zero.

    Args:
      x: samples ``[n, d]`` (float).
      preconditioner: as for `check_preconditioner` (or its result).
      weights: optional 0/1 ``[n]`` row weights (rows of weight 0 are ignored and
        follow the rows of weight 1). Default value: ``None``.
      scores: ``∇ log π`` at ``x``, ``[n, d]``; needed by ``"curvature"`` (and by
        ``"auto"`` above ``SAMPLE_DENSE_MAX_DIM``). Default value: ``None``.

    Raises:
      ValueError: as `check_preconditioner`; ``"sample"``, ``"curvature"`` or
        ``"auto"`` with a dimension unknown until run time; ``"curvature"`` without
        ``scores``; ``preconditioner=None`` (no map).
    """
    d = x.shape[-1]
    metric = check_preconditioner(preconditioner, d)
    if metric is None:
        raise ValueError("`preconditioner` is None: there is no whitening map.")
    x64 = tf.cast(x, tf.float64)
    if weights is None:
        wt = tf.ones(tf.shape(x64)[:1], tf.float64)
    else:
        wt = tf.cast(weights, tf.float64)
    count = tf.maximum(tf.reduce_sum(wt), 1.0)
    mean = tf.linalg.matvec(x64, wt, transpose_a=True) / count
    if isinstance(metric, FixedMetric):
        zero_var = tf.zeros(tf.shape(mean), tf.bool)
        return Whitening(
            mean,
            tf.constant(metric.factor, tf.float64),
            tf.constant(metric.inverse, tf.float64),
            tf.constant(False),
            zero_var,
            "fixed",
        )
    if d is None:
        raise ValueError(
            f"`preconditioner={metric!r}` needs the flattened dimension of the samples to "
            "be known when the function is traced."
        )
    # Shifted two-pass moments: subtracting a data row makes a bitwise-constant
    # coordinate exactly zero, so "did not move" is an exact test.
    xc = (x64 - x64[:1]) * wt[:, None]
    first = tf.reduce_sum(xc, 0) / count
    var = tf.maximum(tf.reduce_sum(xc * xc, 0) / count - first * first, 0.0)
    zero_var = tf.equal(var, 0.0)
    if metric == "curvature":
        if scores is None:
            raise ValueError(
                "`preconditioner='curvature'` needs the scores at the samples (`scores`)."
            )
        s64 = tf.cast(scores, tf.float64)
        # v_j = −mean_i (x_ij − x̄_j) s_ij, the Stein moment (1 in expectation under π).
        centred = (x64 - mean) * wt[:, None]
        v = -tf.reduce_sum(centred * s64, 0) / count
        bad = tf.logical_or(zero_var, tf.logical_not(v > 0.0))
        # σ_j² = Var(x_j)/v_j: the fitted Gaussian's variance; unit where none fits
        # (the caller reports +inf).
        var_fit = tf.where(bad, tf.ones_like(var), var / tf.where(bad, tf.ones_like(v), v))
        sd = tf.sqrt(var_fit)
        return Whitening(mean, sd, 1.0 / sd, tf.reduce_any(bad), bad, "curvature")
    degenerate = tf.reduce_any(zero_var)
    # Unit scale for a constant coordinate keeps the map finite; the caller reports +inf.
    sd = tf.sqrt(tf.where(zero_var, tf.ones_like(var), var))
    if d > SAMPLE_DENSE_MAX_DIM:
        return Whitening(mean, sd, 1.0 / sd, degenerate, zero_var)
    cov = tf.matmul(xc, xc, transpose_a=True) / count - first[:, None] * first[None, :]
    # The correlation matrix: scale-free, so the eigenvalue floor does not depend on
    # the coordinates' units. Unit diagonal also for a constant coordinate (zero row).
    corr = cov / (sd[:, None] * sd[None, :])
    corr = tf.linalg.set_diag(0.5 * (corr + tf.transpose(corr)), tf.ones([d], tf.float64))
    # eigh never fails on a singular or slightly indefinite matrix (a Cholesky may).
    lam, vec = tf.linalg.eigh(corr)
    root = tf.sqrt(tf.maximum(lam, _EIGENVALUE_FLOOR * tf.reduce_max(lam)))
    factor = sd[:, None] * vec * root[None, :]  # L = D V Λ^{1/2}
    inverse = tf.transpose(vec) / root[:, None] / sd[None, :]  # L⁻¹ = Λ^{-1/2} Vᵀ D⁻¹
    return Whitening(mean, factor, inverse, degenerate, zero_var)


def warn_if_degenerate(whitening: Whitening, what: str) -> None:
    """Eagerly, warn that ``what`` is ``+inf`` because of zero-variance coordinates
    (or, for the curvature metric, coordinates where no Gaussian fits the scores)."""
    if tf.executing_eagerly() and bool(whitening.degenerate):
        idx = np.flatnonzero(whitening.zero_variance.numpy())
        shown = ", ".join(str(i) for i in idx[:10]) + (" ..." if idx.size > 10 else "")
        if whitening.kind == "curvature":
            warnings.warn(
                f"preconditioner='curvature': {idx.size} flattened coordinate(s) of the "
                f"samples ({shown}) have zero variance or scores that do not fall along "
                "them (Stein moment v_j <= 0: a chain that did not move, or one not at the "
                f"posterior), so no Gaussian fits there and the {what} is +inf.",
                RuntimeWarning,
                stacklevel=3,
            )
            return
        warnings.warn(
            f"preconditioner='sample': {idx.size} flattened coordinate(s) of the samples "
            f"have zero variance ({shown}; a chain that did not move there, or a single "
            f"sample), so the sample metric is singular and the {what} is +inf.",
            RuntimeWarning,
            stacklevel=3,
        )


def whiten(x_flat: Any, s_flat: Any, preconditioner: Any) -> tuple[tf.Tensor, tf.Tensor]:
    """Whitened samples ``w_i = L⁻¹(x_i − x̄)`` and scores ``s_{w,i} = Lᵀ s_i``.

    ``Σ = L Lᵀ`` is the ``preconditioner`` (see the module docstring for the
    equation): ``"sample"`` (the covariance of ``x_flat``), a ``[d]`` array of
    standard deviations or a ``[d, d]`` covariance matrix. The Langevin KSD of
    ``(w, s_w)`` is the preconditioned KSD of ``(x, s)``:
    ``kernel_stein_discrepancy(w, s_w) == kernel_stein_discrepancy(x, s, preconditioner=Σ)``
    up to rounding. ``None`` returns the inputs as tensors, unchanged.

    Args:
      x_flat: samples ``[n, d]``.
      s_flat: scores ``∇ log π`` at ``x_flat``, ``[n, d]``, same dtype.
      preconditioner: ``None``, ``"sample"``, ``"curvature"``, ``"auto"``, ``[d]``
        scales or ``[d, d]`` covariance.

    Returns:
      ``(w, s_w)``, each ``[n, d]`` in the inputs' dtype.

    Raises:
      ValueError: a bad ``preconditioner`` (the message names it); ``x_flat`` and
        ``s_flat`` not ``[n, d]`` of one shape; eagerly, ``"sample"`` with a
        zero-variance coordinate (there is no sample metric).

    #### Examples

    ```python
    import numpy as np
    from tfp_sgmcmc.diagnostics import kernel_stein_discrepancy
    from tfp_sgmcmc.diagnostics.metric import whiten

    rng = np.random.default_rng(0)
    cov = np.array([[4e-4, 1e-4], [1e-4, 1e-4]])
    x = rng.multivariate_normal([50.0, -3.0], cov, size=200)
    s = -(x - [50.0, -3.0]) @ np.linalg.inv(cov)
    w, s_w = whiten(x, s, cov)
    ksd = kernel_stein_discrepancy(w, s_w)  # == ..._discrepancy(x, s, preconditioner=cov)
    ```
    """
    x = tf.convert_to_tensor(x_flat)
    s = tf.convert_to_tensor(s_flat, dtype_hint=x.dtype)
    if x.shape.rank != 2 or not x.shape.is_compatible_with(s.shape):
        raise ValueError(
            f"`x_flat` and `s_flat` must be [n, d] of one shape, got {x.shape} and {s.shape}."
        )
    if s.dtype != x.dtype:
        raise ValueError(f"`s_flat` must have `x_flat`'s dtype {x.dtype.name}, got {s.dtype.name}.")
    metric = check_preconditioner(preconditioner, x.shape[-1])
    if metric is None:
        return x, s
    wmap = whitening_map(x, metric, scores=s)
    if tf.executing_eagerly() and bool(wmap.degenerate):
        idx = np.flatnonzero(wmap.zero_variance.numpy()).tolist()
        if wmap.kind == "curvature":
            raise ValueError(
                f"`preconditioner='curvature'`: coordinate(s) {idx[:10]} of `x_flat` have "
                "zero variance or a Stein moment v_j <= 0, so no Gaussian fits the scores "
                "there and there is no whitening map."
            )
        raise ValueError(
            f"`preconditioner='sample'`: coordinate(s) {idx[:10]} of `x_flat` have zero "
            "variance, so the sample covariance is singular and there is no whitening map."
        )
    return wmap.samples(x), wmap.scores(s)
