"""Reference Bayesian models with their data generators and stored ground truth.

* [`tfp_sgmcmc.models.logistic_regression`][tfp_sgmcmc.models.logistic_regression]: the MAMBA
  paper's logistic
  regression (N = 10⁶ rows, d = 10) with a full-batch HMC ground truth.
* [`tfp_sgmcmc.models.bnn_digits`][tfp_sgmcmc.models.bnn_digits]: a Keras 3 Bayesian MLP on
  scikit-learn's
  bundled 8×8 digits (needs the ``models`` extra: ``pip install "tfp-sgmcmc[models]"``).

Each module is imported on demand, so ``import tfp_sgmcmc`` stays light.
"""

__all__: list[str] = []
