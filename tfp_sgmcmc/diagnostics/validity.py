r"""Whether a sample can be the posterior at all, from Stein's identity (named reasons).

A Stein discrepancy ranks samples; before ranking, a tuner must throw out the
samples that cannot be right whatever their score: a chain that did not move and a
chain far from the posterior. Both are measured in the posterior's own scale,
which the full-data score gives without a reference sample. For a smooth density
``π`` with score ``s = ∇ log π`` and any coordinate ``j``, integration by parts
gives Stein's identities (Stein 1972; Gorham & Mackey 2015)

```none
E_π[s_j(θ)] = 0,            −E_π[(θ_j − c) s_j(θ)] = 1        (any constant c)
```

so on a sample ``θ_1..θ_n`` with scores ``s_i`` (``θ̄`` its mean)

```none
v_j = −(1/n) Σ_i (θ_ij − θ̄_j) s_ij      ≈ 1 for draws of π
```

For a Gaussian posterior ``v_j`` is the sample's variance over the posterior's in
coordinate ``j``; in general it is the sample's spread in the units the score
measures. The checks, each with its reason:

* **not at the posterior**: ``min_j v_j < 0``: in that coordinate the draws rise
  with the score, as on a chain still drifting toward the posterior or sitting
  on a ridge of the density (between modes), which a narrow posterior never
  gives (``v_j ≥ 0`` for any Gaussian sample).
* **did not move**: ``0 ≤ min_j v_j < frozen`` (default ``0.01``: a coordinate whose
  spread is under a tenth of the posterior's);
* **far from the posterior**, over-dispersed: ``max_j v_j > 1 / frozen`` (spread
  over ten times the posterior's);
* **far from the posterior**, one-sided score: for some ``j``,
  ``(mean_i s_ij)² > one_sided · mean_i s_ij²`` (default ``0.95``): the score
  points the same way at nearly every draw, as on a chain drifting through a
  tail (a chain whose scale parameter ran off to ``10¹⁴³`` has a tiny, constant
  score there, which a unit-scale Stein kernel cannot see).

These are gross-failure checks with wide margins. On draws of a Gaussian
posterior with ``n_eff`` effective draws, ``v_j ~ χ²_{n_eff}/n_eff`` (below
``0.01`` with probability under ``10⁻⁹`` at ``n_eff = 10``) and the one-sidedness
is ``χ²_1/n_eff`` (above ``0.95`` with probability about ``0.002`` per coordinate
at ``n_eff = 10``, under ``2·10⁻⁵`` at ``n_eff = 20``); the failures above miss
them by orders of magnitude. ``docs/diagnostics.md#validity``.

**Many coordinates.** The limits are per coordinate, and a sample is flagged when
any coordinate crosses one, so with ``d`` coordinates the false alarms add up: at
``d = 10⁵`` and 5 draws per arm, exact draws are flagged "far from the posterior"
(some coordinate's one-sidedness passes ``0.95``; ``Beta(½, 2)`` exceeds it with
probability about ``10⁻³``). For ``n`` independent draws of a Gaussian posterior with diagonal
covariance the statistics are exactly distributed as

```none
one-sidedness_j ~ Beta(1/2, (n − 1)/2),      n v_j ~ χ²_{n−1}
```

so [`familywise_thresholds`][tfp_sgmcmc.diagnostics.validity.familywise_thresholds]
widens each limit (never narrows it) to the ``α/d`` quantile (Bonferroni), which
all ``d`` coordinates of exact draws pass together with probability ``≥ 1 − α``.
A limit past what the statistic can reach (a one-sidedness limit ``≥ 1``) turns
that check off: with so few draws per coordinate it cannot tell.

#### References

[1]: Charles Stein. A bound for the error in the normal approximation to the
     distribution of a sum of dependent random variables. In _Proc. Sixth
     Berkeley Symposium_, 1972.
[2]: Jackson Gorham and Lester Mackey. Measuring sample quality with Stein's
     method. In _NeurIPS_, 2015.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from scipy import stats

__all__ = ["SteinMoments", "familywise_thresholds", "sample_validity", "stein_moments"]

#: ``v_j`` below this: the coordinate did not move; above its inverse: over-dispersed.
FROZEN = 0.01
#: ``mean(s_j)² / mean(s_j²)`` above this: the score points one way.
ONE_SIDED = 0.95


class SteinMoments(NamedTuple):
    """Per-coordinate Stein moments of a sample (module docstring).

    Attributes:
      spread: ``v_j = −mean_i (θ_ij − θ̄_j) s_ij``, about 1 on draws of the posterior.
      one_sidedness: ``(mean_i s_ij)² / mean_i s_ij²`` in ``[0, 1]``, about
        ``1/n_eff`` on draws of the posterior.
    """

    spread: np.ndarray
    one_sidedness: np.ndarray


def _flat(parts: Any) -> np.ndarray:
    if isinstance(parts, np.ndarray) or not isinstance(parts, (list, tuple)):
        parts = [parts]
    arrays = [np.asarray(p, np.float64) for p in parts]
    n = arrays[0].shape[0]
    return np.concatenate([a.reshape(n, -1) for a in arrays], axis=1)


def stein_moments(samples: Any, scores: Any) -> SteinMoments:
    """The Stein moments of ``samples`` ``[n, ...]`` (a tensor or a list of parts) and
    their full-data ``scores`` of the same shapes.

    Raises:
      ValueError: shapes differ, fewer than two samples, or non-finite values.
    """
    x, s = _flat(samples), _flat(scores)
    if x.shape != s.shape:
        raise ValueError(
            f"`scores` must have the samples' shape {list(x.shape)}, got {list(s.shape)}."
        )
    if x.shape[0] < 2:
        raise ValueError(f"`samples` must hold at least 2 draws, got {x.shape[0]}.")
    if not (np.isfinite(x).all() and np.isfinite(s).all()):
        raise ValueError("`samples` and `scores` must be finite.")
    spread = -np.mean((x - x.mean(axis=0)) * s, axis=0)
    power = np.mean(s * s, axis=0)
    mean = np.mean(s, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        one_sided = np.where(power > 0, mean * mean / power, 0.0)
    return SteinMoments(spread, one_sided)


def familywise_thresholds(n: int, d: int, alpha: float = 1e-3) -> dict[str, float]:
    """Limits of `sample_validity` that ``n`` exact draws pass in all ``d`` coordinates
    at once with probability ``≥ 1 − alpha`` (module docstring, "Many coordinates").

    Each is the default limit or the Bonferroni quantile (level ``alpha/d``) of the
    statistic's distribution under independent draws of a diagonal Gaussian, whichever
    is wider: ``frozen = min(0.01, q_{α/d}(χ²_{n−1})/n)``,
    ``wide = max(100, q_{1−α/d}(χ²_{n−1})/n)``,
    ``one_sided = max(0.95, q_{1−α/d}(Beta(½, (n−1)/2)))``.

    Args:
      n: draws (at least 2).
      d: flattened coordinates (at least 1).
      alpha: the family-wise false-alarm probability. Default value: ``1e-3``.

    Returns:
      ``{"frozen": ..., "one_sided": ..., "wide": ...}``, keyword arguments of
      `sample_validity`.

    Raises:
      ValueError: ``n < 2``, ``d < 1`` or ``alpha`` outside ``(0, 1)``.
    """
    if int(n) < 2:
        raise ValueError(f"`n` must be >= 2, got {n!r}.")
    if int(d) < 1:
        raise ValueError(f"`d` must be >= 1, got {d!r}.")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"`alpha` must lie in (0, 1), got {alpha!r}.")
    level = alpha / int(d)
    dof = int(n) - 1
    return {
        "frozen": min(FROZEN, float(stats.chi2.ppf(level, dof)) / n),
        "one_sided": max(ONE_SIDED, float(stats.beta.isf(level, 0.5, dof / 2.0))),
        "wide": max(1.0 / FROZEN, float(stats.chi2.isf(level, dof)) / n),
    }


def sample_validity(
    samples: Any,
    scores: Any,
    frozen: float = FROZEN,
    one_sided: float = ONE_SIDED,
    wide: float | None = None,
) -> str:
    """Why ``samples`` cannot be the posterior, or ``""`` (module docstring).

    Args:
      samples: draws ``[n, ...]``, a tensor or a list of parts.
      scores: full-data ``∇ log π`` at ``samples``, of the same shapes.
      frozen: the spread below which a coordinate did not move (and whose inverse
        is the over-dispersion limit unless ``wide`` is given). Default value:
        ``0.01``.
      one_sided: the one-sidedness above which the score points one way.
        Default value: ``0.95``.
      wide: the spread above which a coordinate is over-dispersed. Default value:
        ``None`` (``1/frozen``).

    Returns:
      ``""`` for a sample that passes, else one sentence starting "not at the
      posterior", "did not move" or "far from the posterior" that names the
      coordinate (in flattened order).
    """
    m = stein_moments(samples, scores)
    x = _flat(samples)
    if np.all(x.max(axis=0) == x.min(axis=0)):
        return "did not move (every draw is the same point)"
    j = int(np.argmax(m.one_sidedness))
    if m.one_sidedness[j] > one_sided:
        return (
            f"far from the posterior (the full-data score of coordinate {j} points one "
            f"way: its mean is {np.sqrt(m.one_sidedness[j]):.2f} of its root mean square)"
        )
    j = int(np.argmin(m.spread))
    if m.spread[j] < 0.0:
        # Stein's identity gives v_j = 1 for the posterior whatever its shape; v_j < 0
        # means the draws rise with the score: a chain still drifting, or sitting on a
        # ridge of the density, not a narrow one.
        return (
            f"not at the posterior (coordinate {j}: its draws rise with the full-data "
            f"score, spread {float(m.spread[j]):.2g} by Stein's identity where draws of "
            "the posterior give about 1; the chain is still drifting or sits on a ridge)"
        )
    if m.spread[j] < frozen:
        rel = np.sqrt(max(float(m.spread[j]), 0.0))
        return (
            f"did not move (coordinate {j} spreads {rel:.2g} of the posterior's scale, "
            "by Stein's identity)"
        )
    j = int(np.argmax(m.spread))
    if m.spread[j] > (1.0 / frozen if wide is None else wide):
        return (
            f"far from the posterior (coordinate {j} spreads {np.sqrt(m.spread[j]):.3g} "
            "times the posterior's scale, by Stein's identity)"
        )
    return ""
