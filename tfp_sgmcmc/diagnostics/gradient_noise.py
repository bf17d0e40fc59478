r"""Gradient-noise ratio: is the minibatch noise dominated by the injected noise?

A stochastic-gradient sampler adds two kinds of noise per update: the noise it
injects on purpose (what makes it sample the target) and the minibatch noise of
its gradient estimate ``ĝ = ∇ log π̃(θ)`` (what makes it *wrong* when it is not
small). Per parameter ``j``, with ``V_j = Var(ĝ_j | θ)`` the variance of the
estimator over independent minibatch draws at the current state, the ratio of
the minibatch-noise variance to the injected variance of one update is:

```none
SGLD   θ ← θ + ε ĝ + √(2εT) ξ                 r_j = ε² V_j / (2εT)          = ε V_j / (2T)
SGHMC  v ← v + η ĝ − α v + √(2(α − β̂)ηT) ξ    r_j = η² V_j / (2(α − β̂)ηT)   = η V_j / (2(α − β̂)T)
SGNHT  v ← v − ζ v + h ĝ + √(2ahT) ξ           r_j = h² V_j / (2ahT)         = h V_j / (2aT)
```

Welling & Teh (2011, Sec. 4, their ``h = 2ε``) show that SGLD samples the
target when the injected noise dominates, ``(h²/4) V ≪ h``, i.e. ``r ≪ 1``;
Chen, Fox & Guestrin (2014, Sec. 3.2 and eq. 15) require the gradient noise of
the momentum, ``B = ½ η V``, to be at most the friction's noise budget, i.e.
``r ≤ 1`` with ``β̂ = 0`` and exactness only as ``r → 0``. The total per-update
noise is ``2εT (1 + r)`` instead of ``2εT``: on a Gaussian target with SGLD the
stationary variance along a parameter is inflated by the factor ``1 + r``
(standard deviation by ``√(1 + r)``) on top of the O(ε) discretisation bias.
SGNHT's thermostat absorbs unknown noise in expectation (Ding et al. 2014,
Sec. 3), so for it ``r`` says how much of the friction is spent absorbing
minibatch noise (slower mixing) rather than a bias; it is reported, never
flagged.

``V_j`` is estimated from ``num_probes`` independent minibatch draws at one
state (unbiased sample variance), so ``r`` costs ``num_probes`` minibatch
gradients. The default threshold ``0.1`` flags runs whose standard deviations
may be inflated by more than about 5%. See ``docs/diagnostics.md``.

#### References

[1]: Max Welling and Yee Whye Teh. Bayesian learning via stochastic gradient
     Langevin dynamics. In _ICML_, 2011.
[2]: Tianqi Chen, Emily B. Fox and Carlos Guestrin. Stochastic gradient
     Hamiltonian Monte Carlo. In _ICML_, 2014.
[3]: Nan Ding, Youhan Fang, Ryan Babbush, Changyou Chen, Robert D. Skeel and
     Hartmut Neven. Bayesian sampling using stochastic gradient thermostats. In
     _NeurIPS_, 2014.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import tensorflow as tf

from tfp_sgmcmc.internal.util import as_parts, restructure, split_seed

__all__ = [
    "GradientNoiseReport",
    "gradient_noise_ratio",
    "noise_ratio_coefficient",
    "NOISE_RATIO_THRESHOLD",
]

#: ``r`` above this flags a run (standard deviations inflated by ≳ 5% for SGLD).
NOISE_RATIO_THRESHOLD = 0.1


@dataclasses.dataclass
class GradientNoiseReport:
    """The gradient-noise ratio ``r`` of a kernel at one state (module docstring).

    Attributes:
      kernel: the kernel's class name.
      ratio: ``r`` per state part, each the shape of the part (chains included).
      max: the largest ``r`` over all parameters and chains.
      median: the median ``r``.
      threshold: the value above which ``violated`` is set.
      num_probes: minibatch draws the variance was estimated from.
      flagged: whether the kernel's correctness depends on ``r ≪ 1`` (False
        for SGNHT, whose thermostat absorbs the noise).
    """

    kernel: str
    ratio: list[np.ndarray]
    max: float
    median: float
    threshold: float
    num_probes: int
    flagged: bool = True

    @property
    def violated(self) -> bool:
        """``max > threshold`` for a kernel whose stationary law needs ``r ≪ 1``."""
        return self.flagged and not self.max <= self.threshold

    def message(self) -> str:
        """One line that says what is wrong and what to change."""
        head = (
            f"gradient-noise ratio r = ε²Var(ĝ)/(injected variance) of {self.kernel}: "
            f"max {self.max:.3g}, median {self.median:.3g} ({self.num_probes} minibatch probes)"
        )
        if not self.violated:
            return head + f"; below {self.threshold:g}: the injected noise dominates."
        return (
            head + f"; above {self.threshold:g}: the minibatch noise inflates the posterior "
            f"variance by up to a factor {1 + self.max:.3g}. Use a smaller step size, a larger "
            "batch size or a control-variate estimator."
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable summary (``gradient_noise.json``, ``diagnostics.json``).

        One flag, ``too_noisy`` (``violated``: the minibatch noise is too large for this
        kernel). ``threshold`` is ``None`` for a kernel whose ratio is reported but never
        checked (SGNHT), so a large ``max`` beside ``too_noisy: false`` explains itself.
        (Files written before this held two flags, ``flagged`` and ``violated``;
        ``SamplingRun.gradient_noise`` reads both formats.)
        """
        return {
            "kernel": self.kernel,
            "max": float(self.max),
            "median": float(self.median),
            "threshold": float(self.threshold) if self.flagged else None,
            "num_probes": int(self.num_probes),
            "too_noisy": bool(self.violated),
        }


