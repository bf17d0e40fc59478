r"""One verdict on a finished run: ``ok``, ``suspect`` or ``failed``, with reasons.

Each check is a standard diagnostic that sees one way a run goes wrong; the
verdict is the worst of them, and every check that fires adds a reason:

| check | fails when | verdict |
|---|---|---|
| non-finite draws | any state is NaN/Inf | failed |
| left the posterior | a draw far from the mode: ``‖w‖² > q`` (and ``Δ > q/2``) | failed |
| did not move | a chain's draws have (almost) no spread in the posterior's scale | failed |
| chains disagree | split R̂ (``tfp.mcmc.potential_scale_reduction``) ``> 1.1`` | failed |
| | split R̂ ``> 1.05`` | suspect |
| too few effective draws | ESS (``tfp.mcmc.effective_sample_size``) ``< 100`` | suspect |
| biased by the step or the noise | predicted sd inflation ``> 10%`` (below) | suspect |

The draws are judged in whitened coordinates ``w = L⁻¹(z − m)``, where the
Laplace approximation at the mode ``m`` has unit scale in every direction,
so the thresholds are dimensionless. "Left the posterior" compares
``‖w‖²`` with ``q = 16 χ²_d(1 − 10⁻⁶)``: a Gaussian posterior puts a draw there
with probability far below ``10⁻⁶``, a heavier-tailed one rarely, a runaway
chain always. Where the full-data log-density is at hand (``log_density_drop``),
a draw beyond the radius counts only if the density there has also fallen as
far as the Laplace fit's would:

```none
left the posterior  ⇔  ‖w‖² > q  and  Δ(w) = log π_w(0) − log π_w(w) > q / 2
```

(under the Laplace fit ``Δ = ‖w‖²/2``). A chain that runs away (a step too
large for a stiff direction) grows without bound and its ``Δ`` with the square
of the radius; a draw in a tail heavier than the Laplace fit's (the log of a
hierarchical scale, which decays exponentially) reaches the radius in a long
run with ``Δ`` far below ``q / 2``, and is a draw of the posterior. "Did not
move" is a chain whose median whitened standard deviation is below ``0.05``.

The bias check is the stationary variance of SGLD, ``θ ← θ + ε ĝ + √(2ε) ξ``,
on a unit Gaussian with gradient noise of variance ``V`` per coordinate:
``(2ε + ε²V) / (1 − (1 − ε)²) = (1 + εV/2) / (1 − ε/2)`` (Welling & Teh 2011;
Vollmer, Zygalakis & Teh 2016), so the predicted sd inflation is
``√((1 + r)/(1 − ε/2))`` with ``r = εV/2`` the gradient-noise ratio. It is
claimed only where the chains mixed (R̂ below 1.05). ``docs/diagnostics.md#verdict``.

Two more checks serve `tfp_sgmcmc.sample_posterior`: `bulk_mixing`, the
rank-normalised split R̂ and bulk ESS its run length is judged on (Vehtari et
al. 2021), and `stein_moment_check`, which reads the full-data score at the
draws (``E[s] = 0``, ``E[(w − w̄) s] = −1`` under the posterior) and so sees a
bias every chain shares.

#### References

[1]: Andrew Gelman and Donald B. Rubin. Inference from iterative simulation
     using multiple sequences. _Statistical Science_ 7(4), 1992.
[2]: Aki Vehtari, Andrew Gelman, Daniel Simpson, Bob Carpenter and
     Paul-Christian Bürkner. Rank-normalization, folding, and localization: an
     improved R̂. _Bayesian Analysis_ 16(2), 2021.
[3]: Max Welling and Yee Whye Teh. Bayesian learning via stochastic gradient
     Langevin dynamics. In _ICML_, 2011.
[4]: Sebastian J. Vollmer, Konstantinos C. Zygalakis and Yee Whye Teh.
     Exploration of the (non-)asymptotic bias and variance of stochastic
     gradient Langevin dynamics. _JMLR_ 17, 2016.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp
from scipy import special

from tfp_sgmcmc.diagnostics.validity import stein_moments
from tfp_sgmcmc.estimators.whitened import runaway_threshold
from tfp_sgmcmc.internal.quiet import quiet_real_part_cast

__all__ = [
    "Verdict",
    "judge_whitened_draws",
    "runaway_threshold",
    "RHAT_FAILED",
    "RHAT_SUSPECT",
    "MIN_ESS",
    "MAX_SD_INFLATION",
    "FROZEN_SD",
    "TARGET_RHAT",
    "TARGET_ESS",
    "STEIN_VARIANCE_TOL",
    "STEIN_MEAN_TOL",
    "bulk_mixing",
    "stein_moment_check",
    "runaway_draws",
    "RunawayDraws",
    "MAX_RUNAWAY_PROBES",
]

#: Split R̂ above which the chains are declared to disagree.
RHAT_FAILED = 1.1
#: Split R̂ above which the run is suspect.
RHAT_SUSPECT = 1.05
#: The fewest cross-chain effective draws (per coordinate) of an ``ok`` run.
MIN_ESS = 100.0
#: The largest predicted standard-deviation inflation of an ``ok`` run.
MAX_SD_INFLATION = 1.10
#: A chain whose median whitened standard deviation is below this did not move.
FROZEN_SD = 0.05
#: A run is long enough when its rank-normalised split R̂ is at most this ...
TARGET_RHAT = 1.01
#: ... and its bulk ESS at least this, in every coordinate (Vehtari et al. 2021).
TARGET_ESS = 400.0
#: The Stein variance check fires when ``-E[(w_j - w̄_j) s_j]`` is off 1 by more than this
#: (``1.1² − 1``: a standard deviation off by a tenth) beyond twice its Monte Carlo error.
STEIN_VARIANCE_TOL = 0.21
#: The Stein mean check fires when ``E[s_j]`` is off 0 by more than this (a mean off by
#: about 0.1 posterior sd) beyond twice its Monte Carlo error.
STEIN_MEAN_TOL = 0.1

#: At most this many draws beyond the runaway radius (the farthest first) have their
#: log-density evaluated (each costs a full-data pass).
MAX_RUNAWAY_PROBES = 256

_ORDER = {"ok": 0, "suspect": 1, "failed": 2}


@dataclasses.dataclass
class RunawayDraws:
    """Which chains left the posterior, judged by `runaway_draws`.

    Attributes:
      away: ``bool[num_chains]``, the chains with a draw that left the posterior.
      max_radius2: the largest ``‖w‖²`` of any draw.
      threshold: ``q``, `runaway_threshold` of the dimension.
      beyond: how many draws lie beyond the radius (``‖w‖² > q``).
      spared: how many of those were evaluated and found in the posterior's tail
        (``Δ ≤ q / 2``), so left in.
      max_spared_drop: the largest ``Δ`` among the spared draws (``nan`` if none).
      worst_drop: the largest ``Δ`` among the draws that left (``inf`` where the
        log-density was not finite, ``nan`` if none was evaluated).
    """

    away: np.ndarray
    max_radius2: float
    threshold: float
    beyond: int = 0
    spared: int = 0
    max_spared_drop: float = math.nan
    worst_drop: float = math.nan


def runaway_draws(
    w: Any, log_density_drop: Callable[[np.ndarray], np.ndarray] | None = None
) -> RunawayDraws:
    """The chains of ``w`` ``[num_draws, num_chains, d]`` (whitened, finite) that left the
    posterior: a draw beyond the radius, ``‖w‖² > q = runaway_threshold(d)``, and, given
    ``log_density_drop``, ``Δ(w) = log π_w(0) − log π_w(w) > q / 2`` there too (module
    docstring). ``docs/diagnostics.md#verdict``.

    Args:
      w: the whitened draws.
      log_density_drop: ``[k, d] -> [k]``, ``Δ`` of each row (full data); non-finite
        values count as a drop without bound. It is called on the `MAX_RUNAWAY_PROBES`
        farthest draws beyond the radius; if more lie beyond it, the others count as
        left when any evaluated draw of their chain left or when none of their chain's
        was evaluated. Default value: ``None`` (the radius alone decides).

    Returns:
      A `RunawayDraws`.
    """
    w = np.asarray(w, np.float64)
    d = w.shape[-1]
    q = runaway_threshold(d)
    radius2 = np.einsum("tcd,tcd->tc", w, w)
    out = RunawayDraws(away=(radius2 > q).any(axis=0), max_radius2=float(radius2.max()),
                       threshold=q, beyond=int((radius2 > q).sum()))  # fmt: skip
    if log_density_drop is None or not out.beyond:
        return out
    far_t, far_c = np.nonzero(radius2 > q)
    order = np.argsort(-radius2[far_t, far_c], kind="stable")[:MAX_RUNAWAY_PROBES]
    probe_t, probe_c = far_t[order], far_c[order]
    drops = np.asarray(log_density_drop(w[probe_t, probe_c]), np.float64).reshape(-1)
    drops = np.where(np.isfinite(drops), drops, math.inf)
    left = drops > q / 2
    away = np.zeros(w.shape[1], bool)
    away[probe_c[left]] = True
    # Draws beyond the radius that were not evaluated: their chain counts as left unless
    # every one of its evaluated draws was spared (the farthest were evaluated first).
    evaluated = np.zeros_like(radius2, bool)
    evaluated[probe_t, probe_c] = True
    unevaluated = (radius2 > q) & ~evaluated
    probed_chains = np.zeros(w.shape[1], bool)
    probed_chains[probe_c] = True
    away |= unevaluated.any(axis=0) & ~probed_chains
    out.away = away
    out.spared = int((~left).sum())
    out.max_spared_drop = float(drops[~left].max()) if (~left).any() else math.nan
    out.worst_drop = float(drops[left].max()) if left.any() else math.nan
    return out


@dataclasses.dataclass
class Verdict:
    """The verdict of a run, its reasons, and the numbers behind them.

    Attributes:
      status: ``"ok"``, ``"suspect"`` or ``"failed"``.
      reasons: one sentence per check that fired (empty when ``ok``).
      stats: the numbers the checks read (max R̂, min ESS, ...).
    """

    status: str = "ok"
    reasons: list[str] = dataclasses.field(default_factory=list)
    stats: dict[str, float] = dataclasses.field(default_factory=dict)

    def add(self, status: str, reason: str) -> None:
        """Record a check that fired; the status is the worst seen."""
        if _ORDER[status] > _ORDER[self.status]:
            self.status = status
        self.reasons.append(reason)

    def __str__(self) -> str:
        if not self.reasons:
            return self.status
        return self.status + ": " + "; ".join(self.reasons)


def _rank_normal(x: np.ndarray) -> np.ndarray:
    """Rank-normalised draws ``[T, C, d]``: ranks over all draws of a coordinate, mapped
    through the normal quantile ``Φ⁻¹((r − 3/8)/(S + 1/4))`` (Vehtari et al. 2021)."""
    t, c, d = x.shape
    flat = x.reshape(t * c, d)
    ranks = flat.argsort(axis=0, kind="stable").argsort(axis=0, kind="stable") + 1.0
    z = special.ndtri((ranks - 0.375) / (t * c + 0.25))
    return z.reshape(t, c, d)


def _rhat_ess(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Split R̂ and cross-chain ESS per coordinate of ``x`` ``[T, C, d]``."""
    t = tf.constant(x)
    rhat = tfp.mcmc.potential_scale_reduction(t, independent_chain_ndims=1, split_chains=True)
    with quiet_real_part_cast():  # TFP's FFT autocorrelation casts complex to real
        ess = tfp.mcmc.effective_sample_size(t, cross_chain_dims=1)
    return rhat.numpy(), ess.numpy()


