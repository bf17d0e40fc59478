r"""One verdict on a finished run: ``ok``, ``suspect`` or ``failed``, with reasons.

Each check is a standard diagnostic that sees one way a run goes wrong; the
verdict is the worst of them, and every check that fires adds a reason:

| check | fails when | verdict |
|---|---|---|
| non-finite draws | any state is NaN/Inf | failed |
| left the posterior | a draw is many posterior scales from the mode (``‖w‖² > q``) | failed |
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
chain always. "Did not move" is a chain whose median whitened standard
deviation is below ``0.05``.

The bias check is the stationary variance of SGLD, ``θ ← θ + ε ĝ + √(2ε) ξ``,
on a unit Gaussian with gradient noise of variance ``V`` per coordinate:
``(2ε + ε²V) / (1 − (1 − ε)²) = (1 + εV/2) / (1 − ε/2)`` (Welling & Teh 2011;
Vollmer, Zygalakis & Teh 2016), so the predicted sd inflation is
``√((1 + r)/(1 − ε/2))`` with ``r = εV/2`` the gradient-noise ratio. It is
claimed only where the chains mixed (R̂ below 1.05). ``docs/diagnostics.md#verdict``.

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
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

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

_ORDER = {"ok": 0, "suspect": 1, "failed": 2}


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


def judge_whitened_draws(
    w: Any,
    step_size: float | None = None,
    noise_variance: np.ndarray | None = None,
) -> Verdict:
    """The verdict on draws ``w`` ``[num_draws, num_chains, d]`` in whitened coordinates.

    Args:
      w: the draws, whitened with the Laplace approximation at the mode.
      step_size: SGLD's ``ε`` in whitened units, for the bias check.
        Default value: ``None`` (no bias check).
      noise_variance: ``V``, the minibatch-gradient variance per whitened
        coordinate (``[d]``), for the bias check. Default value: ``None``
        (discretisation bias only).

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
    radius2 = np.einsum("tcd,tcd->tc", w, w)
    q = runaway_threshold(d)
    out.stats["max_whitened_radius2"] = float(radius2.max())
    away = (radius2 > q).any(axis=0)
    if away.any():
        out.add(
            "failed",
            f"{int(away.sum())} of {c} chains left the posterior (a draw "
            f"{math.sqrt(radius2.max()):.3g} Laplace scales from the mode, beyond "
            f"{math.sqrt(q):.3g})",
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
    min_ess = float(np.nanmin(ess))
    out.stats["max_rhat"] = max_rhat
    out.stats["min_ess"] = min_ess
    if not np.isfinite(max_rhat) or max_rhat > RHAT_FAILED:
        out.add("failed", f"the chains disagree (split R-hat {max_rhat:.3g} > {RHAT_FAILED})")
    elif max_rhat > RHAT_SUSPECT:
        out.add("suspect", f"the chains may disagree (split R-hat {max_rhat:.3g})")
    if not np.isfinite(min_ess) or min_ess < MIN_ESS:
        out.add("suspect", f"too few effective draws (min ESS {min_ess:.0f} < {MIN_ESS:.0f})")
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