def noise_ratio_coefficient(kernel: Any, dtype: tf.DType, step: Any = 0) -> tuple[Any, bool]:
    """``(c, flagged)`` with ``r = c · Var(ĝ)`` for ``kernel`` (module docstring).

    The kernel says how its ratio is computed
    ([`SGMCMCKernel.gradient_noise_coefficient`][tfp_sgmcmc.kernels.SGMCMCKernel.gradient_noise_coefficient]),
    at its step size and temperature of step ``step``. Returns ``(None, False)`` for
    kernels the ratio is not derived for (a preconditioned or transformed drift,
    structured or SA kernels, wrappers) and for ``T = 0`` (optimisation: no injected
    noise).
    """
    coefficient = getattr(kernel, "gradient_noise_coefficient", None)
    if coefficient is None:
        return None, False
    step_t = tf.constant(step, tf.int32)
    temp = float(kernel.temperature_schedule(step_t, dtype))
    if not temp > 0:
        return None, False
    eps = float(kernel.step_size_schedule(step_t, dtype))
    found = coefficient(eps, temp)
    return (None, False) if found is None else found


def gradient_noise_ratio(
    kernel: Any,
    state: Any,
    num_probes: int = 64,
    seed: Any = 0,
    step: int = 0,
    threshold: float = NOISE_RATIO_THRESHOLD,
) -> GradientNoiseReport | None:
    """The gradient-noise ratio ``r`` of ``kernel`` at ``state`` (module docstring).

    Draws ``num_probes`` independent minibatches at ``state`` (fresh estimator
    state each time, seeds split from ``seed``), takes the per-parameter sample
    variance ``V`` of the estimated score, and returns ``r = c · V`` with the
    kernel's coefficient ``c`` from
    [`noise_ratio_coefficient`][tfp_sgmcmc.diagnostics.gradient_noise.noise_ratio_coefficient].

    Args:
      kernel: an SGLD, SGHMC or SGNHT kernel (any estimator, control variates
        included).
      state: the state (tensor or list of parts, leading chain dimensions allowed).
      num_probes: independent minibatch draws, ``≥ 2``. Each ``r_j`` is a sample
        variance of ``num_probes`` draws, relative standard deviation about
        ``√(2/(num_probes − 1))``; the default makes that 0.18, so a coordinate whose
        ratio is half the threshold is flagged with probability about 4·10⁻⁶.
        Default value: ``64``.
      seed: seed of the probes (int or int pair). Default value: ``0``.
      step: step index at which schedules (step size, temperature) are
        evaluated. Default value: ``0``.
      threshold: ``r`` above which the report is ``violated``. Default value:
        ``NOISE_RATIO_THRESHOLD`` (0.1).

    Returns:
      A [`GradientNoiseReport`][tfp_sgmcmc.diagnostics.GradientNoiseReport], or
      ``None`` for a kernel the ratio is not derived for.

    Raises:
      ValueError: ``num_probes < 2``, a non-positive ``threshold``, a kernel
        without an ``estimator``, or a non-finite state.
    """
    if not isinstance(num_probes, int) or isinstance(num_probes, bool) or num_probes < 2:
        raise ValueError(f"`num_probes` must be an int >= 2, got {num_probes!r}.")
    if not float(threshold) > 0:
        raise ValueError(f"`threshold` must be > 0, got {threshold!r}.")
    estimator = getattr(kernel, "estimator", None)
    if estimator is None:
        raise ValueError(f"`kernel` must have an `estimator`, got {type(kernel).__name__}.")
    parts = [tf.convert_to_tensor(p) for p in as_parts(state)]
    for p in parts:
        if not np.all(np.isfinite(p.numpy())):
            raise ValueError("`state` has non-finite values: the ratio is undefined there.")
    coeff, flagged = noise_ratio_coefficient(kernel, parts[0].dtype, step)
    if coeff is None:
        return None
    like = restructure(parts, state)
    seeds = split_seed(seed if not isinstance(seed, int) else [0, seed], num_probes, "noise")

    @tf.function(autograph=False)
    def probe(s: tf.Tensor) -> list[tf.Tensor]:
        est, _ = estimator(like, estimator.bootstrap(like), s)
        return list(est.grads_target_log_prob)

    draws = [probe(s) for s in seeds]
    ratio = []
    for i in range(len(parts)):
        g = np.stack([np.asarray(d[i], np.float64) for d in draws])
        ratio.append(coeff * np.var(g, axis=0, ddof=1))
    flat = np.concatenate([r.ravel() for r in ratio])
    return GradientNoiseReport(
        kernel=type(kernel).__name__,
        ratio=ratio,
        max=float(np.max(flat)),
        median=float(np.median(flat)),
        threshold=float(threshold),
        num_probes=num_probes,
        flagged=flagged,
    )
