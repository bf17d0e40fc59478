r"""Budgets of the MAMBA tuner and the round schedule of Algorithm 1.

MAMBA (Coullon, South & Nemeth, Algorithm 1 [1]) with ``M`` arms and pruning
rate ``η`` runs ``K = ⌊log_η M⌋`` rounds. Round ``i`` runs each of the
``|S_i|`` surviving arms for

$$
r_i = \frac{T}{|S_i| \cdot K}
$$

(seconds, steps or gradient evaluations), then keeps the ``⌊|S_i|/η⌋`` best.
The authors' code is parameterised by ``R``, the total running time of the
arm that survives every round: ``r_0 = R / Σ_{i<K} η^i`` and ``T = r_0 · M · K``
(docs/algorithms.md#mamba). Both parameterisations are offered (``per="total"``
gives ``T``, ``per="arm"`` gives ``R``).

``K`` is computed in integer arithmetic: the authors' ``int(log(M)/log(η))``
gives 4 instead of 5 for ``M = 243, η = 3``.

Units:

* ``"seconds"`` (default, the paper's choice): wall-clock *sampling* time,
  measured after synchronising the device and excluding tracing/compilation
  (reported separately). This is what makes batch size tunable.
* ``"steps"``: sampler iterations (one SGHMC step = ``L`` leapfrog steps);
  deterministic.
* ``"gradient_evaluations"``: per-example likelihood-gradient evaluations,
  ``steps × (estimator calls per step) × (gradients per call) × batch size``
  (``× 1`` for estimators without data); deterministic and, unlike steps, fair
  across batch sizes (the alternative of [2, §3.3.1]).

#### References

[1]: Jeremie Coullon, Leah South and Christopher Nemeth. Stochastic gradient
     MCMC with multi-armed bandit tuning. _arXiv:2105.13059_, 2021.
[2]: Jeremie Coullon, Leah South and Christopher Nemeth. Efficient and
     generalizable tuning strategies for stochastic gradient MCMC.
     _Statistics and Computing_, 2023.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tfp_sgmcmc.internal.util import check_int

__all__ = [
    "steps_for",
    "Budget",
    "UNITS",
    "num_rounds",
    "round_sizes",
    "per_arm_budgets",
    "seconds",
    "steps",
    "gradient_evaluations",
]

UNITS = ("seconds", "steps", "gradient_evaluations")


def num_rounds(num_arms: int, eta: int) -> int:
    """``K = ⌊log_η M⌋`` in exact integer arithmetic (largest ``k`` with ``η^k ≤ M``).

    Raises:
      ValueError: ``num_arms < 1`` or ``eta < 2`` (or not integers).
    """
    _check_eta(eta)
    check_int(num_arms, "num_arms", 1)
    k, power = 0, eta
    while power <= num_arms:
        k += 1
        power *= eta
    return k


def round_sizes(num_arms: int, eta: int) -> list[int]:
    """``|S_0|, …, |S_{K−1}|`` with ``|S_0| = M`` and ``|S_{i+1}| = ⌊|S_i|/η⌋``."""
    sizes = [num_arms]
    for _ in range(num_rounds(num_arms, eta) - 1):
        sizes.append(sizes[-1] // eta)
    return sizes if num_rounds(num_arms, eta) > 0 else []


def _check_eta(eta: int) -> None:
    check_int(eta, "eta", 2)  # the pruning rate


@dataclass(frozen=True)
class Budget:
    """A MAMBA budget.

    Args:
      amount: ``T`` (``per="total"``) or ``R`` (``per="arm"``), in ``unit``.
      unit: ``"seconds"``, ``"steps"`` or ``"gradient_evaluations"``.
        Default value: ``"seconds"``.
      per: ``"total"`` (``T``, the whole tuning run, the paper's form) or
        ``"arm"`` (``R``, the survivor's total, the authors' code).
        Default value: ``"total"``.

    Raises:
      ValueError: non-positive ``amount``, unknown ``unit`` or ``per``.
    """

    amount: float
    unit: str = "seconds"
    per: str = "total"

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ValueError(f"`unit` must be one of {UNITS}, got {self.unit!r}.")
        if self.per not in ("total", "arm"):
            raise ValueError(f"`per` must be 'total' or 'arm', got {self.per!r}.")
        amount = self.amount
        if (
            isinstance(amount, (bool, np.bool_))
            or not isinstance(amount, (int, float, np.integer, np.floating))
            or not math.isfinite(amount)
            or amount <= 0
        ):
            raise ValueError(f"`amount` must be a finite number > 0, got {amount!r}.")
        if isinstance(amount, (np.integer, np.floating)):  # stored as a Python number
            object.__setattr__(self, "amount", amount.item())

    @property
    def deterministic(self) -> bool:
        return self.unit != "seconds"

    def total(self, num_arms: int, eta: int) -> float:
        """``T`` for ``M`` arms: given, or ``r_0 M K`` with ``r_0 = R/Σ_{i<K} η^i``."""
        k = num_rounds(num_arms, eta)
        if self.per == "total":
            return float(self.amount)
        r0 = self.amount / sum(eta**i for i in range(k))
        return r0 * num_arms * k

    def __str__(self) -> str:
        what = "T" if self.per == "total" else "R"
        unit = {"seconds": "s", "steps": " steps", "gradient_evaluations": " grad evals"}[
            self.unit
        ]
        return f"{what}={self.amount:g}{unit}"


def per_arm_budgets(num_arms: int, eta: int, budget: Budget) -> list[float]:
    """``r_i = T/(|S_i| K)`` for every round (in the budget's unit, unrounded).

    Raises:
      ValueError: fewer arms than ``eta`` (``K = 0``: nothing to prune).
    """
    k = num_rounds(num_arms, eta)
    if k == 0:
        raise ValueError(
            f"`arms`: MAMBA needs at least eta={eta} arms to run one round, got {num_arms}."
        )
    total = budget.total(num_arms, eta)
    return [total / (s * k) for s in round_sizes(num_arms, eta)]


def steps_for(amount: float, budget: Budget, cost: int, chains_per_arm: int = 1) -> int:
    """Steps an arm runs for ``amount`` of a deterministic ``budget``.

    Chain-steps and per-example gradients are counted over all
    ``chains_per_arm`` chains (``cost`` is the arm's gradient evaluations per
    step of all its chains), so ``C`` chains each run ``1/C`` of the amount.
    """
    if budget.unit == "steps":
        return int(math.floor(amount / chains_per_arm))
    return int(math.floor(amount / cost))


def seconds(amount: float, per: str = "total") -> Budget:
    """A wall-clock sampling-time budget."""
    return Budget(amount, "seconds", per)


def steps(amount: float, per: str = "total") -> Budget:
    """A budget in sampler steps (deterministic)."""
    return Budget(amount, "steps", per)


def gradient_evaluations(amount: float, per: str = "total") -> Budget:
    """A budget in per-example gradient evaluations (deterministic)."""
    return Budget(amount, "gradient_evaluations", per)
