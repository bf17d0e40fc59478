"""Reference Bayesian models with their data generators and stored ground truth.

* [`tfp_sgmcmc.models.logistic_regression`][tfp_sgmcmc.models.logistic_regression]: the MAMBA
  paper's logistic
  regression (N = 10⁶ rows, d = 10) with a full-batch HMC ground truth.
* [`tfp_sgmcmc.models.bnn_digits`][tfp_sgmcmc.models.bnn_digits]: a Keras 3 Bayesian MLP on
  scikit-learn's
  bundled 8×8 digits (needs the ``models`` extra: ``pip install "tfp-sgmcmc[models]"``).
* `tfp_sgmcmc.models.pmf`: the paper's Bayesian PMF (§4.2) on a MovieLens file or a
  synthetic stand-in of MovieLens-100K's shape, with an HMC ground truth.
* `tfp_sgmcmc.models.mnist_bnn`: the paper's 784-100-10 BNN (§4.3) on the MNIST files
  or a synthetic stand-in of MNIST's shape (plain TF and Keras 3).
* `tfp_sgmcmc.models.data_files`: readers of MovieLens (``u.data``, ``ratings.csv``)
  and MNIST (IDX, ``mnist.npz``) files the user already has; nothing is downloaded.

Each module is imported on demand, so ``import tfp_sgmcmc`` stays light.
"""

__all__: list[str] = []
