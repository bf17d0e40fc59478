r"""Kernel Stein discrepancy (KSD) of samples, computed in bounded memory.

Given samples ``x_1..x_n`` and scores ``s_i = ∇ log π(x_i)``:

* **V-statistic** (default; the MAMBA paper, SGMCMCJax and Gorham & Mackey
  report this): ``KSD = √(Σ_{i,j} k_π(x_i, x_j)) / n`` — non-negative because
  ``k_π`` is positive semi-definite.
* **U-statistic**: ``KSD²_U = Σ_{i≠j} k_π(x_i, x_j) / (n(n − 1))`` — unbiased
  for ``KSD²``, may be negative, so its square root is never taken.

``k_π`` is the Langevin–Stein kernel of
[`tfp_sgmcmc.diagnostics.stein_kernels`][tfp_sgmcmc.diagnostics.stein_kernels] (IMQ with
``c = 1, β = −½`` by default, or RBF). ``docs/algorithms.md#ksd``.

**Preconditioned KSD** (``preconditioner=``; default ``None``, the unit metric
above). With ``Σ = L Lᵀ`` a covariance (the samples' own with ``"sample"``), the
statistic is the KSD of the whitened samples ``w_i = L⁻¹(x_i − x̄)`` with the
whitened scores ``s_{w,i} = Lᵀ s_i`` — the Langevin KSD of the target pushed through
the whitening map, i.e. the diffusion Stein discrepancy with a constant matrix
``M``, ``M Mᵀ = Σ`` (Gorham et al. 2019), with the IMQ kernel in the Mahalanobis
distance of ``Σ`` (as in Riabiz et al. 2022, who precondition the kernel only).
It is dimensionless and invariant to affine reparametrisation when ``Σ`` transforms
with the samples; the unit-metric KSD is not: for a posterior with sd ``σ ≪ 1`` a
chain frozen at the mode beats ``n ≲ 1/σ²`` exact draws. The equations and the
treatment of a degenerate sample covariance are in
[`tfp_sgmcmc.diagnostics.metric`][tfp_sgmcmc.diagnostics.metric].

Cost and memory: O(n²d) time, O(b² + nd) memory for block size ``b``. Only
the blocks ``(I, J)`` with ``I ≤ J`` are formed (``k_π`` is symmetric; an
off-diagonal block counts twice), each by one ``[X_I; S_I][X_J; S_J]ᵀ`` matrix
product, and block sums are accumulated in float64. Because ``k_π`` depends on
``x − y`` only, the samples are centred first: this removes the cancellation in
``‖x‖² + ‖y‖² − 2xᵀy`` and ``s_x·x − s_x·y`` when the chain sits far from the
origin. Scores scale like the data size ``N``, so the sum cancels heavily:
pass float64 inputs when the value must be exact to many digits.

#### References

1. J. Gorham, L. Mackey. Measuring sample quality with kernels. ICML 2017.
2. Q. Liu, J. D. Lee, M. I. Jordan. A kernelized Stein discrepancy for
   goodness-of-fit tests. ICML 2016.
3. J. Coullon, L. South, C. Nemeth. Efficient and generalizable tuning
   strategies for stochastic gradient MCMC. Statistics and Computing 33, 2023.
4. J. Gorham, A. B. Duncan, S. J. Vollmer, L. Mackey. Measuring sample quality
   with diffusions. Annals of Applied Probability 29(5), 2019.
5. M. Riabiz, W. Y. Chen, J. Cockayne, P. Swietach, S. A. Niederer, L. Mackey,
   C. J. Oates. Optimal thinning of MCMC output. JRSS Series B 84(4), 2022.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import tensorflow as tf

from tfp_sgmcmc.diagnostics.metric import (
    check_preconditioner,
    warn_if_degenerate,
    whitening_map,
)
from tfp_sgmcmc.diagnostics.stein_kernels import (
    median_heuristic,
    stein_kernel_block,
    validate_kernel_args,
)
from tfp_sgmcmc.internal.stein_inputs import (
    as_dtype,
    check_finite_eager,
    check_finite_result,
    flatten_samples_and_scores,
)

__all__ = [
    "kernel_stein_discrepancy",
    "DEFAULT_BLOCK_SIZE",
    "STATISTICS",
    "BlockedKSD",
    "check_ksd_arguments",
]

#: Rows per block. 1024 keeps a block's temporaries at a few tens of MB in
#: float64 while the matmuls stay large enough to run near peak speed.
DEFAULT_BLOCK_SIZE = 1024

#: ``statistic=`` values.
STATISTICS = ("v", "u")


def check_ksd_arguments(
    kernel: str, c: Any, beta: Any, bandwidth: Any, statistic: str, block_size: Any
) -> None:
    """Checks the options of ``kernel_stein_discrepancy`` (and of ``KSDReducer``, which
    takes the same): the Stein kernel's parameters, ``statistic`` and ``block_size``.

    Raises:
      ValueError: the option that is out of range, by name.
    """
    validate_kernel_args(kernel, c, beta, bandwidth)
    if statistic not in STATISTICS:
        raise ValueError(f"`statistic` must be one of {STATISTICS}, got {statistic!r}.")
    if not isinstance(block_size, (int, np.integer)) or block_size < 1:
        raise ValueError(f"`block_size` must be a positive int, got {block_size!r}.")


def kernel_stein_discrepancy(
    samples: Any,
    scores: Any,
    kernel: str = "imq",
    c: float = 1.0,
    beta: float = -0.5,
    bandwidth: Any = None,
    statistic: str = "v",
    block_size: int = DEFAULT_BLOCK_SIZE,
    jit_compile: bool = False,
    name: str | None = None,
    *,
    preconditioner: Any = None,
) -> tf.Tensor:
    """Kernel Stein discrepancy of ``samples`` given their ``scores``.

    ``statistic="v"``: ``KSD = √(Σ_{i,j} k_π(x_i, x_j)) / n``;
    ``statistic="u"``: ``KSD²_U = Σ_{i≠j} k_π(x_i, x_j) / (n(n−1))`` (may be < 0).
    With the IMQ kernel ``k(x, y) = (c² + ‖x − y‖²)^β``,
    ``k_π = s_xᵀs_y B^β − 2β B^{β−1}(s_x − s_y)ᵀr − 2dβ B^{β−1} − 4β(β−1)‖r‖²B^{β−2}``,
    ``r = x − y``, ``B = c² + ‖r‖²`` [1, 2]. The score is whatever the caller
    passes: full-data scores on a thinned chain (the MAMBA paper's choice [3])
    or minibatch scores ("stochastic KSD").

    With a ``preconditioner`` ``Σ = L Lᵀ`` the same statistic is taken of the
    whitened samples ``w_i = L⁻¹(x_i − x̄)`` and scores ``s_{w,i} = Lᵀ s_i`` [4, 5]
    (module docstring): a dimensionless value, invariant to affine
    reparametrisation, and ``c``, ``bandwidth`` are then in whitened units.

    Args:
      samples: tensor ``[n, d]`` or list of parts ``[n, ...]`` (event dims of
        each part are flattened row-major and the parts concatenated).
      scores: ``∇ log π`` at ``samples`` (same structure, shapes and dtype).
      kernel: ``"imq"`` or ``"rbf"`` (``exp(−‖r‖²/(2h²))``). Default value: ``"imq"``.
      c: IMQ scale, ``c > 0``. Default value: ``1.``.
      beta: IMQ exponent, ``β ∈ (−1, 0)``. Default value: ``-0.5``.
      bandwidth: RBF length scale ``h > 0``; ``None`` = median pairwise distance
        of up to 1000 evenly spaced samples. Must be ``None`` for IMQ.
        Default value: ``None``.
      statistic: ``"v"`` (returns KSD) or ``"u"`` (returns KSD²_U).
        Default value: ``"v"``.
      block_size: rows per block; memory is O(block_size²). Default value: ``1024``.
      jit_compile: when called eagerly, the blocked sum runs as one compiled
        ``tf.function``; ``True`` also compiles it with XLA (measured no faster
        on CPU, see ``docs/diagnostics.md``). Inside a caller's ``tf.function``
        it is inlined. Default value: ``False``.
      name: name scope. Default value: ``None`` (``"kernel_stein_discrepancy"``).
      preconditioner: the metric ``Σ`` (keyword only): ``None`` (unit metric, the
        KSD of [1, 3]); ``"sample"`` (the samples' covariance: dense up to
        ``d = 100``, the per-coordinate variances above); ``"curvature"`` (the
        diagonal Gaussian fitted to the scores, ``σ_j² = Var(x_j)/v_j``: the
        posterior's scale whatever the sample's spread, for ``d`` far above ``n``);
        ``"auto"`` (``"sample"`` up to ``d = 100``, ``"curvature"`` above); a ``[d]``
        array of standard deviations; or a ``[d, d]`` symmetric positive-definite
        covariance (e.g. the inverse Hessian at the mode), in the flattened
        coordinates of ``samples``. With ``"sample"``, samples with a
        zero-variance coordinate (a chain that did not move there, or ``n = 1``)
        give ``+inf`` and, eagerly, a ``RuntimeWarning`` naming the coordinates
        (with ``"curvature"``, also a coordinate with ``v_j ≤ 0``).
        Default value: ``None``.

    Returns:
      Scalar tensor in the samples' dtype. Inside a traced function, non-finite
      inputs give NaN (eagerly they raise).

    Raises:
      ValueError: invalid ``kernel``, ``c``, ``beta``, ``bandwidth``,
        ``statistic``, ``block_size`` or ``preconditioner``; ``samples``/``scores``
        with different shapes or dtypes; too few samples (``n < 1``, or ``n < 2``
        for the U-statistic); non-finite values (eager calls).

    #### References

    1. J. Gorham, L. Mackey. Measuring sample quality with kernels. ICML 2017.
    2. Q. Liu, J. D. Lee, M. I. Jordan. A kernelized Stein discrepancy for
       goodness-of-fit tests. ICML 2016.
    3. J. Coullon, L. South, C. Nemeth. Efficient and generalizable tuning
       strategies for stochastic gradient MCMC. Statistics and Computing, 2023.
    4. J. Gorham, A. B. Duncan, S. J. Vollmer, L. Mackey. Measuring sample
       quality with diffusions. Annals of Applied Probability, 2019.
    5. M. Riabiz et al. Optimal thinning of MCMC output. JRSS Series B, 2022.
    """
    check_ksd_arguments(kernel, c, beta, bandwidth, statistic, block_size)
    metric = check_preconditioner(preconditioner)
    with tf.name_scope(name or "kernel_stein_discrepancy"):
        x, s = flatten_samples_and_scores(samples, scores)
        metric = check_preconditioner(metric, x.shape[-1])
        n = x.shape[0]
        min_n = 2 if statistic == "u" else 1
        if n is not None and n < min_n:
            raise ValueError(
                f"`samples` must hold at least {min_n} samples for statistic={statistic!r}, "
                f"got {n}."
            )
        check_finite_eager(x, "samples")
        check_finite_eager(s, "scores")
        ksd = BlockedKSD(kernel, c, beta, bandwidth, statistic, block_size, jit_compile, metric)
        return ksd(x, s, None, eager_checks=True)


@dataclasses.dataclass(frozen=True)
class BlockedKSD:
    """A KSD with its options (the arguments of ``kernel_stein_discrepancy``, validated
    by the caller with ``check_ksd_arguments``; ``metric`` checked against ``d``),
    applied to flat ``[n, d]`` rows by calling it: by ``kernel_stein_discrepancy`` and by
    ``KSDReducer`` on its buffer.

    Rows of weight 0 are ignored (the reducer's partly filled buffer) but must be
    finite and must follow the rows of weight 1; ``n`` is then the number of rows of
    weight 1, and a ``"sample"`` metric's moments and shift are taken over them.
    """

    kernel: str
    c: Any
    beta: Any
    bandwidth: Any
    statistic: str
    block_size: int
    jit_compile: bool
    metric: Any

    def __call__(
        self, x: tf.Tensor, s: tf.Tensor, weights: tf.Tensor | None, eager_checks: bool
    ) -> tf.Tensor:
        """The KSD of ``x`` with scores ``s`` and 0/1 row ``weights`` (``None`` = all 1),
        whitened first by ``metric`` (``None``: the unit metric, which leaves the inputs
        untouched); a degenerate ``"sample"`` metric gives ``+inf``.

        With ``eager_checks`` (the path of ``kernel_stein_discrepancy``) a non-finite
        value raises when called eagerly, and a degenerate metric warns.
        """
        wmap = None
        if self.metric is not None:
            wmap = whitening_map(x, self.metric, weights, scores=s)
            x, s = wmap.samples(x), wmap.scores(s)
        bandwidth = self.bandwidth
        if self.kernel == "rbf" and bandwidth is None:
            # The median over the weighted rows only (the buffer's zero rows would
            # otherwise enter it), taken as the batch function takes it.
            num_valid = None
            if weights is not None and x.shape[0] is not None:
                num_valid = tf.cast(tf.reduce_sum(tf.cast(weights, tf.float64)), tf.int32)
            bandwidth = median_heuristic(x, num_valid=num_valid)
        if weights is None:
            weights = tf.ones(tf.shape(x)[:1], x.dtype)
        weights = tf.cast(weights, x.dtype)
        bw = tf.constant(1.0, x.dtype) if bandwidth is None else as_dtype(bandwidth, x.dtype)
        fn = _ksd_blocked
        if tf.executing_eagerly():
            fn = _COMPILED[bool(self.jit_compile)]
        value = fn(
            x,
            s,
            weights,
            bw,
            kernel=self.kernel,
            c=float(self.c),
            beta=float(self.beta),
            statistic=self.statistic,
            block_size=int(self.block_size),
        )
        if eager_checks:
            # The finite value is checked for overflow before a degenerate sample's +inf.
            value = check_finite_result(value, "KSD")
        if wmap is not None:
            if eager_checks:
                warn_if_degenerate(wmap, "KSD")
            value = tf.where(wmap.degenerate, tf.constant(np.inf, value.dtype), value)
        return value


def _ksd_blocked(
    x: tf.Tensor,
    s: tf.Tensor,
    w: tf.Tensor,
    bandwidth: tf.Tensor,
    kernel: str,
    c: float,
    beta: float,
    statistic: str,
    block_size: int,
) -> tf.Tensor:
    dtype = x.dtype
    acc = tf.float64
    # Rows of weight 0 must hold finite values (the reducer's buffer holds zeros
    # there); no sanitised copies of x and s are made, to keep memory at O(n·d).
    # Any non-finite input turns the result into NaN below.
    finite = tf.logical_and(
        tf.reduce_all(tf.math.is_finite(x)), tf.reduce_all(tf.math.is_finite(s))
    )
    count = tf.reduce_sum(tf.cast(w, acc))
    # Translation invariance of k_π: centre on the (weighted) sample mean.
    mean = tf.linalg.matvec(x, w, transpose_a=True) / tf.maximum(tf.reduce_sum(w), 1.0)
    x = x - mean  # rows of weight 0 stay finite and are masked out of every block sum

    n_static = x.shape[0]
    if n_static is not None and n_static <= block_size:
        b = int(n_static)
        nb = 1
        xr, sr, wr = x[None], s[None], w[None]
    else:
        n = tf.shape(x)[0]
        # A trace with a run-time n (a relaxed retrace) must not pad a few rows up to a
        # whole block: the block is at most n rows, so n <= block_size is one n × n block.
        b = block_size if n_static is not None else tf.minimum(block_size, n)
        nb = (n + b - 1) // b
        pad = nb * b - n
        d = tf.shape(x)[1]
        xr = tf.reshape(tf.pad(x, [[0, pad], [0, 0]]), [nb, b, d])
        sr = tf.reshape(tf.pad(s, [[0, pad], [0, 0]]), [nb, b, d])
        wr = tf.reshape(tf.pad(w, [[0, pad]]), [nb, b])
        if n_static is not None:
            nb = int(-(-n_static // b))
    off_diag = 1.0 - tf.eye(b, dtype=dtype)

    def block_sum(i, j):
        k = stein_kernel_block(xr[i], xr[j], sr[i], sr[j], kernel, c, beta, bandwidth)
        k = k * wr[i][:, None] * wr[j][None, :]
        if statistic == "u":
            # Drop the i = j terms exactly (no large diagonal to subtract later).
            k = tf.where(tf.equal(i, j), k * off_diag, k)
        factor = tf.where(tf.equal(i, j), tf.constant(1.0, acc), tf.constant(2.0, acc))
        return factor * tf.reduce_sum(tf.cast(k, acc))

    if isinstance(nb, int) and nb == 1:
        total = block_sum(tf.constant(0), tf.constant(0))
    else:
        def outer(i, tot):
            def inner(j, t):
                return j + 1, t + block_sum(i, j)

            _, tot = tf.while_loop(lambda j, _: j < nb, inner, (i, tot))
            return i + 1, tot

        _, total = tf.while_loop(
            lambda i, _: i < nb, outer, (tf.constant(0), tf.constant(0.0, acc))
        )

    if statistic == "v":
        value = tf.sqrt(tf.maximum(total, 0.0)) / count
    else:
        value = total / (count * (count - 1.0))
    value = tf.where(finite, value, tf.constant(np.nan, acc))
    return tf.cast(value, dtype)


_COMPILED = {
    # No user code runs here and the loops are tf.while_loop: no AutoGraph needed.
    True: tf.function(_ksd_blocked, jit_compile=True, reduce_retracing=True, autograph=False),
    False: tf.function(_ksd_blocked, reduce_retracing=True, autograph=False),
}