def bulk_mixing(x: Any) -> tuple[float, float]:
    """The worst rank-normalised split R̂ and the smallest bulk ESS of draws ``[T, C, d]``.

    R̂ is the larger of the rank-normalised and the folded rank-normalised split R̂
    (the latter sees chains that agree in location but not in spread); the bulk ESS is
    the cross-chain ESS of the rank-normalised draws (Vehtari et al. 2021). Both are
    invariant under monotone maps of a coordinate and defined for heavy tails.

    Raises:
      ValueError: ``x`` is not ``[num_draws >= 4, num_chains >= 2, d]``.
    """
    x = np.asarray(x, np.float64)
    if x.ndim != 3 or x.shape[0] < 4 or x.shape[1] < 2:
        raise ValueError(
            f"`x` must be [num_draws >= 4, num_chains >= 2, d], got shape {list(x.shape)}."
        )
    if not np.isfinite(x).all():
        return math.inf, 0.0
    z = _rank_normal(x)
    folded = _rank_normal(np.abs(x - np.median(x.reshape(-1, x.shape[-1]), axis=0)))
    rhat_z, ess_z = _rhat_ess(z)
    rhat_f, _ = _rhat_ess(folded)
    rhat = np.fmax(rhat_z, rhat_f)
    max_rhat = float(np.nanmax(rhat)) if np.isfinite(rhat).any() else math.inf
    min_ess = float(np.nanmin(ess_z)) if np.isfinite(ess_z).any() else 0.0
    return max_rhat, min_ess


