r"""Successive halving: the one pruning rule of the library's tuners.

Given ``M`` arms, a pruning rate ``η`` and ``K`` rounds (Jamieson & Talwalkar [1];
Algorithm 1 of Coullon, South & Nemeth [2], docs/algorithms.md#mamba):

```none
S_0 = all arms
for i = 0 … K−1:
    m_j = run_round(i, S_i)[j]             # the metric of each arm of S_i (lower is better)
    ranked = S_i sorted by (m_j, position in S_i)   # stable: ties keep grid order
    S_{i+1} = the max(1, ⌊|S_i|/η⌋) first of ranked       (i < K−1)
return ranked                               # of the last round; the best arm first
```

``run_round`` decides how long each arm runs in round ``i`` (MAMBA's
``r_i = T / (|S_i| K)``, which grows by ``η`` a round as ``|S_i|`` shrinks by it, or
``sample_posterior``'s steps ``η^i`` times its first round's) and what the metric is.

``drop_unusable`` removes arms whose metric is not finite from every survivor set
(``sample_posterior``: a disqualified arm cannot win, and when no arm is left the
caller tries other settings). Without it (MAMBA, as the paper's code) such an arm
ranks last but may still survive a round when too few arms are usable.

Used by [`MAMBA`][tfp_sgmcmc.tuning.MAMBA] and by
[`sample_posterior`][tfp_sgmcmc.automatic.sample_posterior]; the test of the rule is
``tests/tuning/test_halving.py``.

#### References

[1]: Kevin Jamieson and Ameet Talwalkar. Non-stochastic best arm identification and
     hyperparameter optimization. In _AISTATS_, 2016.
[2]: Jeremie Coullon, Leah South and Christopher Nemeth. Stochastic gradient MCMC with
     multi-armed bandit tuning. _arXiv:2105.13059_, 2021.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import NamedTuple

from tfp_sgmcmc.internal.util import check_int

__all__ = ["HalvingResult", "successive_halving"]


class HalvingResult(NamedTuple):
    """What [`successive_halving`][tfp_sgmcmc.tuning.halving.successive_halving] returns.

    Attributes:
      ranked: the arms of the last round run, best first (empty when
        ``drop_unusable`` left none).
      survivors: ``S_0, S_1, …``: the arms each round ran, in order.
      metrics: ``metrics[i][j]``: arm ``j``'s metric in round ``i``.
    """

    ranked: list[Hashable]
    survivors: list[list[Hashable]]
    metrics: list[dict[Hashable, float]]

    @property
    def best(self) -> Hashable | None:
        """The winning arm (``None`` when no arm was left)."""
        return self.ranked[0] if self.ranked else None


def successive_halving(
    arms: Sequence[Hashable],
    num_rounds: int,
    eta: int,
    run_round: Callable[[int, list[Hashable]], Mapping[Hashable, float]],
    *,
    drop_unusable: bool = False,
) -> HalvingResult:
    """Runs the rule of the module docstring.

    Args:
      arms: the arms' keys (indices, or any hashable), in grid order.
      num_rounds: ``K ≥ 1``.
      eta: the pruning rate ``η ≥ 2``.
      run_round: ``run_round(i, survivors) -> {arm: metric}`` runs round ``i`` for every
        arm of ``survivors`` and returns each one's metric (lower is better; ``NaN`` is
        taken as ``+∞``).
      drop_unusable: drop arms whose metric is not finite (module docstring). Default
        value: ``False``.

    Returns:
      A [`HalvingResult`][tfp_sgmcmc.tuning.halving.HalvingResult].

    Raises:
      ValueError: no arms, ``num_rounds < 1``, ``eta < 2``, duplicate arms, or a
        ``run_round`` that left out an arm of the round.
    """
    survivors = list(arms)
    if not survivors:
        raise ValueError("`arms` must not be empty.")
    if len(set(survivors)) != len(survivors):
        raise ValueError("`arms` must be distinct keys.")
    num_rounds = check_int(num_rounds, "num_rounds", 1)
    eta = check_int(eta, "eta", 2)
    history: list[list[Hashable]] = []
    metrics: list[dict[Hashable, float]] = []
    ranked: list[Hashable] = []
    for i in range(num_rounds):
        history.append(list(survivors))
        got = dict(run_round(i, list(survivors)))
        missing = [a for a in survivors if a not in got]
        if missing:
            raise ValueError(f"`run_round` gave no metric for arm(s) {missing} in round {i}.")
        m = {a: _as_metric(got[a]) for a in survivors}
        metrics.append(m)
        position = {a: k for k, a in enumerate(survivors)}
        ranked = sorted(survivors, key=lambda a: (m[a], position[a]))
        if drop_unusable:
            ranked = [a for a in ranked if math.isfinite(m[a])]
        if i < num_rounds - 1:
            survivors = ranked[: max(1, len(survivors) // eta)]
            if not survivors:
                break
    return HalvingResult(ranked=ranked, survivors=history, metrics=metrics)


def _as_metric(x: float) -> float:
    x = float(x)
    return math.inf if math.isnan(x) else x