def stein_moment_check(w: Any, scores: Any) -> Verdict:
    r"""Do the draws agree with the posterior's own score? Two Stein identities per coordinate.

    For a density ``π`` with score ``s = ∇ log π`` (decaying at its tails), integration
    by parts gives ``E_π[s_j] = 0`` and ``E_π[(w_j − c) s_j] = −1`` for any constant
    ``c``. On the draws, ``m_j = mean(s_j)`` and ``v_j = −mean((w_j − w̄_j) s_j)``
    measure how far they are from ``π``: for a unit Gaussian target, draws shifted by
    ``δ`` give ``m_j = −δ`` and draws of variance ``σ²`` give ``v_j = σ²``. Unlike R̂,
    the ESS and the Gaussian inflation bound, which read the draws alone, this reads
    the full-data score at the draws, so a bias shared by every chain (a step too large
    for a heavy tail, a skewed marginal) shows. ``suspect`` when ``|v_j − 1|`` exceeds
    `STEIN_VARIANCE_TOL` or ``|m_j|`` exceeds `STEIN_MEAN_TOL` by more than twice the
    Monte Carlo error (from the cross-chain ESS of each product). The spread ``v_j``
    is `tfp_sgmcmc.diagnostics.validity.stein_moments`'s, whose gross-failure checks
    use margins of a factor ten; this check resolves a tenth of a standard deviation.

    Args:
      w: whitened draws ``[T, C, d]`` (a subsample of a run is enough).
      scores: the full-data whitened scores at ``w``, ``[T, C, d]``.

    Raises:
      ValueError: the shapes differ or are not ``[T >= 4, C >= 2, d]``.
    """
    w = np.asarray(w, np.float64)
    s = np.asarray(scores, np.float64)
    if w.shape != s.shape or w.ndim != 3 or w.shape[0] < 4 or w.shape[1] < 2:
        raise ValueError(
            "`w` and `scores` must both be [T >= 4, C >= 2, d], got shapes "
            f"{list(w.shape)} and {list(s.shape)}."
        )
    out = Verdict()
    if not (np.isfinite(w).all() and np.isfinite(s).all()):
        out.add("suspect", "the Stein check met non-finite draws or scores")
        return out
    d = w.shape[-1]
    centred = w - w.reshape(-1, d).mean(axis=0)
    products = {"mean": s, "variance": -centred * s}
    means = {
        "mean": s.reshape(-1, d).mean(axis=0),
        "variance": stein_moments(w.reshape(-1, d), s.reshape(-1, d)).spread,
    }
    values = {}
    for key, h in products.items():
        value = means[key]
        sd = h.reshape(-1, d).std(axis=0, ddof=1)
        if np.all(sd > 0):
            _, ess = _rhat_ess(h)
            ess = np.clip(np.nan_to_num(ess, nan=1.0), 1.0, h.shape[0] * h.shape[1])
        else:
            ess = np.full(h.shape[-1], float(h.shape[0] * h.shape[1]))
        values[key] = (value, sd / np.sqrt(ess))
    v, v_se = values["variance"]
    m, m_se = values["mean"]
    v_excess = np.abs(v - 1.0) - 2.0 * v_se
    m_excess = np.abs(m) - 2.0 * m_se
    j = int(np.argmax(np.abs(v - 1.0)))
    out.stats["stein_variance_worst"] = float(v[j])
    out.stats["stein_variance_se"] = float(v_se[j])
    k = int(np.argmax(np.abs(m)))
    out.stats["stein_mean_worst"] = float(m[k])
    out.stats["stein_mean_se"] = float(m_se[k])
    if (v_excess > STEIN_VARIANCE_TOL).any():
        j = int(np.argmax(v_excess))
        out.add(
            "suspect",
            "the draws disagree with the posterior's score (Stein variance check): in "
            f"whitened direction {j}, -E[(w - mean) * score] = {v[j]:.3g} "
            f"(± {v_se[j]:.2g}) where exact draws give 1, so the spread is off by about "
            f"{100 * abs(math.sqrt(max(v[j], 0.0)) - 1):.0f}% (a step too large for a "
            "heavy or skewed tail, or gradient noise)",
        )
    if (m_excess > STEIN_MEAN_TOL).any():
        k = int(np.argmax(m_excess))
        out.add(
            "suspect",
            "the draws disagree with the posterior's score (Stein mean check): in "
            f"whitened direction {k}, E[score] = {m[k]:.3g} (± {m_se[k]:.2g}) where "
            "exact draws give 0, so the location is off by about "
            f"{abs(m[k]):.2g} posterior sd",
        )
    return out


def judge_whitened_draws(
    w: Any,
    step_size: float | None = None,
    noise_variance: np.ndarray | None = None,
    *,
    min_ess: float = MIN_ESS,
    log_density_drop: Callable[[np.ndarray], np.ndarray] | None = None,
) -> Verdict:
    """The verdict on draws ``w`` ``[num_draws, num_chains, d]`` in whitened coordinates.

    Args:
      w: the draws, whitened with the Laplace approximation at the mode.
      step_size: SGLD's ``ε`` in whitened units, for the bias check.
        Default value: ``None`` (no bias check).
      noise_variance: ``V``, the minibatch-gradient variance per whitened
        coordinate (``[d]``), for the bias check. Default value: ``None``
        (discretisation bias only).
      min_ess: the fewest effective draws of an ``ok`` run. Default value:
        `MIN_ESS`.
      log_density_drop: ``[k, d] -> [k]``, the full-data ``log π_w(0) − log π_w(w)`` of
        draws; given, a draw beyond the runaway radius left the posterior only where
        this exceeds ``q / 2`` (`runaway_draws`). Default value: ``None`` (the radius
        alone).

    Raises:
      ValueError: ``w`` is not ``[num_draws, num_chains, d]`` with at least 4
        draws and 2 chains.
    """
    w = np.asarray(w, np.float64)
    if w.ndim != 3 or w.shape[0] < 4 or w.shape[1] < 2:
        raise ValueError(
            "`w` must be [num_draws >= 4, num_chains >= 2, d], got shape "
            f"{list(w.shape)}."
        )
    t, c, d = w.shape
    out = Verdict()
    finite = np.isfinite(w).all(axis=(0, 2))
    out.stats["nonfinite_chains"] = float(c - finite.sum())
    if not finite.all():
        out.add("failed", f"{int(c - finite.sum())} of {c} chains have non-finite draws")
        return out
    runaway = runaway_draws(w, log_density_drop)
    q = runaway.threshold
    out.stats["max_whitened_radius2"] = runaway.max_radius2
    out.stats["tail_draws_beyond_radius"] = float(runaway.spared)
    if runaway.away.any():
        where = ""
        if math.isfinite(runaway.worst_drop):
            where = f", where log π is {runaway.worst_drop:.3g} below the mode"
        elif runaway.worst_drop == math.inf:
            where = ", where log π is not finite"
        out.add(
            "failed",
            f"{int(runaway.away.sum())} of {c} chains left the posterior (a draw "
            f"{math.sqrt(runaway.max_radius2):.3g} Laplace scales from the mode, beyond "
            f"{math.sqrt(q):.3g}{where})",
        )
    chain_sd = np.median(w.std(axis=0), axis=-1)
    out.stats["min_chain_sd"] = float(chain_sd.min())
    frozen = chain_sd < FROZEN_SD
    if frozen.any():
        out.add(
            "failed",
            f"{int(frozen.sum())} of {c} chains did not move (median sd "
            f"{chain_sd.min():.2g} of the posterior's scale)",
        )
    x = tf.constant(w)
    rhat = tfp.mcmc.potential_scale_reduction(x, independent_chain_ndims=1, split_chains=True)
    max_rhat = float(np.nanmax(rhat.numpy()))
    with quiet_real_part_cast():  # TFP's FFT autocorrelation casts complex to real
        ess = tfp.mcmc.effective_sample_size(x, cross_chain_dims=1).numpy()
    min_ess_seen = float(np.nanmin(ess))
    out.stats["max_rhat"] = max_rhat
    out.stats["min_ess"] = min_ess_seen
    if not np.isfinite(max_rhat) or max_rhat > RHAT_FAILED:
        out.add("failed", f"the chains disagree (split R-hat {max_rhat:.3g} > {RHAT_FAILED})")
    elif max_rhat > RHAT_SUSPECT:
        out.add("suspect", f"the chains may disagree (split R-hat {max_rhat:.3g})")
    if not np.isfinite(min_ess_seen) or min_ess_seen < min_ess:
        out.add(
            "suspect", f"too few effective draws (min ESS {min_ess_seen:.0f} < {min_ess:.0f})"
        )
    if step_size is not None:
        eps = float(step_size)
        r = 0.0 if noise_variance is None else float(np.max(eps * np.asarray(noise_variance) / 2))
        inflation = math.sqrt((1.0 + r) / max(1.0 - eps / 2.0, 1e-12))
        out.stats["noise_ratio"] = r
        out.stats["predicted_sd_inflation"] = inflation
        mixed = np.isfinite(max_rhat) and max_rhat <= RHAT_SUSPECT
        if mixed and inflation > MAX_SD_INFLATION:
            out.add(
                "suspect",
                f"the step size and gradient noise inflate standard deviations by about "
                f"{100 * (inflation - 1):.0f}% (noise ratio {r:.2g}, step {eps:.3g})",
            )
    return out
